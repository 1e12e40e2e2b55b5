#include "core/cuda/cuda_handles.h"

#include "core/cuda/cuda_check.h"

#include <string>

namespace sparq::cuda {

void cuda_call_failed(const char* call, cudaError_t error, const char* file, int line) {
  fatal_error(file, line, std::string("CUDA call ") + call + " failed: " + cudaGetErrorString(error));
}

void cublas_call_failed(const char* call, cublasStatus_t status, const char* file, int line) {
  fatal_error(file, line,
              std::string("cuBLAS call ") + call + " failed: " + cublasGetStatusString(status));
}

Stream::Stream() { CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)); }
Stream::~Stream() {
  if (stream_) cudaStreamDestroy(stream_);
}
Stream& Stream::operator=(Stream&& o) noexcept {
  if (this != &o) {
    if (stream_) cudaStreamDestroy(stream_);
    stream_ = std::exchange(o.stream_, nullptr);
  }
  return *this;
}
void Stream::synchronize() const { CUDA_CHECK(cudaStreamSynchronize(stream_)); }

Event::Event(bool timing) {
  CUDA_CHECK(cudaEventCreateWithFlags(&event_, timing ? cudaEventDefault : cudaEventDisableTiming));
}
Event::~Event() {
  if (event_) cudaEventDestroy(event_);
}
Event& Event::operator=(Event&& o) noexcept {
  if (this != &o) {
    if (event_) cudaEventDestroy(event_);
    event_ = std::exchange(o.event_, nullptr);
  }
  return *this;
}
void Event::record(cudaStream_t stream) const { CUDA_CHECK(cudaEventRecord(event_, stream)); }
void Event::gate(cudaStream_t stream) const { CUDA_CHECK(cudaStreamWaitEvent(stream, event_, 0)); }
void Event::synchronize() const { CUDA_CHECK(cudaEventSynchronize(event_)); }
bool Event::ready() const {
  const cudaError_t st = cudaEventQuery(event_);
  if (st == cudaErrorNotReady) return false;
  CUDA_CHECK(st);
  return true;
}
float Event::elapsed_ms_since(const Event& start) const {
  float ms = 0.0f;
  CUDA_CHECK(cudaEventElapsedTime(&ms, start.event_, event_));
  return ms;
}

cublasHandle_t CublasTraits::create() {
  cublasHandle_t handle = nullptr;
  CUBLAS_CHECK(cublasCreate(&handle));
  return handle;
}
void CublasTraits::destroy(cublasHandle_t handle) { cublasDestroy(handle); }
void CublasTraits::set_stream(cublasHandle_t handle, cudaStream_t stream) {
  CUBLAS_CHECK(cublasSetStream(handle, stream));
}

int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) return 0;
  return n;
}

}  // namespace sparq::cuda
