// CUDA VocabBias (the device twin of cpu::vocab_bias_* in layers/vocab_bias.h): raw device
// pointers, enqueued on `stream`, never synchronised. Free of fmt (nvcc compiles the .cu).
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

namespace sparq::cuda {

// y[r, j] += b[j], in place on logits [rows, vocab].
void vocab_bias_forward(const float* b, float* y, std::int64_t rows, std::int64_t vocab,
                        cudaStream_t stream);

// Device floats the backward needs as `scratch`.
std::size_t vocab_bias_backward_scratch_floats(std::int64_t vocab);

// db[j] += column sums of dy [rows, vocab], by a fixed-order two-pass reduction.
void vocab_bias_backward(const float* dy, float* db, float* scratch, std::int64_t rows,
                         std::int64_t vocab, cudaStream_t stream);

}  // namespace sparq::cuda
