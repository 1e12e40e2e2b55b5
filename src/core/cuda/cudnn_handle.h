// The cuDNN handle (a LibraryHandle, cuda_handles.h) and CUDNN_CHECK. Only compiled with cuDNN.
#pragma once

#include <cudnn.h>

#include "core/cuda/cuda_handles.h"
#include "core/fatal.h"

namespace sparq::cuda {

[[noreturn]] void cudnn_call_failed(const char* call, cudnnStatus_t status, const char* file,
                                    int line);

struct CudnnTraits {
  using Raw = cudnnHandle_t;
  static Raw create();
  static void destroy(Raw handle);
  static void set_stream(Raw handle, cudaStream_t stream);
};
using CudnnHandle = LibraryHandle<CudnnTraits>;

}  // namespace sparq::cuda

#define CUDNN_CHECK(call)                                                            \
  do {                                                                               \
    const cudnnStatus_t sparq_cudnn_st_ = (call);                                    \
    if (sparq_cudnn_st_ != CUDNN_STATUS_SUCCESS)                                     \
      ::sparq::cuda::cudnn_call_failed(#call, sparq_cudnn_st_, __FILE__, __LINE__);  \
  } while (0)
