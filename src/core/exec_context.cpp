#include "core/exec_context.h"

#include <fmt/format.h>

#include "core/check.h"

#if SPARQ_HAS_CUDA
#include "core/cuda/cuda_check.h"
#include "core/cuda/device_resources.h"
#endif

namespace sparq {

#if SPARQ_HAS_CUDA
namespace cuda {

DeviceResources::DeviceResources(std::size_t workspace_bytes)
    : workspace(Buffer::device(workspace_bytes)) {
  cublas.set_stream(stream.get());
  CUBLAS_CHECK(cublasSetWorkspace(cublas.get(), workspace.data(), workspace.size()));
#if SPARQ_HAS_CUDNN
  cudnn.set_stream(stream.get());
#endif
}

}  // namespace cuda
#else
namespace cuda {
struct DeviceResources {};  // never constructed without CUDA
}  // namespace cuda
#endif

const ExecContext& ExecContext::cpu() {
  static const ExecContext context;  // immutable: nothing to create on the host
  return context;
}

int ExecContext::cuda_device_count() {
#if SPARQ_HAS_CUDA
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
#else
  return 0;
#endif
}

Result<std::unique_ptr<ExecContext>> ExecContext::create_cuda(int ordinal,
                                                              GemmPrecision precision,
                                                              std::size_t workspace_bytes) {
#if SPARQ_HAS_CUDA
  const int visible = cuda_device_count();
  if (ordinal < 0 || ordinal >= visible) {
    return Status::error("CUDA device {} requested but {} visible (CUDA_VISIBLE_DEVICES='{}')",
                         ordinal, visible,
                         std::getenv("CUDA_VISIBLE_DEVICES") ? std::getenv("CUDA_VISIBLE_DEVICES")
                                                             : "unset");
  }
  CUDA_CHECK(cudaSetDevice(ordinal));
  std::unique_ptr<ExecContext> ctx(new ExecContext());
  ctx->device_ = Device::kCUDA;
  ctx->ordinal_ = ordinal;
  ctx->cuda_ = std::make_unique<cuda::DeviceResources>(workspace_bytes);
  ctx->cuda_->gemm_precision = precision;
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, ordinal));
  ctx->cuda_->name = prop.name;
  ctx->cuda_->total_memory = prop.totalGlobalMem;
  ctx->cuda_->compute_capability = prop.major * 10 + prop.minor;
  return ctx;
#else
  (void)ordinal;
  (void)precision;
  (void)workspace_bytes;
  return Status::error("train.device: cuda needs a build with CUDA (this sparq was built "
                       "without nvcc; see README, \"GPU\")");
#endif
}

ExecContext::ExecContext(ExecContext&&) noexcept = default;
ExecContext& ExecContext::operator=(ExecContext&&) noexcept = default;
ExecContext::~ExecContext() = default;

const cuda::DeviceResources& ExecContext::cuda() const {
  SPARQ_CHECK(cuda_ != nullptr, "CUDA resources asked of the {} context", device_name(device_));
  return *cuda_;
}

void ExecContext::synchronize() const {
#if SPARQ_HAS_CUDA
  if (cuda_) cuda_->stream.synchronize();
#endif
}

GemmPrecision ExecContext::gemm_precision() const {
#if SPARQ_HAS_CUDA
  if (cuda_) return cuda_->gemm_precision;
#endif
  return GemmPrecision::kF32;
}

std::string ExecContext::describe() const {
  if (!cuda_) return "cpu";
#if SPARQ_HAS_CUDA
  return fmt::format("cuda:{} ({}, {:.1f} GiB, sm_{}, {} GEMMs)", ordinal_, cuda_->name,
                     static_cast<double>(cuda_->total_memory) / (1u << 30),
                     cuda_->compute_capability,
                     cuda_->gemm_precision == GemmPrecision::kBF16 ? "bf16" : "f32");
#else
  return "cuda";
#endif
}

}  // namespace sparq
