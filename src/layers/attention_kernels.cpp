#include "layers/attention_kernels.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/threading.h"
#include "layers/matmul.h"

#if SPARQ_HAS_CUDA
#include "core/cuda/cuda_gemm.h"
#include "core/cuda/device_resources.h"
#include "core/cuda/mixed_gemm.h"
#include "layers/cuda/attention_cuda.h"
#endif

namespace sparq::cpu {
namespace {

bool visible(const AttentionGeom& g, std::int64_t b, std::int64_t i, std::int64_t j) {
  if (g.causal && j > i) return false;
  return g.key_valid == nullptr || g.key_valid[b * g.seq + j] != 0;
}

// In-place masked softmax of one score row.
template <typename T>
void softmax_row(const AttentionGeom& g, std::int64_t b, std::int64_t i, T* row) {
  const std::int64_t t = g.seq;
  // Causal rows only look at j <= i, and nothing beyond needs the exp.
  const std::int64_t end = g.causal ? i + 1 : t;
  T mx = -std::numeric_limits<T>::infinity();
  for (std::int64_t j = 0; j < end; ++j) {
    if (visible(g, b, i, j)) mx = std::max(mx, row[j]);
  }
  if (mx == -std::numeric_limits<T>::infinity()) {
    std::fill(row, row + t, T(0));
    return;
  }
  T sum = 0;
  for (std::int64_t j = 0; j < end; ++j) {
    row[j] = visible(g, b, i, j) ? std::exp(row[j] - mx) : T(0);
    sum += row[j];
  }
  const T inv = T(1) / sum;
  for (std::int64_t j = 0; j < end; ++j) row[j] *= inv;
  std::fill(row + end, row + t, T(0));
}

int team_for(int slots) { return std::max(1, std::min(slots, max_threads())); }

}  // namespace

template <typename T>
void attention_forward_materialized(const AttentionGeom& g, const T* qkv, T* probs, T* ctx,
                                    T* scratch, int slots) {
  const std::int64_t t = g.seq, c = g.dim, d = g.head_dim(), bh_count = g.batch * g.heads;
  const T scale = T(1) / std::sqrt(static_cast<T>(d));
#pragma omp parallel for schedule(dynamic) num_threads(team_for(slots)) if (bh_count > 1)
  for (std::int64_t bh = 0; bh < bh_count; ++bh) {
    const std::int64_t b = bh / g.heads, h = bh % g.heads;
    const T* q = qkv + b * t * 3 * c + h * d;
    T* p = probs + bh * t * t;
    matmul<T>(GemmShape{false, true, t, t, d, 3 * c, 3 * c, t}, scale, q, q + c, T(0), p);
    for (std::int64_t i = 0; i < t; ++i) softmax_row(g, b, i, p + i * t);
    const T* use = p;
    if (g.dropout_p > 0.0f) {
      T* dropped = scratch + thread_index() * attention_materialized_scratch_per_slot(t);
      cpu::dropout_scales<T>(g.key, static_cast<std::uint64_t>(bh * t * t), t * t, g.dropout_p,
                             dropped);
      for (std::int64_t e = 0; e < t * t; ++e) dropped[e] *= p[e];
      use = dropped;
    }
    matmul<T>(GemmShape{false, false, t, d, t, t, 3 * c, c}, T(1), use, q + 2 * c, T(0),
              ctx + b * t * c + h * d);
  }
}

template <typename T>
void attention_backward_materialized(const AttentionGeom& g, const T* qkv, const T* probs,
                                     const T* dctx, T* dqkv, T* scratch, int slots) {
  const std::int64_t t = g.seq, c = g.dim, d = g.head_dim(), bh_count = g.batch * g.heads;
  const T scale = T(1) / std::sqrt(static_cast<T>(d));
#pragma omp parallel for schedule(dynamic) num_threads(team_for(slots)) if (bh_count > 1)
  for (std::int64_t bh = 0; bh < bh_count; ++bh) {
    const std::int64_t b = bh / g.heads, h = bh % g.heads;
    const T* q = qkv + b * t * 3 * c + h * d;
    const T* p = probs + bh * t * t;
    const T* dc = dctx + b * t * c + h * d;
    T* dq = dqkv + b * t * 3 * c + h * d;
    T* dp = scratch + thread_index() * attention_materialized_scratch_per_slot(t);  // [t, t]
    T* used = dp + t * t;                                               // [t, t]
    // dP_used = dctx v^T.
    matmul<T>(GemmShape{false, true, t, t, d, c, 3 * c, t}, T(1), dc, q + 2 * c, T(0), dp);
    const T* use = p;
    if (g.dropout_p > 0.0f) {
      // Regenerate the mask as scales, fold it into dP and rebuild the dropped probs.
      cpu::dropout_scales<T>(g.key, static_cast<std::uint64_t>(bh * t * t), t * t, g.dropout_p,
                             used);
      for (std::int64_t e = 0; e < t * t; ++e) {
        dp[e] *= used[e];
        used[e] *= p[e];
      }
      use = used;
    }
    // dV = P_used^T dctx.
    matmul<T>(GemmShape{true, false, t, d, t, t, c, 3 * c}, T(1), use, dc, T(0), dq + 2 * c);
    // Softmax backward: dS = P * (dP - rowsum(P * dP)).
    for (std::int64_t i = 0; i < t; ++i) {
      const T* pr = p + i * t;
      T* dr = dp + i * t;
      T dot = 0;
      for (std::int64_t j = 0; j < t; ++j) dot += pr[j] * dr[j];
      for (std::int64_t j = 0; j < t; ++j) dr[j] = pr[j] * (dr[j] - dot);
    }
    // dQ = dS K * scale, dK = dS^T Q * scale.
    matmul<T>(GemmShape{false, false, t, d, t, t, 3 * c, 3 * c}, scale, dp, q + c, T(0), dq);
    matmul<T>(GemmShape{true, false, t, d, t, t, 3 * c, 3 * c}, scale, dp, q, T(0), dq + c);
  }
}

template void attention_forward_materialized<float>(const AttentionGeom&, const float*, float*,
                                                    float*, float*, int);
template void attention_forward_materialized<double>(const AttentionGeom&, const double*,
                                                     double*, double*, double*, int);
template void attention_backward_materialized<float>(const AttentionGeom&, const float*,
                                                     const float*, const float*, float*,
                                                     float*, int);
template void attention_backward_materialized<double>(const AttentionGeom&, const double*,
                                                      const double*, const double*, double*,
                                                      double*, int);

}  // namespace sparq::cpu

#if SPARQ_HAS_CUDA
namespace sparq::cuda {
namespace {

AttentionShape shape_of(const AttentionGeom& g) {
  return {g.batch, g.heads, g.seq, g.causal, g.key_valid};
}

AttentionDropout dropout_of(const AttentionGeom& g) {
  return {g.dropout_p, g.key.seed, g.key.stream, g.key.first};
}

// A GEMM operand per (sequence b, head h): base + b * per_seq + h * per_head, in f32 and,
// under Note [bf16 GEMM operands], also as its staged bf16 copy (same offsets).
struct HeadOperand {
  const float* base;
  long long per_seq, per_head;
  const std::uint16_t* bf16 = nullptr;
};

// C_bh = alpha op(A_bh) op(B_bh) for every sequence and head: one strided-batched call per
// sequence over its heads (the head stride is constant within a sequence, not across them).
// Both operands must be staged or neither.
void per_head_gemm(const AttentionGeom& g, const DeviceResources& device, const GemmShape& s,
                   float alpha, HeadOperand a, HeadOperand b, float* c, long long c_per_seq,
                   long long c_per_head) {
  const int heads = static_cast<int>(g.heads);
  for (std::int64_t seq = 0; seq < g.batch; ++seq) {
    float* c_seq = c + seq * c_per_seq;
    if (a.bf16 != nullptr) {
      gemm_strided_batched_bf16(device.cublas, s, alpha, a.bf16 + seq * a.per_seq, a.per_head,
                                b.bf16 + seq * b.per_seq, b.per_head, 0.0f, c_seq, c_per_head,
                                heads);
    } else {
      gemm_strided_batched(device.cublas, s, alpha, a.base + seq * a.per_seq, a.per_head,
                           b.base + seq * b.per_seq, b.per_head, 0.0f, c_seq, c_per_head, heads);
    }
  }
}

bool bf16_products(const DeviceResources& device) {
  return device.gemm_precision == GemmPrecision::kBF16;
}

// Under bf16, stages `n` floats of `operand` into `slot` and points its bf16 view there.
HeadOperand staged(const DeviceResources& device, HeadOperand operand, int slot, std::size_t n) {
  if (bf16_products(device)) operand.bf16 = stage_bf16(device, slot, operand.base, n);
  return operand;
}

// The q, k and v operands of the fused qkv [B, T, 3C], sharing one staged copy.
struct QkvOperands {
  HeadOperand q, k, v;
};

QkvOperands qkv_operands(const AttentionGeom& g, const DeviceResources& device,
                         const float* qkv) {
  const long long t = g.seq, c = g.dim, d = g.head_dim();
  const HeadOperand all = staged(device, HeadOperand{qkv, t * 3 * c, d}, Bf16Staging::kKept,
                                 static_cast<std::size_t>(g.batch * t * 3 * c));
  const auto shifted = [&](long long offset) {
    HeadOperand h = all;
    h.base += offset;
    if (h.bf16 != nullptr) h.bf16 += offset;
    return h;
  };
  return {all, shifted(c), shifted(2 * c)};
}

}  // namespace

void attention_forward(const AttentionGeom& g, const DeviceResources& device, const float* qkv,
                       float* probs, float* ctx, float* scratch) {
  const long long t = g.seq, c = g.dim, d = g.head_dim(), tt = t * t;
  const std::size_t all_probs = static_cast<std::size_t>(g.batch * g.heads * tt);
  const cudaStream_t stream = device.stream.get();
  const QkvOperands in = qkv_operands(g, device, qkv);
  // Raw scores q k^T; the softmax kernel applies 1/sqrt(D).
  per_head_gemm(g, device, GemmShape{false, true, t, t, d, 3 * c, 3 * c, t}, 1.0f, in.q, in.k,
                probs, g.heads * tt, tt);
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  attention_softmax_forward(shape_of(g), scale, dropout_of(g), probs, scratch, stream);
  const float* used = g.dropout_p > 0.0f ? scratch : probs;
  per_head_gemm(g, device, GemmShape{false, false, t, d, t, t, 3 * c, c}, 1.0f,
                staged(device, HeadOperand{used, g.heads * tt, tt}, Bf16Staging::kOperandA,
                       all_probs),
                in.v, ctx, t * c, d);
}

void attention_backward(const AttentionGeom& g, const DeviceResources& device, const float* qkv,
                        const float* probs, const float* dctx, float* dqkv, float* scratch) {
  const long long t = g.seq, c = g.dim, d = g.head_dim(), tt = t * t;
  const std::size_t all_probs = static_cast<std::size_t>(g.batch * g.heads * tt);
  const cudaStream_t stream = device.stream.get();
  const QkvOperands in = qkv_operands(g, device, qkv);
  const HeadOperand dc = staged(device, HeadOperand{dctx, t * c, d}, Bf16Staging::kOperandB,
                                static_cast<std::size_t>(g.batch * t * c));
  // dV = P_used^T dctx, with the dropped probabilities rebuilt in the scratch.
  const float* used = probs;
  if (g.dropout_p > 0.0f) {
    attention_dropout_probs(shape_of(g), dropout_of(g), probs, scratch, stream);
    used = scratch;
  }
  per_head_gemm(g, device, GemmShape{true, false, t, d, t, t, c, 3 * c}, 1.0f,
                staged(device, HeadOperand{used, g.heads * tt, tt}, Bf16Staging::kOperandA,
                       all_probs),
                dc, dqkv + 2 * c, t * 3 * c, d);
  // dP = dctx v^T into the scratch (the stream has finished reading P_used from it), then
  // the softmax backward turns it into dS in place.
  per_head_gemm(g, device, GemmShape{false, true, t, t, d, c, 3 * c, t}, 1.0f, dc, in.v, scratch,
                g.heads * tt, tt);
  attention_softmax_backward(shape_of(g), dropout_of(g), probs, scratch, stream);
  // dQ = dS K * scale, dK = dS^T Q * scale.
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  const HeadOperand ds = staged(device, HeadOperand{scratch, g.heads * tt, tt},
                                Bf16Staging::kOperandA, all_probs);
  per_head_gemm(g, device, GemmShape{false, false, t, d, t, t, 3 * c, 3 * c}, scale, ds, in.k,
                dqkv, t * 3 * c, d);
  per_head_gemm(g, device, GemmShape{true, false, t, d, t, t, 3 * c, 3 * c}, scale, ds, in.q,
                dqkv + c, t * 3 * c, d);
}

}  // namespace sparq::cuda
#endif
