// VocabBias: the decoder bias of a tied output head (BERT's MLM head), applied in place:
//   logits[r, :] += bias            logits [rows, vocab] (any leading dims)
//
// Gradients: see Note [Gradient rule] (layers/param_set.h). backward adds the column sums of
// dlogits into dbias by a fixed-order reduction; dlogits is only read (the logits' gradient
// passes through unchanged, so there is no dx).
//
// Parameters: "<prefix>.bias" [vocab] (zeros, no weight decay).
// Dispatch: Note [Layer dispatch]; the CUDA kernels are in layers/cuda/vocab_bias_cuda.h.
// Bound to a CUDA store, the layer owns the device scratch of the column reduction.
#pragma once

#include "core/buffer.h"
#include "layers/param_set.h"

namespace sparq {

namespace cpu {
// y[r, j] += b[j] for r < rows, j < vocab.
void vocab_bias_forward(const float* b, float* y, std::int64_t rows, std::int64_t vocab);
// db[j] += sum over r of dy[r, j].
void vocab_bias_backward(const float* dy, float* db, std::int64_t rows, std::int64_t vocab);
}  // namespace cpu

class VocabBias : public ParamLayer {
 public:
  VocabBias(std::string prefix, std::int64_t vocab);
  // ParamLayer::bind, plus the reduction scratch on a CUDA store's device.
  void bind(const ParamStore& store);

  void forward(const Tensor& logits) const;  // in place, [rows, vocab]
  void backward(const Tensor& dlogits) const;
  const Tensor& bias() const { return params_.param(bias_); }
  const Tensor& bias_grad() const { return params_.grad(bias_); }

 private:
  std::int64_t vocab_;
  int bias_ = -1;
  Buffer scratch_;  // CUDA only
};

}  // namespace sparq
