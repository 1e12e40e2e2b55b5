// Note [Synchronous copies and non-blocking streams]
// Every stream sparq creates is non-blocking (cuda_handles.cpp), so a plain cudaMemcpy, which
// runs on the legacy default stream, is ordered with none of them:
//   * it may read a buffer that a kernel on a compute or exchange stream is still writing;
//   * a host-to-device copy from pageable memory, and any device-to-device copy, may return
//     before its data lands, and a kernel enqueued next on one of those streams does not wait
//     for it.
// The few copies that must be synchronous (checkpoint state in and out, the initial parameters,
// host-side state uploaded on first use) go through copy_synchronously, which drains the whole
// device before the copy and again after it. Never use it inside a training step.
#pragma once

#include <cstddef>

namespace sparq::cuda {

// dst = src[0, bytes) between any two of host and (current) device memory, after all queued
// work on the device and complete on return.
void copy_synchronously(void* dst, const void* src, std::size_t bytes);

}  // namespace sparq::cuda
