// Flat elementwise kernels on device f32 arrays (the device twins of core/ops.h), launched
// asynchronously on the given stream.
#pragma once

#include <cstddef>
#include <cuda_runtime_api.h>

namespace sparq::cuda {

void fill(float* x, std::size_t n, float value, cudaStream_t stream);
void scale(float* x, std::size_t n, float alpha, cudaStream_t stream);
void axpy(float alpha, const float* x, float* y, std::size_t n, cudaStream_t stream);

}  // namespace sparq::cuda
