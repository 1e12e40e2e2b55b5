#include <cmath>

#include "layers/cuda/activation_cuda.h"
#include "layers/cuda/dense_launch.h"
#include "layers/relu_math.h"

namespace sparq::cuda {
namespace {

// The functors are the CPU loops' bodies (layers/activation.cpp; ReLU's in relu_math.h).
struct ReluOp {
  __device__ float operator()(float v) const { return relu_math::forward(v); }
};
struct ReluGradOp {
  __device__ float operator()(float y, float dy) const { return relu_math::backward(y, dy); }
};
struct GeluTanhOp {
  __device__ float operator()(float v) const { return gelu_tanh(v); }
};
struct GeluTanhGradOp {
  __device__ float operator()(float v, float dy) const { return gelu_tanh_grad(v, dy); }
};
struct GeluErfOp {
  __device__ float operator()(float v) const { return gelu_erf(v); }
};
struct GeluErfGradOp {
  __device__ float operator()(float v, float dy) const { return gelu_erf_grad(v, dy); }
};
struct TanhOp {
  __device__ float operator()(float v) const { return tanhf(v); }
};
struct TanhGradOp {
  __device__ float operator()(float y, float dy) const { return dy * (1.0f - y * y); }
};

}  // namespace

void relu_forward(const float* x, float* y, std::int64_t n, cudaStream_t stream) {
  dense::launch_unary(x, y, n, ReluOp{}, stream);
}

void relu_backward(const float* y, const float* dy, float* dx, std::int64_t n,
                   cudaStream_t stream) {
  dense::launch_binary(y, dy, dx, n, ReluGradOp{}, stream);
}

void gelu_forward(GeluKind kind, const float* x, float* y, std::int64_t n, cudaStream_t stream) {
  if (kind == GeluKind::kTanh) {
    dense::launch_unary(x, y, n, GeluTanhOp{}, stream);
  } else {
    dense::launch_unary(x, y, n, GeluErfOp{}, stream);
  }
}

void gelu_backward(GeluKind kind, const float* x, const float* dy, float* dx, std::int64_t n,
                   cudaStream_t stream) {
  if (kind == GeluKind::kTanh) {
    dense::launch_binary(x, dy, dx, n, GeluTanhGradOp{}, stream);
  } else {
    dense::launch_binary(x, dy, dx, n, GeluErfGradOp{}, stream);
  }
}

void tanh_forward(const float* x, float* y, std::int64_t n, cudaStream_t stream) {
  dense::launch_unary(x, y, n, TanhOp{}, stream);
}

void tanh_backward(const float* y, const float* dy, float* dx, std::int64_t n,
                   cudaStream_t stream) {
  dense::launch_binary(y, dy, dx, n, TanhGradOp{}, stream);
}

}  // namespace sparq::cuda
