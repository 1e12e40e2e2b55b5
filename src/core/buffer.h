// Buffer: the RAII, move-only owner of raw memory that Tensor views point into.
//   host:   aligned host memory (default 256-byte alignment, matching the param layout)
//   pinned: page-locked host memory for fast device copies (plain aligned memory when sparq
//           is built without CUDA, so callers need no #ifdefs)
//   device: CUDA device memory (a build without CUDA fails the check with a clear message)
// Contents are NOT initialised unless `zeroed` is requested. A large zeroed host buffer is
// mapped from the kernel's zero pages instead of written (Note [Zeroed host buffers are
// mapped], buffer.cpp).
#pragma once

#include <cstddef>

#include "core/tensor.h"

namespace sparq {

class Buffer {
 public:
  enum class Kind { kHost, kPinned, kDevice };
  static constexpr std::size_t kDefaultAlignment = 256;

  Buffer() = default;
  static Buffer host(std::size_t bytes, bool zeroed = false,
                     std::size_t alignment = kDefaultAlignment);
  static Buffer pinned(std::size_t bytes, bool zeroed = false);
  static Buffer device(std::size_t bytes, bool zeroed = false);

  Buffer(Buffer&& other) noexcept;
  Buffer& operator=(Buffer&& other) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer();

  void* data() const { return data_; }
  std::size_t size() const { return bytes_; }
  Kind kind() const { return kind_; }
  Device device() const { return kind_ == Kind::kDevice ? Device::kCUDA : Device::kCPU; }

  template <typename T>
  T* as() const { return static_cast<T*>(data_); }

  // A view of the first shape.numel() elements of the buffer.
  Tensor view(DType dtype, Shape shape, std::size_t byte_offset = 0) const;

  void zero();  // works for every kind

 private:
  void release();
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
  Kind kind_ = Kind::kHost;
  bool mapped_ = false;  // host memory from mmap (released with munmap), not aligned_alloc
};

// True when sparq was built with CUDA and at least one device is visible.
bool cuda_available();

}  // namespace sparq
