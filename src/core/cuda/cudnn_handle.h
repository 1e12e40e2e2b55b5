// RAII owner of a cuDNN handle, and CUDNN_CHECK. Only compiled with cuDNN.
#pragma once

#include <cudnn.h>

#include <utility>

#include "core/fatal.h"

namespace sparq::cuda {

[[noreturn]] void cudnn_call_failed(const char* call, cudnnStatus_t status, const char* file,
                                    int line);

class CudnnHandle {
 public:
  CudnnHandle();
  ~CudnnHandle();
  CudnnHandle(CudnnHandle&& o) noexcept : handle_(std::exchange(o.handle_, nullptr)) {}
  CudnnHandle& operator=(CudnnHandle&& o) noexcept;
  CudnnHandle(const CudnnHandle&) = delete;
  CudnnHandle& operator=(const CudnnHandle&) = delete;

  cudnnHandle_t get() const { return handle_; }
  void set_stream(cudaStream_t stream) const;

 private:
  cudnnHandle_t handle_ = nullptr;
};

}  // namespace sparq::cuda

#define CUDNN_CHECK(call)                                                            \
  do {                                                                               \
    const cudnnStatus_t sparq_cudnn_st_ = (call);                                    \
    if (sparq_cudnn_st_ != CUDNN_STATUS_SUCCESS)                                     \
      ::sparq::cuda::cudnn_call_failed(#call, sparq_cudnn_st_, __FILE__, __LINE__);  \
  } while (0)
