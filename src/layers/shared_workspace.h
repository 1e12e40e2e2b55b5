// SharedWorkspace: one buffer that several layers of a model take turns using, for memory
// that lives only within one forward or one backward call. Attention's backward scratch
// (dctx, dqkv and the core's area: on CUDA one [B, H, T, T] block) is the case: held per
// layer, a 12-layer GPT-2 124M at B=16, T=1024 kept 12 such blocks (9 GiB) of which one is
// in use at any time.
//
// Note [Workspace turns]
// ~~~~~~~~~~~~~~~~~~~~~~
// Sharing is safe because a model calls its layers one after another, on one host thread
// and (on CUDA) one stream: a layer's kernels that read the workspace are ordered before the
// next layer's kernels that write it, and a layer never reads in one call what it wrote in
// another (anything backward needs from forward lives in the layer's own cache). A layer that
// uses a workspace must keep both halves of that rule; cite this note. Not for layers that
// run concurrently, and not across models or contexts.
//
// Sizing: every user calls reserve() when it allocates its own buffers, so the workspace is
// as large as the largest request before the first step; a reserve on another device, or a
// larger one, replaces the buffer (freeing the old one waits for the device, since queued
// work may read it). Users take data() at each call, never keep it.
#pragma once

#include <cstddef>

#include "core/buffer.h"
#include "core/dtype.h"

namespace sparq {

class SharedWorkspace {
 public:
  // At least `bytes` on `device` from now on (contents not kept when it grows or moves).
  void reserve(std::size_t bytes, Device device) {
    if (buffer_.size() > 0 && buffer_.device() == device && bytes <= buffer_.size()) return;
    buffer_ = Buffer();  // the old buffer goes before the new one is taken (peak memory)
    buffer_ = device == Device::kCPU ? Buffer::host(bytes) : Buffer::device(bytes);
  }
  float* floats() const { return buffer_.as<float>(); }
  std::size_t bytes() const { return buffer_.size(); }
  Device device() const { return buffer_.device(); }

 private:
  Buffer buffer_;
};

}  // namespace sparq
