#include "core/cuda/cudnn_handle.h"

#include <string>

namespace sparq::cuda {

void cudnn_call_failed(const char* call, cudnnStatus_t status, const char* file, int line) {
  fatal_error(file, line, std::string("cuDNN call ") + call + " failed: " +
                              cudnnGetErrorString(status));
}

cudnnHandle_t CudnnTraits::create() {
  cudnnHandle_t handle = nullptr;
  CUDNN_CHECK(cudnnCreate(&handle));
  return handle;
}
void CudnnTraits::destroy(cudnnHandle_t handle) { cudnnDestroy(handle); }
void CudnnTraits::set_stream(cudnnHandle_t handle, cudaStream_t stream) {
  CUDNN_CHECK(cudnnSetStream(handle, stream));
}

}  // namespace sparq::cuda
