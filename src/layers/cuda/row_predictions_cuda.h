// CUDA twin of the host fold in layers/prediction_rule.h (Note [Prediction rule]): for each
// of `rows` rows of logits [rows, width] (device), the prediction over the first `real`
// columns into predictions[rows] (device int32), enqueued on `stream`, never synchronised.
// The maximum of integer keys is exact in any order, so it equals the host's answer bit for
// bit. fmt-free (nvcc compiles the .cu).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace sparq::cuda {

void row_predictions(const float* logits, std::int64_t rows, std::int64_t width, std::int64_t real,
                     std::int32_t* predictions, cudaStream_t stream);

}  // namespace sparq::cuda
