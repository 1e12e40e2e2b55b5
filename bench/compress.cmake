# Compression throughput against the memcpy bandwidth of the same machine, same run; with
# CUDA, --device cuda times the device codecs against the device's copy bandwidth.
set(SPARQ_BENCH_COMPRESS_SOURCES ${CMAKE_CURRENT_LIST_DIR}/bench_compress.cpp)
if(SPARQ_HAS_CUDA)
  list(APPEND SPARQ_BENCH_COMPRESS_SOURCES ${CMAKE_CURRENT_LIST_DIR}/bench_compress_cuda.cpp)
endif()
sparq_executable(bench_compress SOURCES ${SPARQ_BENCH_COMPRESS_SOURCES} DEPS sparq_compress)
