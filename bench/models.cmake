# Model forward+backward throughput and memory (src/models) next to PyTorch: printed, never asserted.
sparq_executable(bench_models SOURCES bench_models.cpp bench_models_child.cpp
                 bench_models_gpu.cpp bench_models_measure.cpp fma_peak.cpp DEPS sparq_models CLI11::CLI11)
target_compile_definitions(bench_models PRIVATE SPARQ_BENCH_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
