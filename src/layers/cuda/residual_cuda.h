// CUDA implementation of Residual (layers/residual.h), Note [Layer dispatch]: out = a + b
// elementwise on n device floats, enqueued on `stream`. One rounding per element, as on the
// CPU, so it equals the CPU bit for bit. out may alias a or b (the in-place joins). fmt-free.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace sparq::cuda {

void residual_add(const float* a, const float* b, float* out, std::int64_t n, cudaStream_t stream);

}  // namespace sparq::cuda
