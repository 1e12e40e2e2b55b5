#include "core/cuda/cudnn_handle.h"

#include <string>

namespace sparq::cuda {

void cudnn_call_failed(const char* call, cudnnStatus_t status, const char* file, int line) {
  fatal_error(file, line, std::string("cuDNN call ") + call + " failed: " +
                              cudnnGetErrorString(status));
}

CudnnHandle::CudnnHandle() { CUDNN_CHECK(cudnnCreate(&handle_)); }
CudnnHandle::~CudnnHandle() {
  if (handle_) cudnnDestroy(handle_);
}
CudnnHandle& CudnnHandle::operator=(CudnnHandle&& o) noexcept {
  if (this != &o) {
    if (handle_) cudnnDestroy(handle_);
    handle_ = std::exchange(o.handle_, nullptr);
  }
  return *this;
}
void CudnnHandle::set_stream(cudaStream_t stream) const {
  CUDNN_CHECK(cudnnSetStream(handle_, stream));
}

}  // namespace sparq::cuda
