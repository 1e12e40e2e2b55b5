// StreamScratch: one device buffer that the kernels of one stream use between launches,
// grown to the largest request and then reused (Linear's bias-gradient partial sums, and each
// of Bf16Staging's slots). Reuse needs no event: everything of one context runs on its one
// stream, so the kernel that read the memory has finished before the next request's kernels
// start. Growing waits for the stream before freeing the old buffer (a queued kernel may still
// read it); it happens in the first steps only, while the shapes reach their maximum.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "core/buffer.h"

namespace sparq::cuda {

class StreamScratch {
 public:
  // Room for `bytes` bytes, valid until the next request.
  void* reserve(std::size_t bytes, cudaStream_t stream);
  float* floats(std::size_t count, cudaStream_t stream) {
    return static_cast<float*>(reserve(count * sizeof(float), stream));
  }
  std::size_t bytes() const { return buffer_.size(); }

 private:
  Buffer buffer_;
};

}  // namespace sparq::cuda
