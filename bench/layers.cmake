sparq_executable(bench_layers SOURCES ${CMAKE_CURRENT_LIST_DIR}/bench_layers.cpp DEPS sparq_layers)
