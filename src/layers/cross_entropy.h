// Softmax cross-entropy over logits [N, V] with integer targets [N]:
//   loss = (1 / count) * sum over rows with target != ignore_index of
//          (logsumexp(logits[i, :valid]) - logits[i, target[i]])
// where count is the number of such rows. `valid_vocab` (<= V) excludes the columns a
// padded vocabulary adds (GPT-2 pads 50257 to a multiple of 64): they get no probability
// and a zero gradient. With no counted row the loss is 0 and the gradient zero (PyTorch
// would return NaN; a fully padded micro-batch should not poison training).
//
// Gradients: see Note [Gradient rule] (layers/param_set.h).
// No parameters. Forward and backward are fused: forward_backward() overwrites
// dlogits = dloss * (softmax - onehot) / count while each row is still in cache, so logits
// are not read again in a separate pass. Ignored rows get a zero gradient. dlogits may
// alias logits (the logits are consumed).
//
// Cache: per-row losses for up to max_rows rows, owned by the layer, on its device (moved
// there by the first call in a CUDA context).
// Dispatch: Note [Layer dispatch]; the CUDA kernels are in layers/cuda/cross_entropy_cuda.h.
// In a CUDA context logits, targets and dlogits live on the device; the loss is still a host
// float, so each call waits for the compute stream once, to read it back.
#pragma once

#include <string>

#include "core/buffer.h"
#include "core/tensor.h"
#include "layers/param_set.h"

namespace sparq {

namespace cpu {
// Returns the mean loss over counted rows; dlogits may be null (forward only).
// Targets must already be checked to lie in [0, valid) or equal ignore_index.
template <typename T>
double cross_entropy(const T* logits, const std::int32_t* targets, T* dlogits, T* row_loss,
                     std::int64_t n, std::int64_t v, std::int64_t valid, std::int32_t ignore_index,
                     T dloss);
}  // namespace cpu

class CrossEntropy : public LayerBase {
 public:
  struct Config {
    std::int64_t vocab = 0;        // V, the logits' width
    std::int64_t valid_vocab = 0;  // 0 means V
    std::int32_t ignore_index = -100;
    std::int64_t max_rows = 0;
  };
  CrossEntropy(std::string name, Config config);

  // logits f32 [N, V] (or [B, T, V]), targets i32 with N elements, both on the layer's
  // device.
  float forward(const Tensor& logits, const Tensor& targets);
  float forward_backward(const Tensor& logits, const Tensor& targets, const Tensor& dlogits,
                         float dloss = 1.0f);
  // Rows that entered the mean in the last call.
  std::int64_t counted() const { return counted_; }
  // Per-row losses of the last call ([N], zero on ignored rows), on the layer's device.
  Tensor row_losses() const { return losses_.view(DType::kF32, {rows_}); }

 private:
  float run(const Tensor& logits, const Tensor& targets, float* dlogits, float dloss);
  float run_cuda(const Tensor& logits, const Tensor& targets, float* dlogits, float dloss);
  void place_buffers();  // on the layer's device
  std::string name_;
  Config config_;
  Buffer losses_;        // [max_rows], then (CUDA) the device totals of a call
  Buffer host_totals_;   // CUDA: pinned, where the totals are copied back
  std::int64_t rows_ = 0, counted_ = 0;
};

}  // namespace sparq
