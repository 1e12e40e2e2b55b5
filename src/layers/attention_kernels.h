// Scaled dot-product attention core on a fused QKV tensor, scalar-generic (float in
// production, double in the finite-difference tests). Used by MultiHeadAttention
// (attention.h), which adds the projections.
//
//   qkv [B, T, 3C]: per token, q then k then v, each C = heads * D wide (head h is the
//                   D-column slice h of each); this is the layout of GPT-2's c_attn output.
//   P = softmax(q k^T / sqrt(D) + mask) [B, H, T, T], BEFORE dropout.
//   ctx [B, T, C]: dropout(P) v, heads interleaved back into C columns.
//
// Masks: causal (key j visible to query i iff j <= i) and/or a key-padding mask
// key_valid [B, T] (1 = attend, 0 = padding). A query row with no visible key gets all-zero
// probabilities (and so a zero context) instead of NaN.
// Dropout on P: element (b, h, i, j) draws Philox number key.first + ((b*H + h)*T + i)*T + j.
// The dropout mask is regenerated from the key, never stored.
//
// Two CPU implementations of the same math (equal up to rounding):
//  * flash (attention_forward / attention_backward, attention_flash.cpp): the production
//    kernel. Keys are processed in tiles of kAttentionTile with an online softmax, so P is
//    never stored; the cache is the log-sum-exp per query row, lse [B, H, T]
//    (lse = log sum_j exp(s_ij) over visible keys, +inf for a row that sees none). Backward
//    recomputes each tile of P from q, k and lse, with D_i = rowsum(dctx_i * ctx_i).
//    One (b, h) pair per task, its tiles in a fixed order: the results are independent of
//    the thread count. Causal tiles above the diagonal and tiles of padding keys are skipped.
//  * materialized (attention_*_materialized, attention_kernels.cpp): the earlier kernel,
//    probs [B, H, T, T] in memory and whole-head GEMMs. The CUDA kernels' CPU twin and the
//    tests' reference.
// attention_probs rebuilds P [B, H, T, T] from the flash cache (tests and inspection).
//
// Backward OVERWRITES dqkv (every q, k and v column); nothing is accumulated.
// CPU scratch: `slots` per-thread areas of the given per-slot size; at most `slots` threads
// run.
//
// CUDA (cuda::attention_*): the materialized math on device pointers (qkv, probs, ctx,
// scratch and g.key_valid), in the context's stream: per sequence, strided-batched cuBLAS
// GEMMs over its heads for the scores and the products, and the fused masked softmax,
// dropout and softmax backward kernels of layers/cuda/attention_cuda.h. Scratch: one
// [B, H, T, T] area (attention_scratch_floats), the dropped probabilities and then dP.
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
// Flash kernel tiles: kAttentionTile queries by kAttentionTile keys; operands are packed per
// head with T rounded up to the tile and D to 16 elements (a vector of floats).
constexpr std::int64_t kAttentionTile = 64;
constexpr std::int64_t attention_padded_seq(std::int64_t seq) {
  return (seq + kAttentionTile - 1) / kAttentionTile * kAttentionTile;
}
constexpr std::int64_t attention_padded_head_dim(std::int64_t head_dim) {
  return (head_dim + 15) / 16 * 16;
}
// Per-thread scratch of the flash kernels, in elements (backward's need; forward's is less):
// six packed [T, D] operands, three [T] rows and five tile-sized areas.
constexpr std::int64_t attention_scratch_per_slot(std::int64_t seq, std::int64_t head_dim) {
  const std::int64_t tp = attention_padded_seq(seq), dp = attention_padded_head_dim(head_dim);
  return 6 * tp * dp + 3 * tp + 3 * kAttentionTile * kAttentionTile +
         2 * kAttentionTile * dp + kAttentionTile;
}

// lse [B, H, T] (the flash cache), ctx [B, T, C].
template <typename T>
void attention_forward(const AttentionGeom& g, const T* qkv, T* lse, T* ctx, T* scratch,
                       int slots);
template <typename T>
void attention_backward(const AttentionGeom& g, const T* qkv, const T* ctx, const T* lse,
                        const T* dctx, T* dqkv, T* scratch, int slots);
// probs [B, H, T, T] = P (before dropout) from qkv and the flash forward's lse.
template <typename T>
void attention_probs(const AttentionGeom& g, const T* qkv, const T* lse, T* probs);

constexpr std::int64_t attention_materialized_scratch_per_slot(std::int64_t seq) {
  return 2 * seq * seq;
}
template <typename T>
void attention_forward_materialized(const AttentionGeom& g, const T* qkv, T* probs, T* ctx,
                                    T* scratch, int slots);
template <typename T>
void attention_backward_materialized(const AttentionGeom& g, const T* qkv, const T* probs,
                                     const T* dctx, T* dqkv, T* scratch, int slots);
}  // namespace cpu

namespace cuda {
// Also without CUDA: memory plans for a GPU run are made on any machine.
constexpr std::int64_t attention_scratch_floats(std::int64_t batch, std::int64_t heads,
                                                std::int64_t seq) {
  return batch * heads * seq * seq;
}
}  // namespace cuda

#if SPARQ_HAS_CUDA
namespace cuda {
void attention_forward(const AttentionGeom& g, const DeviceResources& device, const float* qkv,
                       float* probs, float* ctx, float* scratch);
void attention_backward(const AttentionGeom& g, const DeviceResources& device, const float* qkv,
                        const float* probs, const float* dctx, float* dqkv, float* scratch);
}  // namespace cuda
#endif

}  // namespace sparq
