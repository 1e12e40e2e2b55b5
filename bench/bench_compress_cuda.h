// bench_compress --device cuda (bench_compress_cuda.cpp, built with CUDA): each device codec's
// throughput in GB/s of f32 bucket input next to the device's copy bandwidth (a device-to-
// device cudaMemcpyAsync of the same bytes, GB/s of bytes copied) measured in the same run.
// Issue 17's targets: blockquant encode >= 60% of copy, lbs rho=0.01 b=4 with error
// feedback >= 25%. Nothing is asserted.
#pragma once

#include <cstddef>
#include <vector>

// Returns the process exit code (2: no device).
int run_device_compress_bench(const std::vector<std::size_t>& sizes_mi, double seconds);
