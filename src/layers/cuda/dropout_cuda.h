// CUDA implementation of Dropout (layers/dropout.h), Note [Layer dispatch]: y = x * scale on
// n device floats, enqueued on `stream`. The scales are regenerated from the Philox
// positions of layers/dropout_mask.h with its shared keep decision, so the mask and y equal
// the CPU's (cpu::dropout_apply) bit for bit. x may alias y. fmt-free.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "layers/dropout_mask.h"

namespace sparq::cuda {

// Element i uses Philox position key.first + i (offset 0, as the layer does); 0 <= p < 1.
void dropout_apply(const DropoutKey& key, float p, const float* x, float* y, std::int64_t n,
                   cudaStream_t stream);

}  // namespace sparq::cuda
