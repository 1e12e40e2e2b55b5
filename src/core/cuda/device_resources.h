// What a CUDA ExecContext owns (core/exec_context.h): the compute stream and the library
// handles bound to it, and the workspace their algorithms may use. Only compiled with CUDA.
#pragma once

#include <cstddef>

#include "core/buffer.h"
#include "core/cuda/cuda_handles.h"

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
  std::string name;  // "NVIDIA H200"
  std::size_t total_memory = 0;
  int compute_capability = 0;  // 90 for sm_90
};

}  // namespace sparq::cuda
