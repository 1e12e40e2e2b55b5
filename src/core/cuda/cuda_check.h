// CUDA_CHECK / CUBLAS_CHECK: a failing runtime or cuBLAS call aborts the job (through the
// fatal handler, so MPI_Abort reaches every rank) naming the call, its error and where.
// Free of fmt so that .cu files can use it.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "core/fatal.h"

namespace sparq::cuda {

[[noreturn]] void cuda_call_failed(const char* call, cudaError_t error, const char* file, int line);
[[noreturn]] void cublas_call_failed(const char* call, cublasStatus_t status, const char* file,
                                     int line);

}  // namespace sparq::cuda

#define CUDA_CHECK(call)                                                              \
  do {                                                                                \
    const cudaError_t sparq_cuda_err_ = (call);                                       \
    if (sparq_cuda_err_ != cudaSuccess)                                               \
      ::sparq::cuda::cuda_call_failed(#call, sparq_cuda_err_, __FILE__, __LINE__);    \
  } while (0)

#define CUBLAS_CHECK(call)                                                            \
  do {                                                                                \
    const cublasStatus_t sparq_cublas_st_ = (call);                                   \
    if (sparq_cublas_st_ != CUBLAS_STATUS_SUCCESS)                                    \
      ::sparq::cuda::cublas_call_failed(#call, sparq_cublas_st_, __FILE__, __LINE__); \
  } while (0)
