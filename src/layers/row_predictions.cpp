#include "layers/row_predictions.h"

#include <algorithm>
#include <limits>

#include "core/check.h"
#include "core/tensor_copy.h"
#include "layers/prediction_rule.h"

#if SPARQ_HAS_CUDA
#include "core/cuda/device_resources.h"
#include "layers/cuda/row_predictions_cuda.h"
#endif

namespace sparq {

// std::max(mx, NaN) keeps mx, in every lane of the reduction; -0 == +0 in the second pass; a
// row of NaN (or -inf and NaN only: then -inf is the maximum) ends as the rule says.
std::int32_t predicted_index(const float* row, std::int64_t real) {
  float mx = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : mx)
  for (std::int64_t j = 0; j < real; ++j) mx = std::max(mx, row[j]);
  for (std::int64_t j = 0; j < real; ++j) {
    if (row[j] == mx) return static_cast<std::int32_t>(j);
  }
  return 0;
}

void row_predictions(const Tensor& logits, std::int64_t real, std::int32_t* out,
                     const ExecContext& context, Buffer& scratch) {
  SPARQ_CHECK(
      logits.dtype() == DType::kF32 && logits.ndim() >= 1 && logits.device() == context.device(),
      "row_predictions: f32 logits on the {} context expected, got {}",
      device_name(context.device()), logits.str());
  const std::int64_t width = logits.dim(-1);
  SPARQ_CHECK(real >= 1 && real <= width, "row_predictions: {} real columns of {}", real, width);
  const std::int64_t rows = width > 0 ? logits.numel() / width : 0;
  if (logits.is_cpu()) {
    const float* p = logits.data<float>();
    for (std::int64_t r = 0; r < rows; ++r) out[r] = predicted_index(p + r * width, real);
    return;
  }
#if SPARQ_HAS_CUDA
  const std::size_t bytes = static_cast<std::size_t>(rows) * sizeof(std::int32_t);
  if (scratch.size() < bytes || scratch.device() != Device::kCUDA) scratch = Buffer::device(bytes);
  auto* device_out = static_cast<std::int32_t*>(scratch.data());
  cuda::row_predictions(logits.data<float>(), rows, width, real, device_out,
                        context.cuda().stream.get());
  // The copy waits for the kernel (Note [Synchronous copies and non-blocking streams]).
  copy_to_host(Tensor(device_out, DType::kI32, {rows}, Device::kCUDA), out);
#else
  (void)scratch;
  SPARQ_CHECK(false, "row_predictions: a CUDA tensor in a build without CUDA");
#endif
}

}  // namespace sparq
