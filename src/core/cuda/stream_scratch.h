// StreamScratch: one device buffer that the kernels of one stream use between launches (the
// partial sums of a column reduction), grown to the largest request and then reused. As for
// Bf16Staging (bf16_staging.h), reuse needs no event: everything of one context runs on its
// one stream, so the kernel that read the memory has finished before the next request's
// kernels start. Growing waits for the stream before freeing the old buffer; it happens in
// the first steps only.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "core/buffer.h"

namespace sparq::cuda {

class StreamScratch {
 public:
  // Room for `count` floats, valid until the next request.
  float* floats(std::size_t count, cudaStream_t stream);
  std::size_t bytes() const { return buffer_.size(); }

 private:
  Buffer buffer_;
};

}  // namespace sparq::cuda
