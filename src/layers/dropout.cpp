#include "layers/dropout.h"

#include <algorithm>

#include "core/check.h"
#include "core/profile.h"
#include "core/ops.h"
#include "layers/activation.h"

#if SPARQ_HAS_CUDA
#include "core/cuda/cuda_check.h"
#include "layers/cuda/dropout_cuda.h"
#endif

namespace sparq {
namespace cpu {

template <typename T>
void dropout_scales(const DropoutKey& key, std::uint64_t offset, std::int64_t n, float p,
                    T* scale) {
  const T keep_scale = dropout_keep_scale<T>(p);
  std::uint64_t pos = key.first + offset;
  std::int64_t i = 0;
  while (i < n) {
    const auto words = philox4x32(key.seed, key.stream, pos / 4);
    for (std::uint64_t lane = pos % 4; lane < 4 && i < n; ++lane, ++i, ++pos) {
      scale[i] = dropout_scale<T>(words[lane], p, keep_scale);
    }
  }
}

template <typename T>
void dropout_apply(const DropoutKey& key, float p, const T* x, T* y, std::int64_t n) {
  // Chunks of a fixed size keep each thread's Philox blocks aligned and the result
  // independent of the thread count.
  constexpr std::int64_t kChunk = 4096;
  const std::int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (chunks > 4)
  for (std::int64_t c = 0; c < chunks; ++c) {
    T scale[kChunk];
    const std::int64_t begin = c * kChunk, len = std::min(kChunk, n - begin);
    dropout_scales<T>(key, static_cast<std::uint64_t>(begin), len, p, scale);
    for (std::int64_t i = 0; i < len; ++i) y[begin + i] = x[begin + i] * scale[i];
  }
}

template void dropout_scales<float>(const DropoutKey&, std::uint64_t, std::int64_t, float, float*);
template void dropout_scales<double>(const DropoutKey&, std::uint64_t, std::int64_t, float,
                                     double*);
template void dropout_apply<float>(const DropoutKey&, float, const float*, float*, std::int64_t);
template void dropout_apply<double>(const DropoutKey&, float, const double*, double*,
                                    std::int64_t);

}  // namespace cpu

Dropout::Dropout(std::string name, float p, std::uint32_t layer_index)
    : name_(std::move(name)), p_(p), layer_index_(layer_index) {
  SPARQ_CHECK(p >= 0.0f && p < 1.0f, "{}: dropout probability must be in [0, 1), got {}", name_, p);
}

void Dropout::run(const Tensor& in, const Tensor& out, const DropoutStep& step,
                  const char* in_name, const char* out_name) const {
  const std::int64_t n = check_same_numel(in, out, name_, in_name, out_name, device());
  const bool identity = !step.training || p_ == 0.0f;
  if (on_cuda()) {
#if SPARQ_HAS_CUDA
    if (!identity) {
      cuda::dropout_apply(DropoutKey::make(step, layer_index_), p_, in.data<float>(),
                          out.data<float>(), n, stream());
    } else if (in.raw() != out.raw()) {
      CUDA_CHECK(cudaMemcpyAsync(out.raw(), in.raw(), static_cast<std::size_t>(n) * sizeof(float),
                                 cudaMemcpyDeviceToDevice, stream()));
    }
#endif
  } else if (!identity) {
    cpu::dropout_apply<float>(DropoutKey::make(step, layer_index_), p_, in.data<float>(),
                              out.data<float>(), n);
  } else if (in.raw() != out.raw()) {
    ops::copy(in.data<float>(), out.data<float>(), n);
  }
}

void Dropout::forward(const Tensor& x, const Tensor& y, const DropoutStep& step) const {
  SPARQ_PROFILE_SCOPE("dropout.forward");  // Note [Profile scopes]
  run(x, y, step, "x", "y");
}

void Dropout::backward(const Tensor& dy, const Tensor& dx, const DropoutStep& step) const {
  SPARQ_PROFILE_SCOPE("dropout.backward");  // Note [Profile scopes]
  run(dy, dx, step, "dy", "dx");
}

}  // namespace sparq
