// CUDA kernels of the attention core (the device side of layers/attention_kernels.h): the
// fused masked softmax and its backward, and attention dropout on the probabilities. The
// batched GEMMs around them are cuBLAS calls made by cuda::attention_forward/backward in
// attention_kernels.cpp. Raw device pointers, enqueued on `stream`, never synchronised.
// Free of fmt (nvcc compiles the .cu).
//
// Layout: probabilities are [B, H, T, T]; row (b, h, i) starts at ((b*H + h)*T + i)*T.
// key_valid is a device u8 [B, T] (1 = attend) or null.
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

namespace sparq::cuda {

struct AttentionShape {
  std::int64_t batch = 0, heads = 0, seq = 0;
  bool causal = false;
  const std::uint8_t* key_valid = nullptr;
};

// Dropout on the probabilities: element e of [B, H, T, T] uses Philox position first + e of
// (seed, stream), as cpu::attention_forward does. p == 0 disables it.
struct AttentionDropout {
  float p = 0.0f;
  std::uint64_t seed = 0, stream = 0, first = 0;
};

// In place on `probs`: raw scores q.k in, probabilities out, softmax(scale * scores) over the
// visible keys of each row (causal: j <= i; key_valid), 0 elsewhere; a row with no visible
// key is all zeros. With dropout, also dropped = keep_scale(e) * probs (else untouched).
void attention_softmax_forward(const AttentionShape& shape, float scale,
                               const AttentionDropout& dropout, float* probs, float* dropped,
                               cudaStream_t stream);

// dropped = keep_scale(e) * probs over [B, H, T, T] (the probabilities the context used).
void attention_dropout_probs(const AttentionShape& shape, const AttentionDropout& dropout,
                             const float* probs, float* dropped, cudaStream_t stream);

// In place on `dp`: dP (the gradient of the dropped probabilities) in, dS (the gradient of
// the scaled scores; the dQ and dK GEMMs apply the scale) out: with d = dP * keep_scale(e)
// (d = dP without dropout), dS = P * (d - rowsum(P * d)).
void attention_softmax_backward(const AttentionShape& shape, const AttentionDropout& dropout,
                                const float* probs, float* dp, cudaStream_t stream);

}  // namespace sparq::cuda
