// The flash CPU attention kernels (attention_kernels.h): per (b, h), queries and keys in
// tiles of kAttentionTile, an online softmax in the forward, and a backward that rebuilds
// each tile of P from q, k and the saved log-sum-exp. Tile products and exp are
// attention_tile.h's.
#include <algorithm>
#include <cmath>
#include <limits>

#include "core/threading.h"
#include "layers/attention_kernels.h"
#include "layers/attention_tile.h"

namespace sparq::cpu {
namespace {

using attn_tile::exp_nonpositive;
using attn_tile::row_max;
using attn_tile::row_sum;
using attn_tile::tile_product;
constexpr std::int64_t kTile = kAttentionTile;

template <typename T>
constexpr T kInf = std::numeric_limits<T>::infinity();

int team_for(int slots) { return std::max(1, std::min(slots, max_threads())); }

// One head's sizes and its q, k, v column slices in qkv (rows of stride 3C).
template <typename T>
struct HeadShape {
  std::int64_t t, d, tp, dp, c;
  const T *q, *k, *v;
  HeadShape(const AttentionGeom& g, const T* qkv, std::int64_t b, std::int64_t h)
      : t(g.seq), d(g.head_dim()), tp(attention_padded_seq(g.seq)),
        dp(attention_padded_head_dim(g.head_dim())), c(g.dim) {
    q = qkv + b * t * 3 * c + h * d;
    k = q + c;
    v = q + 2 * c;
  }
};

// dst [tp, dp] = src's t x d rows (stride ld), zero-padded.
template <typename T>
void pack_rows(const T* src, std::int64_t ld, const HeadShape<T>& s, T* dst) {
  std::fill(dst, dst + s.tp * s.dp, T(0));
  for (std::int64_t i = 0; i < s.t; ++i) std::copy(src + i * ld, src + i * ld + s.d, dst + i * s.dp);
}

// dst [dp, tp] = transpose of src's t x d rows, zero-padded.
template <typename T>
void pack_transposed(const T* src, std::int64_t ld, const HeadShape<T>& s, T* dst) {
  std::fill(dst, dst + s.tp * s.dp, T(0));
  // By blocks of 64 source rows (in L1), writing dst rows contiguously: a row-by-row
  // scatter into columns is several times slower (stores a whole dst row apart).
  for (std::int64_t i0 = 0; i0 < s.t; i0 += 64) {
    const std::int64_t i1 = std::min(s.t, i0 + 64);
    for (std::int64_t e = 0; e < s.d; ++e) {
      for (std::int64_t i = i0; i < i1; ++i) dst[e * s.tp + i] = src[i * ld + e];
    }
  }
}

// bias[j] = 0 for a key the mask lets through, -inf for padding (and for j >= T).
template <typename T>
void key_bias(const AttentionGeom& g, std::int64_t b, std::int64_t tp, T* bias) {
  for (std::int64_t j = 0; j < tp; ++j) {
    const bool valid = j < g.seq && (g.key_valid == nullptr || g.key_valid[b * g.seq + j] != 0);
    bias[j] = valid ? T(0) : -kInf<T>;
  }
}

template <typename T>
bool tile_has_key(const T* bias) {
  for (std::int64_t j = 0; j < kTile; ++j) {
    if (bias[j] == T(0)) return true;
  }
  return false;
}

// A score row of a tile: s * scale + bias, minus `shift`, and -inf for causal j > i.
template <typename T>
void mask_row(const AttentionGeom& g, T scale, const T* bias, T shift, std::int64_t i,
              std::int64_t j0, T* row) {
  for (std::int64_t j = 0; j < kTile; ++j) row[j] = row[j] * scale + bias[j] - shift;
  if (g.causal) {
    for (std::int64_t j = std::max<std::int64_t>(0, i + 1 - j0); j < kTile; ++j) row[j] = -kInf<T>;
  }
}

// Dropout scales of row i's keys j0.. of one tile (0 beyond T): Philox element (b,h,i,j).
template <typename T>
void dropout_row(const AttentionGeom& g, std::int64_t bh, std::int64_t i, std::int64_t j0,
                 T* scales) {
  const std::int64_t t = g.seq, n = std::min(kTile, t - j0);
  dropout_scales<T>(g.key, static_cast<std::uint64_t>((bh * t + i) * t + j0), n, g.dropout_p,
                    scales);
  std::fill(scales + n, scales + kTile, T(0));
}

template <typename T>
void forward_head(const AttentionGeom& g, std::int64_t bh, const T* qkv, T* lse, T* ctx,
                  T* scratch) {
  const std::int64_t b = bh / g.heads, h = bh % g.heads;
  const HeadShape<T> s(g, qkv, b, h);
  const T scale = T(1) / std::sqrt(static_cast<T>(s.d));
  T* q = scratch;            // [tp, dp]
  T* kt = q + s.tp * s.dp;   // [dp, tp]
  T* v = kt + s.tp * s.dp;   // [tp, dp]
  T* bias = v + s.tp * s.dp;  // [tp]
  T* p = bias + s.tp;        // [tile, tile]: scores, then exp
  T* o = p + kTile * kTile;  // [tile, dp]: unnormalized output
  T* m = o + kTile * s.dp;   // [tile] running max
  T* l = m + kTile;          // [tile] running sum
  T* drop = l + kTile;       // [tile]
  pack_rows(s.q, 3 * s.c, s, q);
  pack_transposed(s.k, 3 * s.c, s, kt);
  pack_rows(s.v, 3 * s.c, s, v);
  key_bias(g, b, s.tp, bias);
  for (std::int64_t i0 = 0; i0 < s.t; i0 += kTile) {
    std::fill(o, o + kTile * s.dp, T(0));
    std::fill(m, m + kTile, -kInf<T>);
    std::fill(l, l + kTile, T(0));
    const std::int64_t j_end = g.causal ? std::min(s.t, i0 + kTile) : s.t;
    for (std::int64_t j0 = 0; j0 < j_end; j0 += kTile) {
      if (!tile_has_key(bias + j0)) continue;
      tile_product(kTile, kTile, s.dp, q + i0 * s.dp, s.dp, 1, kt + j0, s.tp, p, kTile, false);
      for (std::int64_t r = 0; r < kTile; ++r) {
        T* row = p + r * kTile;
        mask_row(g, scale, bias + j0, T(0), i0 + r, j0, row);
        const T m_new = std::max(m[r], row_max(row, kTile));
        if (m_new == -kInf<T>) {  // nothing visible yet: weights 0, state unchanged
          std::fill(row, row + kTile, T(0));
          continue;
        }
        for (std::int64_t j = 0; j < kTile; ++j) row[j] -= m_new;
        exp_nonpositive(row, kTile);
        // Rescale what earlier tiles accumulated to the new maximum.
        const T alpha = m[r] == -kInf<T> ? T(0) : std::exp(m[r] - m_new);
        l[r] = l[r] * alpha + row_sum(row, kTile);
        m[r] = m_new;
        if (alpha != T(1)) {
          for (std::int64_t e = 0; e < s.dp; ++e) o[r * s.dp + e] *= alpha;
        }
        // The normalizer l sums the kept and the dropped weights alike.
        if (g.dropout_p > 0.0f && i0 + r < s.t) {
          dropout_row(g, bh, i0 + r, j0, drop);
          for (std::int64_t j = 0; j < kTile; ++j) row[j] *= drop[j];
        }
      }
      tile_product(kTile, s.dp, kTile, p, kTile, 1, v + j0 * s.dp, s.dp, o, s.dp, true);
    }
    for (std::int64_t r = 0; r < kTile && i0 + r < s.t; ++r) {
      const std::int64_t i = i0 + r;
      const T inv = l[r] > T(0) ? T(1) / l[r] : T(0);
      T* out = ctx + (b * s.t + i) * s.c + h * s.d;
      for (std::int64_t e = 0; e < s.d; ++e) out[e] = o[r * s.dp + e] * inv;
      lse[bh * s.t + i] = l[r] > T(0) ? m[r] + std::log(l[r]) : kInf<T>;
    }
  }
}

template <typename T>
void backward_head(const AttentionGeom& g, std::int64_t bh, const T* qkv, const T* ctx,
                   const T* lse, const T* dctx, T* dqkv, T* scratch) {
  const std::int64_t b = bh / g.heads, h = bh % g.heads;
  const HeadShape<T> s(g, qkv, b, h);
  const T scale = T(1) / std::sqrt(static_cast<T>(s.d));
  const std::int64_t area = s.tp * s.dp;
  T* q = scratch;              // [tp, dp]
  T* k = q + area;             // [tp, dp]
  T* kt = k + area;            // [dp, tp]
  T* vt = kt + area;           // [dp, tp]
  T* dout = vt + area;         // [tp, dp] dctx
  T* dq = dout + area;         // [tp, dp] accumulated over key tiles, unscaled
  T* bias = dq + area;         // [tp]
  T* row_lse = bias + s.tp;    // [tp], +inf for padding rows: their P is 0
  T* row_dot = row_lse + s.tp;  // [tp] D_i = dctx_i . ctx_i
  T* p = row_dot + s.tp;       // [tile, tile] P
  T* ds = p + kTile * kTile;   // [tile, tile] dP, then dS
  T* pd = ds + kTile * kTile;  // [tile, tile] dropped P
  T* dk = pd + kTile * kTile;  // [tile, dp]
  T* dv = dk + kTile * s.dp;   // [tile, dp]
  T* drop = dv + kTile * s.dp;  // [tile]
  pack_rows(s.q, 3 * s.c, s, q);
  pack_rows(s.k, 3 * s.c, s, k);
  pack_transposed(s.k, 3 * s.c, s, kt);
  pack_transposed(s.v, 3 * s.c, s, vt);
  const T* dc = dctx + b * s.t * s.c + h * s.d;
  pack_rows(dc, s.c, s, dout);
  std::fill(dq, dq + area, T(0));
  key_bias(g, b, s.tp, bias);
  for (std::int64_t i = 0; i < s.tp; ++i) {
    row_lse[i] = i < s.t ? lse[bh * s.t + i] : kInf<T>;
    T dot = 0;
    for (std::int64_t e = 0; i < s.t && e < s.d; ++e) {
      dot += dc[i * s.c + e] * ctx[(b * s.t + i) * s.c + h * s.d + e];
    }
    row_dot[i] = dot;
  }
  const bool dropout = g.dropout_p > 0.0f;
  for (std::int64_t j0 = 0; j0 < s.t; j0 += kTile) {
    std::fill(dk, dk + 2 * kTile * s.dp, T(0));  // dk and dv
    // Causal: query tiles before the key tile see none of its keys.
    const std::int64_t i_begin = g.causal ? j0 : 0;
    for (std::int64_t i0 = i_begin; i0 < s.t && tile_has_key(bias + j0); i0 += kTile) {
      tile_product(kTile, kTile, s.dp, q + i0 * s.dp, s.dp, 1, kt + j0, s.tp, p, kTile, false);
      tile_product(kTile, kTile, s.dp, dout + i0 * s.dp, s.dp, 1, vt + j0, s.tp, ds, kTile, false);
      for (std::int64_t r = 0; r < kTile; ++r) {
        const std::int64_t i = i0 + r;
        T* prow = p + r * kTile;
        T* drow = ds + r * kTile;
        mask_row(g, scale, bias + j0, row_lse[i], i, j0, prow);
        exp_nonpositive(prow, kTile);
        if (dropout) {  // dP = (dctx v^T) * mask; the dropped P feeds dV
          T* pdrow = pd + r * kTile;
          if (i < s.t) dropout_row(g, bh, i, j0, drop);
          else std::fill(drop, drop + kTile, T(0));
          for (std::int64_t j = 0; j < kTile; ++j) {
            pdrow[j] = prow[j] * drop[j];
            drow[j] *= drop[j];
          }
        }
        // dS = P * (dP - D_i), the softmax backward.
        for (std::int64_t j = 0; j < kTile; ++j) drow[j] = prow[j] * (drow[j] - row_dot[i]);
      }
      const T* used = dropout ? pd : p;
      // dV += P_used^T dctx, dK += dS^T q, dQ += dS k (the scale is applied once at the end).
      tile_product(kTile, s.dp, kTile, used, 1, kTile, dout + i0 * s.dp, s.dp, dv, s.dp, true);
      tile_product(kTile, s.dp, kTile, ds, 1, kTile, q + i0 * s.dp, s.dp, dk, s.dp, true);
      tile_product(kTile, s.dp, kTile, ds, kTile, 1, k + j0 * s.dp, s.dp, dq + i0 * s.dp, s.dp,
                   true);
    }
    for (std::int64_t r = 0; r < kTile && j0 + r < s.t; ++r) {
      T* out = dqkv + (b * s.t + j0 + r) * 3 * s.c + h * s.d;
      for (std::int64_t e = 0; e < s.d; ++e) {
        out[s.c + e] = dk[r * s.dp + e] * scale;
        out[2 * s.c + e] = dv[r * s.dp + e];
      }
    }
  }
  for (std::int64_t i = 0; i < s.t; ++i) {
    T* out = dqkv + (b * s.t + i) * 3 * s.c + h * s.d;
    for (std::int64_t e = 0; e < s.d; ++e) out[e] = dq[i * s.dp + e] * scale;
  }
}

}  // namespace

template <typename T>
void attention_forward(const AttentionGeom& g, const T* qkv, T* lse, T* ctx, T* scratch,
                       int slots) {
  const std::int64_t bh_count = g.batch * g.heads;
  const std::int64_t per_slot = attention_scratch_per_slot(g.seq, g.head_dim());
#pragma omp parallel for schedule(dynamic) num_threads(team_for(slots)) if (bh_count > 1)
  for (std::int64_t bh = 0; bh < bh_count; ++bh) {
    forward_head(g, bh, qkv, lse, ctx, scratch + thread_index() * per_slot);
  }
}

template <typename T>
void attention_backward(const AttentionGeom& g, const T* qkv, const T* ctx, const T* lse,
                        const T* dctx, T* dqkv, T* scratch, int slots) {
  const std::int64_t bh_count = g.batch * g.heads;
  const std::int64_t per_slot = attention_scratch_per_slot(g.seq, g.head_dim());
#pragma omp parallel for schedule(dynamic) num_threads(team_for(slots)) if (bh_count > 1)
  for (std::int64_t bh = 0; bh < bh_count; ++bh) {
    backward_head(g, bh, qkv, ctx, lse, dctx, dqkv, scratch + thread_index() * per_slot);
  }
}

template <typename T>
void attention_probs(const AttentionGeom& g, const T* qkv, const T* lse, T* probs) {
  const std::int64_t t = g.seq, d = g.head_dim();
  const T scale = T(1) / std::sqrt(static_cast<T>(d));
  for (std::int64_t bh = 0; bh < g.batch * g.heads; ++bh) {
    const std::int64_t b = bh / g.heads;
    const HeadShape<T> s(g, qkv, b, bh % g.heads);
    for (std::int64_t i = 0; i < t; ++i) {
      for (std::int64_t j = 0; j < t; ++j) {
        const bool visible = (!g.causal || j <= i) &&
                             (g.key_valid == nullptr || g.key_valid[b * t + j] != 0);
        T dot = 0;
        for (std::int64_t e = 0; visible && e < d; ++e) {
          dot += s.q[i * 3 * s.c + e] * s.k[j * 3 * s.c + e];
        }
        probs[(bh * t + i) * t + j] = visible ? std::exp(dot * scale - lse[bh * t + i]) : T(0);
      }
    }
  }
}

template void attention_forward<float>(const AttentionGeom&, const float*, float*, float*,
                                       float*, int);
template void attention_forward<double>(const AttentionGeom&, const double*, double*, double*,
                                        double*, int);
template void attention_backward<float>(const AttentionGeom&, const float*, const float*,
                                        const float*, const float*, float*, float*, int);
template void attention_backward<double>(const AttentionGeom&, const double*, const double*,
                                         const double*, const double*, double*, double*, int);
template void attention_probs<float>(const AttentionGeom&, const float*, const float*, float*);
template void attention_probs<double>(const AttentionGeom&, const double*, const double*,
                                      double*);

}  // namespace sparq::cpu
