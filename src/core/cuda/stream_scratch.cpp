#include "core/cuda/stream_scratch.h"

#include "core/cuda/cuda_check.h"

namespace sparq::cuda {

void* StreamScratch::reserve(std::size_t bytes, cudaStream_t stream) {
  if (buffer_.size() < bytes) {
    CUDA_CHECK(cudaStreamSynchronize(stream));  // a queued kernel may still read the old one
    buffer_ = Buffer();
    buffer_ = Buffer::device(bytes);
  }
  return buffer_.data();
}

}  // namespace sparq::cuda
