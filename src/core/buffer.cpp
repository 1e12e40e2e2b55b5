#include "core/buffer.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <utility>

#ifdef SPARQ_HAS_CUDA
#include <cuda_runtime.h>

#include "core/cuda/cuda_check.h"
#endif

namespace sparq {

// Note [Zeroed host buffers are mapped]
// The flat parameter, gradient, optimizer-state and residual buffers are zeroed when made:
// for GPT-2 124M about 4 GiB, which memset wrote page by page before the first step (11 s of
// a 12 s `train --dry-run`, which never touches them). A fresh anonymous mapping reads as
// zeros and costs nothing until a page is first written, so a large zeroed buffer is mapped
// instead: the zeroing moves to first touch (the first step), and memory a run never writes
// (a dry run's) is never committed. Small buffers stay on aligned_alloc, where a mapping's
// page rounding and system calls would cost more than the memset saves.
namespace {
constexpr std::size_t kMapAtLeastBytes = std::size_t{1} << 20;

// bytes rounded up to a multiple of `to`. A size within `to` of SIZE_MAX wrapped to 0, and
// aligned_alloc's minimal block was returned as a buffer of SIZE_MAX - 10 bytes (review,
// 2026-12-06), so that fails the check.
std::size_t round_up(std::size_t bytes, std::size_t to) {
  std::size_t sum = 0;
  SPARQ_CHECK(!__builtin_add_overflow(bytes, to - 1, &sum),
              "host buffer of {} bytes: rounding up to a multiple of {} passes SIZE_MAX", bytes,
              to);
  return sum / to * to;
}

std::size_t page_rounded(std::size_t bytes) {
  return round_up(bytes, static_cast<std::size_t>(::sysconf(_SC_PAGESIZE)));
}
}  // namespace

Buffer Buffer::host(std::size_t bytes, bool zeroed, std::size_t alignment) {
  Buffer b;
  b.kind_ = Kind::kHost;
  b.bytes_ = bytes;
  if (zeroed && bytes >= kMapAtLeastBytes &&
      alignment <= static_cast<std::size_t>(::sysconf(_SC_PAGESIZE))) {
    void* p = ::mmap(nullptr, page_rounded(bytes), PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    SPARQ_CHECK(p != MAP_FAILED, "out of host memory allocating {} bytes", bytes);
    b.data_ = p;
    b.mapped_ = true;
    return b;
  }
  if (bytes > 0) {
    const std::size_t rounded = round_up(bytes, alignment);
    b.data_ = std::aligned_alloc(alignment, rounded);
    SPARQ_CHECK(b.data_ != nullptr, "out of host memory allocating {} bytes", bytes);
    if (zeroed) std::memset(b.data_, 0, bytes);
  }
  return b;
}

Buffer Buffer::pinned(std::size_t bytes, bool zeroed) {
#ifdef SPARQ_HAS_CUDA
  if (cuda_available()) {
    Buffer b;
    b.kind_ = Kind::kPinned;
    b.bytes_ = bytes;
    if (bytes > 0) {
      CUDA_CHECK(cudaMallocHost(&b.data_, bytes));
      if (zeroed) std::memset(b.data_, 0, bytes);
    }
    return b;
  }
#endif
  return host(bytes, zeroed);
}

Buffer Buffer::device(std::size_t bytes, bool zeroed) {
#ifdef SPARQ_HAS_CUDA
  Buffer b;
  b.kind_ = Kind::kDevice;
  b.bytes_ = bytes;
  if (bytes > 0) {
    CUDA_CHECK(cudaMalloc(&b.data_, bytes));
    if (zeroed) b.zero();
  }
  return b;
#else
  (void)zeroed;
  SPARQ_FATAL("device buffer of {} bytes requested, but sparq was built without CUDA", bytes);
#endif
}

Buffer::Buffer(Buffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      bytes_(std::exchange(other.bytes_, 0)),
      kind_(other.kind_),
      mapped_(std::exchange(other.mapped_, false)) {}

Buffer& Buffer::operator=(Buffer&& other) noexcept {
  if (this != &other) {
    release();
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
    kind_ = other.kind_;
    mapped_ = std::exchange(other.mapped_, false);
  }
  return *this;
}

Buffer::~Buffer() { release(); }

void Buffer::release() {
  if (data_ == nullptr) return;
  if (mapped_) {
    ::munmap(data_, page_rounded(bytes_));
    data_ = nullptr;
    bytes_ = 0;
    mapped_ = false;
    return;
  }
  switch (kind_) {
    case Kind::kHost: std::free(data_); break;
#ifdef SPARQ_HAS_CUDA
    case Kind::kPinned: cudaFreeHost(data_); break;
    case Kind::kDevice: cudaFree(data_); break;
#else
    default: std::free(data_); break;
#endif
  }
  data_ = nullptr;
  bytes_ = 0;
}

Tensor Buffer::view(DType dtype, Shape shape, std::size_t byte_offset) const {
  // Checked without sums or products that can wrap (an offset near SIZE_MAX passed and gave a
  // pointer before the buffer), and element-aligned, as the vectorised loops assume (review,
  // 2026-12-06).
  const std::size_t element = dtype_size(dtype);
  std::size_t data_bytes = 0;
  const bool fits =
      !__builtin_mul_overflow(static_cast<std::size_t>(shape.numel()), element, &data_bytes) &&
      byte_offset <= bytes_ && data_bytes <= bytes_ - byte_offset;
  SPARQ_CHECK(fits, "view {}{} at offset {} does not fit a buffer of {} bytes", dtype_name(dtype),
              shape.str(), byte_offset, bytes_);
  SPARQ_CHECK(byte_offset % element == 0,
              "view {}{} at offset {}: not a multiple of the element size {}", dtype_name(dtype),
              shape.str(), byte_offset, element);
  return Tensor(static_cast<char*>(data_) + byte_offset, dtype, shape, device());
}

void Buffer::zero() {
  if (bytes_ == 0) return;
#ifdef SPARQ_HAS_CUDA
  if (kind_ == Kind::kDevice) {
    // cudaMemset runs on the legacy default stream, which the (non-blocking) compute streams
    // do not wait for: complete it before returning. Per-step zeroing of a device store goes
    // through ParamStore::zero_grads, on the context's stream, instead.
    CUDA_CHECK(cudaMemset(data_, 0, bytes_));
    CUDA_CHECK(cudaDeviceSynchronize());
    return;
  }
#endif
  std::memset(data_, 0, bytes_);
}

bool cuda_available() {
#ifdef SPARQ_HAS_CUDA
  static const bool available = [] {
    int count = 0;
    return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
  }();
  return available;
#else
  return false;
#endif
}

}  // namespace sparq
