#include "layers/row_predictions.h"

#include "core/check.h"
#include "core/tensor_copy.h"
#include "layers/prediction_rule.h"

#if SPARQ_HAS_CUDA
#include "core/cuda/device_resources.h"
#include "layers/cuda/row_predictions_cuda.h"
#endif

namespace sparq {

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
