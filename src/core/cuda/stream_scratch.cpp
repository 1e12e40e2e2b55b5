#include "core/cuda/stream_scratch.h"

#include "core/cuda/cuda_check.h"

namespace sparq::cuda {

float* StreamScratch::floats(std::size_t count, cudaStream_t stream) {
  const std::size_t bytes = count * sizeof(float);
  if (buffer_.size() < bytes) {
    CUDA_CHECK(cudaStreamSynchronize(stream));  // a queued kernel may still read the old one
    buffer_ = Buffer();
    buffer_ = Buffer::device(bytes);
  }
  return buffer_.as<float>();
}

}  // namespace sparq::cuda
