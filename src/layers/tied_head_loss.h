// TiedHeadLoss: a tied output head fused with its softmax cross-entropy, on the CPU, that
// never materializes the [rows, vocab] logits (GPT-2's LM head, BERT's MLM decoder):
//   logits[i, :] = x[i, :] * table^T (+ bias)        x [N, C], table [V, C], bias [V]
//   loss = (1 / count) * sum over rows with target != ignore_index of
//          (logsumexp(logits[i, :valid]) - logits[i, target[i]])
// the same function as Embedding::project (+ VocabBias) followed by CrossEntropy, whose
// conventions it keeps: columns at and past valid_vocab (a padded vocabulary) get no
// probability and no gradient, a call with no counted row has loss 0 and zero gradients.
//
// Method: the counted rows (target != ignore_index) are processed in chunks of chunk_rows.
// Per chunk: one GEMM gives its logits [chunk, valid]; one pass per row finds the maximum
// and its first index (the prediction, Note [Prediction rule] in prediction_rule.h), one
// vectorized pass sums the exponentials (vector_math.h) and, for a gradient, keeps them;
// a third pass turns them into dlogits = dloss * (softmax - onehot) / count in place; then
// dx_chunk = dlogits * table and dtable += dlogits^T * x_chunk (and dbias += column sums).
// Ignored rows cost nothing (BERT labels 15% of its positions) and get dx = 0.
// Memory: chunk_rows * (valid + 2C) floats of workspace instead of N * V of logits.
// forward_backward() computes the loss and the head's gradients in that single pass: a
// training step needs the logits once, never again, so there is nothing to recompute.
//
// Gradients: see Note [Gradient rule] (layers/param_set.h): dx is overwritten, dtable and
// dbias accumulate. Determinism: chunk boundaries depend on the targets and chunk_rows only,
// each row's reductions run on one thread and column sums in row order, so results do not
// depend on the thread count. They differ from the unfused layers' by rounding (a chunked
// dtable sum, the polynomial exp).
// CPU only: on CUDA the models keep the materialized head (Embedding::project +
// CrossEntropy). No parameters of its own: the table, bias and their gradients are passed.
#pragma once

#include <string>
#include <vector>

#include "core/buffer.h"
#include "core/tensor.h"
#include "layers/param_set.h"

namespace sparq {

class TiedHeadLoss : public LayerBase {
 public:
  struct Config {
    std::int64_t vocab = 0;        // V, the table's rows
    std::int64_t valid_vocab = 0;  // 0 means V
    std::int64_t dim = 0;          // C
    std::int32_t ignore_index = -100;
    std::int64_t max_rows = 0;
    std::int64_t chunk_rows = 0;  // 0: kDefaultChunkBytes of logits per chunk
  };
  // A chunk's logits take about this many bytes (128 rows at least): 128 MiB is 667 rows of
  // GPT-2's 50257 columns. Every chunk's three GEMMs repack the whole table; at 32 MiB (166
  // rows, 7 chunks at B=4 T=256) that took the head's GEMMs from 632 to 736 ms of a 2.1 s
  // GPT-2 124M step (docs/layers.md), for 96 MiB less peak memory.
  static constexpr std::int64_t kDefaultChunkBytes = std::int64_t{128} << 20;
  // Rows per chunk when Config::chunk_rows is 0 (before the cap at max_rows); bench_gemm
  // prices the head's products with the same rule.
  static constexpr std::int64_t default_chunk_rows(std::int64_t valid_vocab) {
    return std::max<std::int64_t>(
        128, kDefaultChunkBytes / (valid_vocab * static_cast<std::int64_t>(sizeof(float))));
  }

  TiedHeadLoss(std::string name, Config config);

  // The head's operands. `bias`/`dbias` are empty without a decoder bias; `dtable`/`dbias`
  // are only needed by forward_backward.
  struct Operands {
    Tensor table, dtable, bias, dbias;
  };

  // Loss only (evaluation). x f32 [N, C] (or [B, T, C]); targets i32 with N elements.
  float forward(const Tensor& x, const Operands& head, const Tensor& targets);
  // Loss, dx [N, C] (overwritten) and the accumulated table/bias gradients of dloss * loss.
  float forward_backward(const Tensor& x, const Operands& head, const Tensor& targets,
                         const Tensor& dx, float dloss = 1.0f);

  // Rows that entered the mean in the last call.
  std::int64_t counted() const { return counted_; }
  // Per row of the last call: the argmax over the valid columns, -1 on ignored rows.
  const std::vector<std::int32_t>& predictions() const { return predictions_; }
  std::int64_t chunk_rows() const { return chunk_rows_; }
  std::size_t workspace_bytes() const;

 private:
  float run(const Tensor& x, const Operands& head, const Tensor& targets, float* dx, float dloss);
  std::string name_;
  Config config_;
  std::int64_t chunk_rows_ = 0;
  Buffer logits_;  // [chunk_rows, valid]: a chunk's logits, then their gradient
  Buffer rows_x_, rows_dx_;  // [chunk_rows, C]: gathered rows of x and their dx
  std::vector<std::int64_t> counted_rows_;
  std::vector<double> row_loss_;
  std::vector<std::int32_t> predictions_;
  std::int64_t counted_ = 0;
};

}  // namespace sparq
