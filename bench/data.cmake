# Tokenizer throughput (src/data): printed, never asserted.
sparq_executable(bench_tokenizer SOURCES bench_tokenizer.cpp DEPS sparq_data CLI11::CLI11)
target_compile_definitions(bench_tokenizer PRIVATE SPARQ_BENCH_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
