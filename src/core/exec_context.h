// ExecContext: where one rank computes (DESIGN.md, "The GPU path"). Created once per rank,
// before the ParamStore is allocated, and bound with it (ParamStore::allocate(ctx, ...)); the
// layers read it from the store at bind() and dispatch every call ONCE, on the device of
// their tensors, to a cpu:: or cuda:: implementation that runs in this context.
//
//   CPU:  nothing to create; ExecContext::cpu() is the shared, immutable CPU context.
//   CUDA: the device (selected with cudaSetDevice on the creating thread), one compute stream
//         on which every kernel of this rank runs in issue order, a cuBLAS handle bound to
//         that stream, a cuDNN handle when sparq is built with cuDNN, and a workspace for
//         cuBLAS/cuDNN algorithms (cuda::DeviceResources, core/cuda/device_resources.h).
//
// This header is CUDA-free so that every module includes it; only .cu files and CUDA-side
// .cpp files look inside DeviceResources.
//
// Ownership: move-only; the context must outlive the store, the model and everything that
// enqueued work on its stream.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "core/dtype.h"
#include "core/status.h"

namespace sparq {

namespace cuda {
struct DeviceResources;
}

// How a context's GEMMs multiply (Note [bf16 GEMM operands], core/cuda/mixed_gemm.h): kF32
// multiplies f32 operands; kBF16 rounds both operands of every layer GEMM to bf16 and
// accumulates the products in f32. Activations, parameters and gradients stay f32 in memory
// either way. CUDA only: a CPU context is always kF32.
enum class GemmPrecision { kF32, kBF16 };

class ExecContext {
 public:
  static constexpr std::size_t kDefaultWorkspaceBytes = std::size_t{32} << 20;

  // The CPU context shared by everything that runs on the host. Immutable.
  static const ExecContext& cpu();
  // A context on CUDA device `ordinal`. Errors name the cause: sparq built without CUDA, or
  // fewer visible devices than ordinal + 1 (with the count).
  static Result<std::unique_ptr<ExecContext>> create_cuda(
      int ordinal, GemmPrecision precision = GemmPrecision::kF32,
      std::size_t workspace_bytes = kDefaultWorkspaceBytes);
  // Visible CUDA devices (0 without CUDA or without a driver); never fails.
  static int cuda_device_count();

  ExecContext(ExecContext&&) noexcept;
  ExecContext& operator=(ExecContext&&) noexcept;
  ~ExecContext();

  Device device() const { return device_; }
  bool is_cuda() const { return device_ == Device::kCUDA; }
  int ordinal() const { return ordinal_; }  // -1 for the CPU
  GemmPrecision gemm_precision() const;
  // The CUDA resources; a fatal error on a CPU context (callers dispatch on device first).
  const cuda::DeviceResources& cuda() const;
  // Blocks the host until the compute stream has finished its work (no-op on the CPU).
  void synchronize() const;
  // "cpu" or "cuda:0 (NVIDIA H200, 139.8 GiB, sm_90, bf16 GEMMs)" for the start-up log.
  std::string describe() const;

 private:
  ExecContext() = default;
  Device device_ = Device::kCPU;
  int ordinal_ = -1;
  std::unique_ptr<cuda::DeviceResources> cuda_;
};

}  // namespace sparq
