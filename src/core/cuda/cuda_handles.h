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

// A move-only owner of a CUDA library handle: Traits::create() makes one (aborting with the
// library's error on failure), Traits::destroy(h) releases it, Traits::set_stream(h, s) binds
// it to a stream. cuBLAS here, cuDNN in cudnn_handle.h.
template <typename Traits>
class LibraryHandle {
 public:
  using Raw = typename Traits::Raw;
  LibraryHandle() : handle_(Traits::create()) {}
  ~LibraryHandle() {
    if (handle_) Traits::destroy(handle_);
  }
  LibraryHandle(LibraryHandle&& o) noexcept : handle_(std::exchange(o.handle_, nullptr)) {}
  LibraryHandle& operator=(LibraryHandle&& o) noexcept {
    if (this != &o) {
      if (handle_) Traits::destroy(handle_);
      handle_ = std::exchange(o.handle_, nullptr);
    }
    return *this;
  }
  LibraryHandle(const LibraryHandle&) = delete;
  LibraryHandle& operator=(const LibraryHandle&) = delete;

  Raw get() const { return handle_; }
  void set_stream(cudaStream_t stream) const { Traits::set_stream(handle_, stream); }

 private:
  Raw handle_ = nullptr;
};

struct CublasTraits {
  using Raw = cublasHandle_t;
  static Raw create();
  static void destroy(Raw handle);
  static void set_stream(Raw handle, cudaStream_t stream);
};
using CublasHandle = LibraryHandle<CublasTraits>;

int device_count();

}  // namespace sparq::cuda
