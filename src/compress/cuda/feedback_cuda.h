// The first half of error feedback on the device for codecs that do not fuse it into their
// own pass: e = g + e, the CPU's Compressor::accumulate (ops::axpy with alpha 1) bit for bit.
// fmt-free.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

namespace sparq::cuda {

void accumulate_gradient(const float* g, float* e, std::size_t n, cudaStream_t stream);

}  // namespace sparq::cuda
