// Linear's products on the device (layers/cuda/linear_cuda.h), in the context's precision.
#include "core/cuda/device_resources.h"
#include "core/cuda/mixed_gemm.h"
#include "layers/cuda/linear_cuda.h"

namespace sparq::cuda {

void linear_forward(const DeviceResources& device, const float* x, const float* w, const float* b,
                    float* y, std::int64_t n, std::int64_t in, std::int64_t out) {
  if (n == 0) return;
  layer_gemm(device, GemmShape{false, true, n, out, in}, 1.0f, x, w, 0.0f, y);
  if (b != nullptr) add_bias(b, y, n, out, device.stream.get());
}

void linear_backward(const DeviceResources& device, const float* x, const float* w, const float* dy,
                     float* dx, float* dw, float* db, std::int64_t n, std::int64_t in,
                     std::int64_t out) {
  if (n == 0) return;
  if (dx != nullptr) layer_gemm(device, GemmShape{false, false, n, in, out}, 1.0f, dy, w, 0.0f, dx);
  // dW += dY^T X: the beta = 1 product is the accumulation Note [Gradient rule] asks for.
  if (dw != nullptr) layer_gemm(device, GemmShape{true, false, out, in, n}, 1.0f, dy, x, 1.0f, dw);
  if (db != nullptr) {
    const cudaStream_t stream = device.stream.get();
    float* scratch = device.layer_scratch.floats(bias_grad_scratch_floats(out), stream);
    add_bias_grad(dy, db, scratch, n, out, stream);
  }
}

}  // namespace sparq::cuda
