// One host workspace shared by every CPU Conv2d on the 3x3 fast path (conv3x3_winograd.h).
// Layers run one at a time, so a buffer the size of the largest layer's need serves them all:
// VGG-16 at 32x32 needs about 47 MB for its largest layers (conv3x3_winograd.h), against
// several times that if each of its fast-path convolutions kept its own (the transformed
// weights of the 512-channel layers dominate).
//
// A layer takes a Reservation when it is built (or bound back to the CPU) and drops it when
// destroyed or bound to CUDA; the buffer is resized only then, to the largest live
// reservation, never during a step. Access::data() is valid while the Access lives and holds
// a lock, so two threads running convolutions at once take turns instead of sharing it.
#pragma once

#include <cstdint>
#include <mutex>

namespace sparq {

class Conv3x3Scratch {
 public:
  class Reservation {
   public:
    Reservation() = default;
    explicit Reservation(std::int64_t floats);
    ~Reservation();
    Reservation(Reservation&& o) noexcept : floats_(o.floats_) { o.floats_ = 0; }
    Reservation& operator=(Reservation&& o) noexcept;
    Reservation(const Reservation&) = delete;
    Reservation& operator=(const Reservation&) = delete;
    std::int64_t floats() const { return floats_; }

   private:
    std::int64_t floats_ = 0;  // 0: holds nothing
  };

  class Access {
   public:
    Access();
    float* data() const { return data_; }

   private:
    std::unique_lock<std::mutex> lock_;
    float* data_ = nullptr;
  };

  // Current buffer size in floats (for tests and reports).
  static std::int64_t size_floats();
};

}  // namespace sparq
