// Conv2d on cuDNN: forward, backward-data and backward-filter with the algorithms cuDNN's
// heuristics rank first among those that fit, plus the bias (cudnnAddTensor and
// cudnnConvolutionBackwardBias). Only compiled with cuDNN; used by layers/conv2d.cpp.
//
// Descriptors: the filter and convolution descriptors are fixed by the layer's config and made
// once; the tensor descriptors and algorithms depend on the batch size and are made once per
// batch size (a plan, cached), so a step makes no descriptors and runs no search.
//
// Algorithm choice (once per plan, logged at info with the layer, the three algorithms and
// their workspace bytes):
//   * cudnnGet*Algorithm_v7, cuDNN's heuristics, NOT the benchmarking cudnnFind*: the ranking
//     depends only on the shapes, the GPU and the cuDNN version, never on timing noise, so a
//     resumed run picks the same algorithms as the run that wrote the checkpoint;
//   * FMA math only (CUDNN_FMA_MATH, no TF32 tensor cores): f32 results within rounding of the
//     CPU's, not TF32's 10-bit mantissa;
//   * the workspace each needs must fit the context's workspace buffer (DeviceResources);
//   * deterministic (the default, Conv2d::Config::deterministic): only algorithms cuDNN marks
//     CUDNN_DETERMINISTIC, and never backward-data ALGO_0 or backward-filter ALGO_0 / ALGO_3,
//     which accumulate with atomics. With it a run gives the same bits every time on the same
//     GPU and cuDNN version, which sparq's bit-identical resume relies on.
//   If no ranked algorithm qualifies, the implicit-GEMM ones (forward IMPLICIT_GEMM,
//   backward ALGO_1, all deterministic, little or no workspace) are tried; failing those too,
//   a fatal error names the layer, the pass and the workspace size.
//
// Gradients: see Note [Gradient rule] (layers/param_set.h): dx is written with beta = 0 (its
// old contents are never read), dW and db accumulate with beta = 1.
#pragma once

#include <cudnn.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

#include "core/cuda/device_resources.h"
#include "layers/conv2d.h"
#include "layers/cuda/cudnn_descriptors.h"

namespace sparq::cuda {

struct Conv2dAlgorithms {
  cudnnConvolutionFwdAlgo_t forward = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
  cudnnConvolutionBwdDataAlgo_t backward_data = CUDNN_CONVOLUTION_BWD_DATA_ALGO_1;
  cudnnConvolutionBwdFilterAlgo_t backward_filter = CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1;
  std::size_t forward_bytes = 0, backward_data_bytes = 0, backward_filter_bytes = 0;
};

class Conv2dCudnn {
 public:
  // g: the layer's geometry (g.n is ignored); bias: whether the layer has one.
  Conv2dCudnn(std::string name, const Conv2dGeom& g, bool bias, bool deterministic);

  // x [n, C, H, W], w [K, C, R, S], b [K] (null without bias) -> y [n, K, Ho, Wo].
  void forward(const DeviceResources& res, std::int64_t n, const float* x, const float* w,
               const float* b, float* y);
  // dx (overwritten) may be null: not needed. dw and db (null without bias) accumulate.
  void backward(const DeviceResources& res, std::int64_t n, const float* x, const float* w,
                const float* dy, float* dx, float* dw, float* db);

 private:
  struct Plan {
    TensorDescriptor x, y;
    Conv2dAlgorithms algos;
  };
  // The plan of batch size n: made, with its algorithms chosen and logged, on first use.
  Plan& plan(const DeviceResources& res, std::int64_t n);
  Plan make_plan(const DeviceResources& res, std::int64_t n) const;

  std::string name_;
  Conv2dGeom geom_;
  bool bias_ = false, deterministic_ = true;
  FilterDescriptor filter_;
  ConvolutionDescriptor conv_;
  TensorDescriptor bias_desc_;          // [1, K, 1, 1]
  std::map<std::int64_t, Plan> plans_;  // by batch size
};

}  // namespace sparq::cuda
