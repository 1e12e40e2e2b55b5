// RAII owners of CUDA handles: streams, events and the cuBLAS handle. All are move-only and
// release their handle in the destructor. Only compiled when sparq is built with CUDA.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <utility>

namespace sparq::cuda {

class Stream {
 public:
  Stream();  // a non-blocking stream on the current device
  ~Stream();
  Stream(Stream&& o) noexcept : stream_(std::exchange(o.stream_, nullptr)) {}
  Stream& operator=(Stream&& o) noexcept;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  cudaStream_t get() const { return stream_; }
  void synchronize() const;

 private:
  cudaStream_t stream_ = nullptr;
};

class Event {
 public:
  explicit Event(bool timing = false);
  ~Event();
  Event(Event&& o) noexcept : event_(std::exchange(o.event_, nullptr)) {}
  Event& operator=(Event&& o) noexcept;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  cudaEvent_t get() const { return event_; }
  void record(cudaStream_t stream) const;
  // Makes `stream` wait for this event without blocking the host.
  void gate(cudaStream_t stream) const;
  void synchronize() const;
  bool ready() const;
  // Milliseconds between `start` (recorded earlier) and this event; both need timing.
  float elapsed_ms_since(const Event& start) const;

 private:
  cudaEvent_t event_ = nullptr;
};

class CublasHandle {
 public:
  CublasHandle();
  ~CublasHandle();
  CublasHandle(CublasHandle&& o) noexcept : handle_(std::exchange(o.handle_, nullptr)) {}
  CublasHandle& operator=(CublasHandle&& o) noexcept;
  CublasHandle(const CublasHandle&) = delete;
  CublasHandle& operator=(const CublasHandle&) = delete;

  cublasHandle_t get() const { return handle_; }
  void set_stream(cudaStream_t stream) const;

 private:
  cublasHandle_t handle_ = nullptr;
};

int device_count();

}  // namespace sparq::cuda
