#include "core/tensor_copy.h"

#include <cstring>

#include "core/check.h"
#include "core/ops.h"

#if SPARQ_HAS_CUDA
#include "core/cuda/cuda_check.h"
#include "core/cuda/cuda_ops.h"
#include "core/cuda/device_resources.h"
#include "core/cuda/sync_copy.h"
#endif

namespace sparq {
namespace {

void copy_bytes(void* dst, const void* src, std::size_t bytes, bool device_involved) {
  if (bytes == 0) return;
  if (!device_involved) {
    std::memcpy(dst, src, bytes);
    return;
  }
#if SPARQ_HAS_CUDA
  cuda::copy_synchronously(dst, src, bytes);  // Note [Synchronous copies and non-blocking streams]
#else
  SPARQ_CHECK(false, "a CUDA tensor in a build without CUDA");
#endif
}

}  // namespace

void copy_to_host(const Tensor& t, void* host) {
  copy_bytes(host, t.raw(), t.nbytes(), !t.is_cpu());
}

void copy_from_host(const void* host, const Tensor& t) {
  copy_bytes(t.raw(), host, t.nbytes(), !t.is_cpu());
}

void copy_tensor(const Tensor& src, const Tensor& dst, const ExecContext& context) {
  SPARQ_CHECK(src.dtype() == DType::kF32 && dst.dtype() == DType::kF32 &&
                  src.numel() == dst.numel() && src.device() == context.device() &&
                  dst.device() == context.device(),
              "copy_tensor: {} into {} in a {} context", src.str(), dst.str(),
              device_name(context.device()));
  if (src.is_cpu()) {
    ops::copy(src.data<float>(), dst.data<float>(), static_cast<std::size_t>(src.numel()));
    return;
  }
#if SPARQ_HAS_CUDA
  CUDA_CHECK(cudaMemcpyAsync(dst.raw(), src.raw(), src.nbytes(), cudaMemcpyDeviceToDevice,
                             context.cuda().stream.get()));
#endif
}

void scale_in_place(const Tensor& t, float alpha, const ExecContext& context) {
  SPARQ_CHECK(t.dtype() == DType::kF32 && t.device() == context.device(),
              "scale_in_place: {} in a {} context", t.str(), device_name(context.device()));
  const auto n = static_cast<std::size_t>(t.numel());
  if (t.is_cpu()) {
    ops::scale(t.data<float>(), n, alpha);
    return;
  }
#if SPARQ_HAS_CUDA
  cuda::scale(t.data<float>(), n, alpha, context.cuda().stream.get());
#endif
}

const float* host_floats(const Tensor& t, std::vector<float>& staging) {
  if (t.is_cpu()) return t.data<float>();
  staging.resize(static_cast<std::size_t>(t.numel()));
  SPARQ_CHECK(t.dtype() == DType::kF32, "host_floats of a {} tensor", dtype_name(t.dtype()));
  copy_to_host(t, staging.data());
  return staging.data();
}

}  // namespace sparq
