// Embedding: a lookup table [num, dim]. Serves token embeddings (ids from the data),
// learned position embeddings (id = position t) and BERT's token-type embeddings, and the
// tied output head (logits = x * table^T, GPT-2 and the BERT MLM decoder).
//
// Gradients: see Note [Gradient rule] (layers/param_set.h).
// Lookups have no input gradient (ids are discrete): their backward is a scatter-add into
// dtable, summing rows of repeated ids. The tied head's backward overwrites dx and adds into
// dtable, so the table's gradient is complete only after both sites ran.
//
// Parameter: "<prefix>.weight" [num, dim], N(0, init_std), no weight decay by convention.
// No caches. Ids are int32 and must lie in [0, num); an id outside is a fatal error that
// names the layer, the position and the id.
//
// Runs in its store's context (Note [Layer dispatch]); every tensor, ids included, lives on
// that device. On CUDA (layers/cuda/embedding_cuda.h) the lookups and their backward give the
// CPU's bits (the scatter-add sums each id's rows in the CPU's order); the tied head runs on
// cuBLAS. Device ids are checked only in debug builds (a check costs a sync): release builds
// trust the data loader, and a bad id reads as a zero row and adds nothing to dtable.
#pragma once

#include <utility>
#include <vector>

#include "core/buffer.h"
#include "layers/param_set.h"
#include "layers/row_sparse_grad.h"

namespace sparq {

namespace cpu {
// y[i] (=|+=) table[ids[i]] for i in [0, n).
template <typename T>
void embedding_forward(const std::int32_t* ids, const T* table, T* y, std::int64_t n,
                       std::int64_t dim, bool accumulate);
// dtable[ids[i]] += dy[i]; deterministic (threads own column ranges).
template <typename T>
void embedding_backward(const std::int32_t* ids, const T* dy, T* dtable, std::int64_t n,
                        std::int64_t dim);
}  // namespace cpu

class Embedding : public ParamLayer {
 public:
  struct Config {
    std::int64_t num = 0;
    std::int64_t dim = 0;
    float init_std = 0.02f;
    // Ids must lie in [0, valid) (0: num). A table padded past the vocabulary (GPT-2's 50304
    // rows for 50257 tokens) sets the vocabulary, so that an id in the padding is an error,
    // not a silent lookup of a row that then collects gradient.
    std::int64_t valid = 0;
  };
  Embedding(std::string prefix, Config config);

  // ids int32 [...], y f32 [..., dim] with the same leading element count. With
  // `accumulate`, the rows are added to y (position embeddings on top of tokens).
  void forward(const Tensor& ids, const Tensor& y, bool accumulate = false) const;
  void backward(const Tensor& ids, const Tensor& dy) const;
  // The same gradient as backward(), but into `out` as the rows it touches instead of into
  // the table's gradient (Note [Tied embedding split], models/model.h). CPU only.
  void backward_rows(const Tensor& ids, const Tensor& dy, RowSparseGrad* out) const;
  // backward() by way of backward_rows(): dtable[row] += (the row's summed dy), one addition
  // per touched row. What the split tied table's rows add after their exchange, so at one rank
  // the split and unsplit gradients agree bit for bit. CPU only; `scratch` is reused.
  void backward_by_rows(const Tensor& ids, const Tensor& dy, RowSparseGrad* scratch) const;

  // Position embeddings: row (b, t) of y [batch, seq, dim] gets table[t] (seq <= num).
  void forward_positions(const Tensor& y, bool accumulate) const;
  void backward_positions(const Tensor& dy) const;

  // Tied output head: logits [rows, num] = x [rows, dim] * table^T.
  void project(const Tensor& x, const Tensor& logits) const;
  void project_backward(const Tensor& x, const Tensor& dlogits, const Tensor& dx) const;

  const Tensor& table() const { return params_.param(table_); }
  const Tensor& table_grad() const { return params_.grad(table_); }

 private:
  std::int64_t valid_ids() const { return config_.valid > 0 ? config_.valid : config_.num; }
  std::int64_t check_ids(const Tensor& ids, const Tensor& y, const char* y_name) const;
  std::pair<std::int64_t, std::int64_t> check_positions(const Tensor& t, const char* what) const;
  Config config_;
  int table_ = -1;
  mutable Buffer backward_scratch_;  // CUDA: the sort's keys, rows and CUB storage
  mutable std::vector<std::int32_t> slot_scratch_;  // backward_rows: each position's row slot
};

}  // namespace sparq
