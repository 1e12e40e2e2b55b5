// randomk (compress/randomk.h) on a CUDA device: the same k stratified positions as the CPU
// (compress/randomk_positions.h) and the same message, f32 values[k] in position order, so
// the bytes are the CPU codec's. Every pointer is device memory; work is enqueued on
// `stream`. fmt-free.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace sparq::cuda {

struct RandomkArgs {
  std::size_t k = 0;                  // positions kept (at the step's density)
  std::uint64_t key = 0, stream = 0;  // the rank-shared draw (randomk.cpp)
};

// g == nullptr: msg = x at the k positions. Otherwise error feedback is fused: x = g + x
// (the residual becomes a), msg = a at the positions, and x = a - D(msg), which is a with the
// sent positions zeroed.
void randomk_encode(const float* g, float* x, std::size_t n, const RandomkArgs& args,
                    std::uint8_t* msg, cudaStream_t stream);

// out = alpha * D(msg) (add == false: zeros elsewhere) or out += alpha * D(msg).
void randomk_decode(const std::uint8_t* msg, std::size_t n, const RandomkArgs& args, float alpha,
                    bool add, float* out, cudaStream_t stream);

}  // namespace sparq::cuda
