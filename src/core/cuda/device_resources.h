// What a CUDA ExecContext owns (core/exec_context.h): the compute stream and the library
// handles bound to it, and the workspace their algorithms may use. Only compiled with CUDA.
#pragma once

#include <cstddef>

#include "core/buffer.h"
#include "core/cuda/bf16_staging.h"
#include "core/cuda/cuda_handles.h"
#include "core/cuda/stream_scratch.h"
#include "core/exec_context.h"

#if SPARQ_HAS_CUDNN
#include "core/cuda/cudnn_handle.h"
#endif

namespace sparq::cuda {

struct DeviceResources {
  explicit DeviceResources(std::size_t workspace_bytes);

  Stream stream;       // every kernel, copy and library call of this rank, in issue order
  CublasHandle cublas;  // bound to `stream`; its workspace is `workspace`
#if SPARQ_HAS_CUDNN
  CudnnHandle cudnn;  // bound to `stream`
#endif
  Buffer workspace;  // device memory for cuBLAS/cuDNN algorithms
  GemmPrecision gemm_precision = GemmPrecision::kF32;  // Note [bf16 GEMM operands]
  // bf16 copies of GEMM operands under kBF16, reused in stream order. Mutable: layers see the
  // resources as const, and staging changes no state a caller can observe.
  mutable Bf16Staging bf16_staging;
  // The layers' short-lived device scratch (Linear's bias-gradient partial sums), reused in
  // stream order; mutable for the same reason.
  mutable StreamScratch layer_scratch;
  std::string name;  // "NVIDIA H200"
  std::size_t total_memory = 0;
  int compute_capability = 0;  // 90 for sm_90
};

}  // namespace sparq::cuda
