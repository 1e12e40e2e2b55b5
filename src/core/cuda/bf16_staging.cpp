#include "core/cuda/bf16_staging.h"

#include "core/check.h"
#include "core/cuda/cuda_check.h"

namespace sparq::cuda {

std::uint16_t* Bf16Staging::slot(int index, std::size_t count, cudaStream_t stream) {
  SPARQ_CHECK(index >= 0 && index < kSlots, "bf16 staging slot {} of {}", index, kSlots);
  Buffer& buffer = slots_[static_cast<std::size_t>(index)];
  const std::size_t bytes = count * sizeof(std::uint16_t);
  if (buffer.size() < bytes) {
    CUDA_CHECK(cudaStreamSynchronize(stream));  // a queued product may still read the old one
    buffer = Buffer();
    buffer = Buffer::device(bytes);
  }
  return buffer.as<std::uint16_t>();
}

std::size_t Bf16Staging::bytes() const {
  std::size_t total = 0;
  for (const Buffer& b : slots_) total += b.size();
  return total;
}

}  // namespace sparq::cuda
