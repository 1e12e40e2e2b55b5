// Scaled dot-product attention core on a fused QKV tensor, scalar-generic (float in
// production, double in the finite-difference tests). Used by MultiHeadAttention
// (attention.h), which adds the projections.
//
//   qkv [B, T, 3C]: per token, q then k then v, each C = heads * D wide (head h is the
//                   D-column slice h of each); this is the layout of GPT-2's c_attn output.
//   probs [B, H, T, T]: softmax(q k^T / sqrt(D) + mask), BEFORE dropout (backward needs it;
//                   the dropout mask is regenerated from the key, never stored).
//   ctx [B, T, C]: dropout(probs) v, heads interleaved back into C columns.
//
// Masks: causal (key j visible to query i iff j <= i) and/or a key-padding mask
// key_valid [B, T] (1 = attend, 0 = padding). A query row with no visible key gets all-zero
// probabilities (and so a zero context) instead of NaN.
// Dropout on probs: element (b, h, i, j) draws Philox number key.first + ((b*H + h)*T + i)*T + j.
//
// Backward OVERWRITES dqkv (every q, k and v column); nothing is accumulated.
// CPU scratch: `slots` per-thread areas of scratch_per_slot(T) elements; at most `slots`
// threads run.
//
// CUDA (cuda::attention_*): the same math on device pointers (qkv, probs, ctx, scratch and
// g.key_valid), in the context's stream: per sequence, strided-batched cuBLAS GEMMs over its
// heads for the scores and the products, and the fused masked softmax, dropout and softmax
// backward kernels of layers/cuda/attention_cuda.h. Scratch: one [B, H, T, T] area
// (attention_scratch_floats), the dropped probabilities and then dP.
#pragma once

#include <cstdint>

#include "layers/dropout.h"

namespace sparq {

struct AttentionGeom {
  std::int64_t batch = 0, seq = 0, dim = 0, heads = 0;
  bool causal = false;
  const std::uint8_t* key_valid = nullptr;  // [batch, seq] or null
  float dropout_p = 0.0f;                   // 0 disables attention dropout
  DropoutKey key;
  std::int64_t head_dim() const { return dim / heads; }
};

namespace cpu {
constexpr std::int64_t attention_scratch_per_slot(std::int64_t seq) { return 2 * seq * seq; }

template <typename T>
void attention_forward(const AttentionGeom& g, const T* qkv, T* probs, T* ctx, T* scratch,
                       int slots);
template <typename T>
void attention_backward(const AttentionGeom& g, const T* qkv, const T* probs, const T* dctx,
                        T* dqkv, T* scratch, int slots);
}  // namespace cpu

#if SPARQ_HAS_CUDA
namespace cuda {
constexpr std::int64_t attention_scratch_floats(std::int64_t batch, std::int64_t heads,
                                                std::int64_t seq) {
  return batch * heads * seq * seq;
}
void attention_forward(const AttentionGeom& g, const DeviceResources& device, const float* qkv,
                       float* probs, float* ctx, float* scratch);
void attention_backward(const AttentionGeom& g, const DeviceResources& device, const float* qkv,
                        const float* probs, const float* dctx, float* dqkv, float* scratch);
}  // namespace cuda
#endif

}  // namespace sparq
