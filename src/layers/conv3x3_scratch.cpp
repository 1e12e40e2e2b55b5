#include "layers/conv3x3_scratch.h"

#include <set>

#include "core/buffer.h"

namespace sparq {
namespace {

struct Shared {
  std::mutex mutex;
  std::multiset<std::int64_t> reserved;  // floats per live reservation
  Buffer buffer;
};

// Built on first use, so it outlives every layer constructed after it.
Shared& shared() {
  static Shared s;
  return s;
}

// Caller holds the mutex. Resizes to the largest reservation (frees when there is none).
void fit(Shared& s) {
  const std::int64_t want = s.reserved.empty() ? 0 : *s.reserved.rbegin();
  const auto bytes = static_cast<std::size_t>(want) * sizeof(float);
  if (bytes == s.buffer.size()) return;
  s.buffer = Buffer();  // free first: the old and new buffers never coexist
  if (bytes > 0) s.buffer = Buffer::host(bytes);
}

}  // namespace

Conv3x3Scratch::Reservation::Reservation(std::int64_t floats) : floats_(floats) {
  if (floats_ <= 0) return;
  Shared& s = shared();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.reserved.insert(floats_);
  fit(s);
}

Conv3x3Scratch::Reservation::~Reservation() {
  if (floats_ <= 0) return;
  Shared& s = shared();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.reserved.erase(s.reserved.find(floats_));
  fit(s);
}

Conv3x3Scratch::Reservation& Conv3x3Scratch::Reservation::operator=(Reservation&& o) noexcept {
  if (this != &o) {
    Reservation dropped(std::move(*this));  // releases the old one on scope exit
    floats_ = o.floats_;
    o.floats_ = 0;
  }
  return *this;
}

Conv3x3Scratch::Access::Access() : lock_(shared().mutex), data_(shared().buffer.as<float>()) {}

std::int64_t Conv3x3Scratch::size_floats() {
  Shared& s = shared();
  std::lock_guard<std::mutex> lock(s.mutex);
  return static_cast<std::int64_t>(s.buffer.size() / sizeof(float));
}

}  // namespace sparq
