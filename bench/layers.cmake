sparq_executable(bench_layers SOURCES ${CMAKE_CURRENT_LIST_DIR}/bench_layers.cpp DEPS sparq_layers)
# The CPU attention core: flash kernel against the materialized one, same run, interleaved.
sparq_executable(bench_attention SOURCES ${CMAKE_CURRENT_LIST_DIR}/bench_attention.cpp DEPS sparq_layers)
