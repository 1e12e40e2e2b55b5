# Compression throughput against the memcpy bandwidth of the same machine, same run.
sparq_executable(bench_compress SOURCES ${CMAKE_CURRENT_LIST_DIR}/bench_compress.cpp
                 DEPS sparq_compress)
