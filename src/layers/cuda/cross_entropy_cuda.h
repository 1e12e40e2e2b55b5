// CUDA softmax cross-entropy (the device twin of cpu::cross_entropy in
// layers/cross_entropy.h): raw device pointers, enqueued on `stream`, never synchronised.
// Free of fmt (nvcc compiles the .cu).
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

namespace sparq::cuda {

// What the host needs after the kernels: the sum of the per-row losses (double, reduced in
// a fixed order), how many rows were counted, and the first row whose target is neither in
// [0, valid) nor the ignore index (-1 when none; such a row is treated as ignored by the
// kernels, and the layer then stops the job naming it and its bad target).
struct CrossEntropyTotals {
  double loss_sum = 0;
  long long counted = 0;
  long long first_bad_row = -1;
  int bad_target = 0;
};

// logits, dlogits [n, v] (dlogits may be null: forward only; it may alias logits), targets
// i32 [n], row_loss [n], totals: one device CrossEntropyTotals. With a gradient,
// dlogits = dloss * (softmax - onehot) / counted on counted rows, 0 on ignored rows and on
// the padded columns [valid, v). Enqueues the kernels, then an async copy of *totals into
// host_totals (pinned memory): the caller synchronises the stream before reading it.
void cross_entropy(const float* logits, const std::int32_t* targets, float* dlogits,
                   float* row_loss, std::int64_t n, std::int64_t v, std::int64_t valid,
                   std::int32_t ignore_index, float dloss, CrossEntropyTotals* totals,
                   CrossEntropyTotals* host_totals, cudaStream_t stream);

}  // namespace sparq::cuda
