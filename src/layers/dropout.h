// Dropout with masks that are regenerated, never stored. The keep decision for element i of
// a layer's tensor at a training step is a pure function of
//   (seed, stream = make_stream(kDropout, rank, layer_index), offset = step * 2^40 + i)
// through the core Philox generator, so forward and backward (and a re-run of the step)
// draw the same mask. Element i is kept when its uniform draw u satisfies u >= p, and kept
// values are scaled by 1 / (1 - p) (inverted dropout). In eval mode, or with p == 0, dropout
// is the identity. The Philox positions and the keep decision are layers/dropout_mask.h's,
// shared with the CUDA kernel (layers/cuda/dropout_cuda.h), so a step's mask is the same bit
// for bit on either device (Note [Layer dispatch]).
//
// Gradients: see Note [Gradient rule] (layers/param_set.h). No parameters.
// dx may alias dy; y may alias x.
#pragma once

#include <cstdint>
#include <string>

#include "core/tensor.h"
#include "layers/dropout_mask.h"
#include "layers/param_set.h"

namespace sparq {

namespace cpu {
// scale[i] = (draw(first + offset + i) >= p) ? 1 / (1 - p) : 0, for i in [0, n).
// Uses all four words of each Philox block, so it costs a quarter of per-element draws.
template <typename T>
void dropout_scales(const DropoutKey& key, std::uint64_t offset, std::int64_t n, float p,
                    T* scale);
// y = x * scale, regenerating the scales block by block (x may alias y).
template <typename T>
void dropout_apply(const DropoutKey& key, float p, const T* x, T* y, std::int64_t n);
}  // namespace cpu

class Dropout : public LayerBase {
 public:
  // layer_index must be unique among the dropout sites of a model (it selects the stream).
  Dropout(std::string name, float p, std::uint32_t layer_index);

  void forward(const Tensor& x, const Tensor& y, const DropoutStep& step) const;
  // Must receive the same DropoutStep as the forward it differentiates.
  void backward(const Tensor& dy, const Tensor& dx, const DropoutStep& step) const;
  float p() const { return p_; }

 private:
  void run(const Tensor& in, const Tensor& out, const DropoutStep& step, const char* in_name,
           const char* out_name) const;
  std::string name_;
  float p_;
  std::uint32_t layer_index_;
};

}  // namespace sparq
