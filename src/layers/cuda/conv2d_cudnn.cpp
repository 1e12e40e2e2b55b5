#include "layers/cuda/conv2d_cudnn.h"

#include <spdlog/spdlog.h>

#include <functional>
#include <iterator>
#include <vector>

#include "core/check.h"

namespace sparq::cuda {
namespace {

const char* algo_name(cudnnConvolutionFwdAlgo_t a) {
  static const char* const kNames[] = {
      "IMPLICIT_GEMM", "IMPLICIT_PRECOMP_GEMM", "GEMM", "DIRECT", "FFT", "FFT_TILING",
      "WINOGRAD",      "WINOGRAD_NONFUSED"};
  const int i = static_cast<int>(a);
  return i >= 0 && i < static_cast<int>(std::size(kNames)) ? kNames[i] : "UNKNOWN";
}
const char* algo_name(cudnnConvolutionBwdDataAlgo_t a) {
  static const char* const kNames[] = {"ALGO_0",     "ALGO_1",   "FFT",
                                       "FFT_TILING", "WINOGRAD", "WINOGRAD_NONFUSED"};
  const int i = static_cast<int>(a);
  return i >= 0 && i < static_cast<int>(std::size(kNames)) ? kNames[i] : "UNKNOWN";
}
const char* algo_name(cudnnConvolutionBwdFilterAlgo_t a) {
  static const char* const kNames[] = {
      "ALGO_0", "ALGO_1", "FFT", "ALGO_3", "WINOGRAD", "WINOGRAD_NONFUSED", "FFT_TILING"};
  const int i = static_cast<int>(a);
  return i >= 0 && i < static_cast<int>(std::size(kNames)) ? kNames[i] : "UNKNOWN";
}

// The algorithms cuDNN documents as non-deterministic (they accumulate with atomics). Checked
// besides the `determinism` field of the heuristics, so neither alone decides.
bool accumulates_atomically(cudnnConvolutionFwdAlgo_t) { return false; }
bool accumulates_atomically(cudnnConvolutionBwdDataAlgo_t a) {
  return a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_0;
}
bool accumulates_atomically(cudnnConvolutionBwdFilterAlgo_t a) {
  return a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0 || a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3;
}

struct Choice {
  int algo = 0;
  std::size_t bytes = 0;
};

// Ranks the algorithms of one pass with cuDNN's heuristics (max_count, then rank) and returns
// the first that qualifies (FMA math, deterministic when asked, its workspace known and within
// `limit`), else `fallback` if it qualifies; fatal otherwise. workspace(algo, &bytes) is false
// when cuDNN does not support algo for these descriptors.
template <typename Algo, typename Perf>
Choice choose(const std::string& layer, const char* pass, bool deterministic, std::size_t limit,
              Algo fallback, const std::function<cudnnStatus_t(int*)>& max_count,
              const std::function<cudnnStatus_t(int, int*, Perf*)>& rank,
              const std::function<bool(Algo, std::size_t*)>& workspace) {
  int count = 0, returned = 0;
  CUDNN_CHECK(max_count(&count));
  std::vector<Perf> perfs(static_cast<std::size_t>(count));
  CUDNN_CHECK(rank(count, &returned, perfs.data()));
  perfs.resize(static_cast<std::size_t>(returned));
  auto fits = [&](Algo algo, std::size_t* bytes) {
    if (deterministic && accumulates_atomically(algo)) return false;
    return workspace(algo, bytes) && *bytes <= limit;
  };
  for (const Perf& p : perfs) {
    if (p.status != CUDNN_STATUS_SUCCESS) continue;
    // TF32 (or f16-converting) tensor-core kernels round the inputs to 10 mantissa bits.
    if (p.mathType == CUDNN_TENSOR_OP_MATH || p.mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION)
      continue;
    if (deterministic && p.determinism != CUDNN_DETERMINISTIC) continue;
    std::size_t bytes = 0;
    if (fits(p.algo, &bytes)) return {static_cast<int>(p.algo), bytes};
  }
  std::size_t bytes = 0;
  if (fits(fallback, &bytes)) return {static_cast<int>(fallback), bytes};
  SPARQ_FATAL("{}: no cuDNN {} algorithm{} fits the {}-byte workspace (implicit GEMM {} too)",
              layer, pass, deterministic ? " that is deterministic" : "", limit,
              workspace(fallback, &bytes) ? "needs " + std::to_string(bytes) + " bytes"
                                          : std::string("is unsupported"));
}

}  // namespace

Conv2dCudnn::Conv2dCudnn(std::string name, const Conv2dGeom& g, bool bias, bool deterministic)
    : name_(std::move(name)), geom_(g), bias_(bias), deterministic_(deterministic) {
  const char* what = name_.c_str();
  filter_ = filter_descriptor(g.k, g.c, g.r, g.s, what);
  CUDNN_CHECK(cudnnSetConvolution2dDescriptor(
      conv_.get(), cudnn_int(g.pad_h, what), cudnn_int(g.pad_w, what), cudnn_int(g.stride_h, what),
      cudnn_int(g.stride_w, what), cudnn_int(g.dil_h, what), cudnn_int(g.dil_w, what),
      CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  CUDNN_CHECK(cudnnSetConvolutionMathType(conv_.get(), CUDNN_FMA_MATH));
  bias_desc_ = nchw_descriptor(1, g.k, 1, 1, what);
}

Conv2dCudnn::Plan Conv2dCudnn::make_plan(const DeviceResources& res, std::int64_t n) const {
  Conv2dGeom g = geom_;
  g.n = n;
  const char* what = name_.c_str();
  Plan p{nchw_descriptor(n, g.c, g.h, g.w, what),
         nchw_descriptor(n, g.k, g.out_h(), g.out_w(), what),
         {}};
  int on = 0, ok = 0, oh = 0, ow = 0;
  CUDNN_CHECK(cudnnGetConvolution2dForwardOutputDim(conv_.get(), p.x.get(), filter_.get(), &on, &ok,
                                                    &oh, &ow));
  SPARQ_CHECK(on == n && ok == g.k && oh == g.out_h() && ow == g.out_w(),
              "{}: cuDNN's output [{}, {}, {}, {}] differs from the layer's [{}, {}, {}, {}]",
              name_, on, ok, oh, ow, n, g.k, g.out_h(), g.out_w());

  const cudnnHandle_t h = res.cudnn.get();
  const std::size_t limit = res.workspace.size();
  const cudnnTensorDescriptor_t x = p.x.get(), y = p.y.get();
  const cudnnFilterDescriptor_t w = filter_.get();
  const cudnnConvolutionDescriptor_t conv = conv_.get();
  const Choice f = choose<cudnnConvolutionFwdAlgo_t, cudnnConvolutionFwdAlgoPerf_t>(
      name_, "forward", deterministic_, limit, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM,
      [&](int* count) { return cudnnGetConvolutionForwardAlgorithmMaxCount(h, count); },
      [&](int count, int* returned, cudnnConvolutionFwdAlgoPerf_t* perfs) {
        return cudnnGetConvolutionForwardAlgorithm_v7(h, x, w, conv, y, count, returned, perfs);
      },
      [&](cudnnConvolutionFwdAlgo_t algo, std::size_t* bytes) {
        return cudnnGetConvolutionForwardWorkspaceSize(h, x, w, conv, y, algo, bytes) ==
               CUDNN_STATUS_SUCCESS;
      });
  const Choice d = choose<cudnnConvolutionBwdDataAlgo_t, cudnnConvolutionBwdDataAlgoPerf_t>(
      name_, "backward-data", deterministic_, limit, CUDNN_CONVOLUTION_BWD_DATA_ALGO_1,
      [&](int* count) { return cudnnGetConvolutionBackwardDataAlgorithmMaxCount(h, count); },
      [&](int count, int* returned, cudnnConvolutionBwdDataAlgoPerf_t* perfs) {
        return cudnnGetConvolutionBackwardDataAlgorithm_v7(h, w, y, conv, x, count, returned,
                                                           perfs);
      },
      [&](cudnnConvolutionBwdDataAlgo_t algo, std::size_t* bytes) {
        return cudnnGetConvolutionBackwardDataWorkspaceSize(h, w, y, conv, x, algo, bytes) ==
               CUDNN_STATUS_SUCCESS;
      });
  const Choice wf = choose<cudnnConvolutionBwdFilterAlgo_t, cudnnConvolutionBwdFilterAlgoPerf_t>(
      name_, "backward-filter", deterministic_, limit, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1,
      [&](int* count) { return cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(h, count); },
      [&](int count, int* returned, cudnnConvolutionBwdFilterAlgoPerf_t* perfs) {
        return cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, x, y, conv, w, count, returned,
                                                             perfs);
      },
      [&](cudnnConvolutionBwdFilterAlgo_t algo, std::size_t* bytes) {
        return cudnnGetConvolutionBackwardFilterWorkspaceSize(h, x, y, conv, w, algo, bytes) ==
               CUDNN_STATUS_SUCCESS;
      });

  Conv2dAlgorithms& a = p.algos;
  a.forward = static_cast<cudnnConvolutionFwdAlgo_t>(f.algo);
  a.backward_data = static_cast<cudnnConvolutionBwdDataAlgo_t>(d.algo);
  a.backward_filter = static_cast<cudnnConvolutionBwdFilterAlgo_t>(wf.algo);
  a.forward_bytes = f.bytes;
  a.backward_data_bytes = d.bytes;
  a.backward_filter_bytes = wf.bytes;
  spdlog::info(
      "{}: cuDNN algorithms for x [{}, {}, {}, {}] ({}, FMA math): forward {} ({} B), "
      "backward-data {} ({} B), backward-filter {} ({} B); workspace {} B",
      name_, n, g.c, g.h, g.w, deterministic_ ? "deterministic" : "non-deterministic allowed",
      algo_name(a.forward), a.forward_bytes, algo_name(a.backward_data), a.backward_data_bytes,
      algo_name(a.backward_filter), a.backward_filter_bytes, limit);
  return p;
}

Conv2dCudnn::Plan& Conv2dCudnn::plan(const DeviceResources& res, std::int64_t n) {
  auto it = plans_.find(n);
  if (it == plans_.end()) it = plans_.emplace(n, make_plan(res, n)).first;
  return it->second;
}

void Conv2dCudnn::forward(const DeviceResources& res, std::int64_t n, const float* x,
                          const float* w, const float* b, float* y) {
  const Plan& p = plan(res, n);
  const cudnnHandle_t h = res.cudnn.get();
  const float one = 1.0f, zero = 0.0f;
  CUDNN_CHECK(cudnnConvolutionForward(h, &one, p.x.get(), x, filter_.get(), w, conv_.get(),
                                      p.algos.forward, res.workspace.data(), p.algos.forward_bytes,
                                      &zero, p.y.get(), y));
  if (bias_) CUDNN_CHECK(cudnnAddTensor(h, &one, bias_desc_.get(), b, &one, p.y.get(), y));
}

void Conv2dCudnn::backward(const DeviceResources& res, std::int64_t n, const float* x,
                           const float* w, const float* dy, float* dx, float* dw, float* db) {
  const Plan& p = plan(res, n);
  const cudnnHandle_t h = res.cudnn.get();
  const float one = 1.0f, zero = 0.0f;
  if (dx != nullptr) {
    CUDNN_CHECK(cudnnConvolutionBackwardData(h, &one, filter_.get(), w, p.y.get(), dy, conv_.get(),
                                             p.algos.backward_data, res.workspace.data(),
                                             p.algos.backward_data_bytes, &zero, p.x.get(), dx));
  }
  CUDNN_CHECK(cudnnConvolutionBackwardFilter(
      h, &one, p.x.get(), x, p.y.get(), dy, conv_.get(), p.algos.backward_filter,
      res.workspace.data(), p.algos.backward_filter_bytes, &one, filter_.get(), dw));
  if (bias_ && db != nullptr) {
    CUDNN_CHECK(cudnnConvolutionBackwardBias(h, &one, p.y.get(), dy, &one, bias_desc_.get(), db));
  }
}

}  // namespace sparq::cuda
