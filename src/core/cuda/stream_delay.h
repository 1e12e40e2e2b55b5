// A stream held busy for a given time: how an emulated slow link (comm/emulated_link.h) costs
// time on a CUDA stream without blocking the host or the other streams. One thread spins on
// the GPU's global nanosecond timer until the time has passed since the kernel began, so the
// work queued behind it on the same stream starts that much later while kernels on other
// streams (backward on the compute stream) keep running beside it: the GPU twin of the host
// link's sleep on the communication thread.
#pragma once

#include <cuda_runtime_api.h>

namespace sparq::cuda {

// Enqueues the delay on `stream`; returns at once. Non-positive times enqueue nothing.
void enqueue_stream_delay(double microseconds, cudaStream_t stream);

}  // namespace sparq::cuda
