#include "core/cuda/bf16_staging.h"

#include "core/check.h"

namespace sparq::cuda {

std::uint16_t* Bf16Staging::slot(int index, std::size_t count, cudaStream_t stream) {
  SPARQ_CHECK(index >= 0 && index < kSlots, "bf16 staging slot {} of {}", index, kSlots);
  return static_cast<std::uint16_t*>(
      slots_[static_cast<std::size_t>(index)].reserve(count * sizeof(std::uint16_t), stream));
}

std::size_t Bf16Staging::bytes() const {
  std::size_t total = 0;
  for (const StreamScratch& s : slots_) total += s.bytes();
  return total;
}

}  // namespace sparq::cuda
