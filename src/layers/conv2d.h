// Conv2d on NCHW: y[N, K, Ho, Wo] = conv(x[N, C, H, W], W[K, C, R, S]) + b[K], any kernel,
// stride, padding (zeros) and dilation, as torch.nn.Conv2d (groups = 1).
// Ho = (H + 2*pad_h - dil_h*(R-1) - 1) / stride_h + 1, likewise Wo.
//
// Gradients: see Note [Gradient rule] (layers/param_set.h).
//
// Fast path: 3x3 kernels with stride 1, padding 1, dilation 1 and enough input channels on
// maps not too wide (winograd3x3_applies: all of VGG-16's but the first layer, whose 3 input
// channels take the general path) run Winograd F(4x4, 3x3), or F(2x2, 3x3) on small maps
// (layers/conv3x3_winograd.h), measured ~2x faster than im2col + GEMM on VGG-16; its
// workspace is one buffer shared by all such layers (layers/conv3x3_scratch.h). Every other
// geometry takes the general path below.
//
// General path: im2col + GEMM, parallel over images. Forward and the input gradient give each
// image to one thread with its own column matrix [C*R*S, Ho*Wo] (a "slot") and a
// single-threaded GEMM (y = W * col; col = W^T * dY, then col2im). Per-image GEMMs split over
// two threads (64 x 1024 x 576 for VGG's 64-channel 32x32 layers) spent much of their time in
// Eigen's per-call packing and synchronisation; whole images per thread do not.
// The weight gradient dW += dY * col^T runs over chunks of conv2d_dw_images(g) images (one
// for 16x16 maps and larger, 16 at 4x4) whose columns lie side by side, so the product's inner
// dimension is ~256 or more even for small maps; each chunk's product is split into fixed
// dW column blocks of at least 256 columns, one task each. Task boundaries, GEMM shapes and
// the summation order (chunks in image order) depend on the geometry only, never on the
// thread count or on `slots`, so results are the same for any number of threads (except that
// a GEMM running alone -- a batch of one image, a single dW block -- uses Eigen's threading).
// 1x1 / stride 1 / no padding uses the image itself as its column matrix (no workspace).
// Parameters: "<prefix>.weight" [K, C, R, S] (Kaiming normal, decay), "<prefix>.bias" [K]
// (zeros, no decay) when enabled.
// Workspace: the layer owns conv2d_workspace_elems(g, slots, dw_images) floats: the larger of
// slots column matrices (slots = OpenMP threads when the layer is built, at most kMaxSlots)
// and one weight-gradient chunk, dw_images * (C*R*S + K) * Ho*Wo. It is sized at construction
// from in_h/in_w and reused by forward and backward; no per-step allocation. VGG-16 at 32x32
// with 2 threads: 44 MB over its 13 convolutions, 5.3 MB at most per layer.
//
// On CUDA (Note [Layer dispatch], layers/param_set.h) the layer runs on cuDNN
// (layers/cuda/conv2d_cudnn.h: algorithms by cuDNN's heuristics, FMA math, within the
// context's workspace, chosen once per batch size and logged). Config::deterministic (the
// default) restricts them to deterministic ones, so a step gives the same bits on every run:
// sparq promises bit-identical resume. bind() to a CUDA store releases the host workspace;
// a CUDA build without cuDNN refuses device tensors with a message naming the layer.
#pragma once

#include <memory>

#include "core/buffer.h"
#include "layers/conv3x3_scratch.h"
#include "layers/param_set.h"

namespace sparq {

namespace cuda {
class Conv2dCudnn;  // layers/cuda/conv2d_cudnn.h, only with cuDNN
}

struct Conv2dGeom {
  std::int64_t n = 0, c = 0, h = 0, w = 0;  // input
  std::int64_t k = 0, r = 0, s = 0;         // output channels, kernel height, width
  std::int64_t stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0, dil_h = 1, dil_w = 1;
  std::int64_t out_h() const { return (h + 2 * pad_h - dil_h * (r - 1) - 1) / stride_h + 1; }
  std::int64_t out_w() const { return (w + 2 * pad_w - dil_w * (s - 1) - 1) / stride_w + 1; }
  std::int64_t col_rows() const { return c * r * s; }
  std::int64_t col_cols() const { return out_h() * out_w(); }
  // True when the column matrix of an image is the image itself.
  bool is_pointwise() const {
    return r == 1 && s == 1 && stride_h == 1 && stride_w == 1 && pad_h == 0 && pad_w == 0;
  }
};

namespace cpu {
// Workspace elements for `slots` images in flight and weight-gradient chunks of `dw_images`
// images: the larger of slots * col_rows() * col_cols() (0 when is_pointwise()) and, when
// dw_images > 1, dw_images * (col_rows() + k) * col_cols().
std::int64_t conv2d_workspace_elems(const Conv2dGeom& g, std::int64_t slots,
                                    std::int64_t dw_images = 1);
// Images per weight-gradient chunk: enough for ~256 GEMM-inner columns (1 for 16x16 and up).
std::int64_t conv2d_dw_images(const Conv2dGeom& g);
// work: conv2d_workspace_elems(g, slots) elements. At most `slots` threads work at once.
template <typename T>
void conv2d_forward(const Conv2dGeom& g, const T* x, const T* w, const T* b, T* y, T* work,
                    std::int64_t slots = 1);
// db[k] += the sum of dy's channel k over images and pixels, in (image, pixel) order: the
// bias gradient of every CPU convolution path.
template <typename T>
void conv2d_bias_backward(const Conv2dGeom& g, const T* dy, T* db);
// dx (overwritten) may be null; dw and db (+=) may be null.
template <typename T>
void conv2d_backward(const Conv2dGeom& g, const T* x, const T* w, const T* dy, T* dx, T* dw, T* db,
                     T* work, std::int64_t slots = 1, std::int64_t dw_images = 1);
}  // namespace cpu

// Column slots a layer of geometry g allocates (g.n is ignored).
std::int64_t conv2d_slots(const Conv2dGeom& g);

class Conv2d : public ParamLayer {
 public:
  struct Config {
    std::int64_t in_channels = 0, out_channels = 0;
    std::int64_t kernel_h = 3, kernel_w = 3;
    std::int64_t stride = 1, padding = 0, dilation = 1;
    bool bias = true;
    std::int64_t in_h = 0, in_w = 0;  // input spatial size the workspace is sized for
    // CUDA only: restrict cuDNN to deterministic algorithms (same bits on every run). Turning
    // it off lets cuDNN's heuristics pick atomics-based backward algorithms too.
    bool deterministic = true;
  };
  // Bounds the workspace on many-core hosts; beyond this, threads share out dW blocks only.
  static constexpr std::int64_t kMaxSlots = 16;
  Conv2d(std::string prefix, Config config);
  ~Conv2d();
  Conv2d(Conv2d&&) noexcept;
  Conv2d& operator=(Conv2d&&) noexcept;

  // Hides ParamLayer::bind: also keeps the CPU workspace only where it is used (released when
  // the store is on CUDA, allocated again when a later bind is to a CPU store).
  void bind(const ParamStore& store);

  void forward(const Tensor& x, const Tensor& y);
  // dx may be empty (first layer: no input gradient needed).
  void backward(const Tensor& x, const Tensor& dy, const Tensor& dx);

  // Geometry for a batch of n images.
  Conv2dGeom geom(std::int64_t n) const;
  Shape output_shape(std::int64_t n) const;
  // Workspace this layer owns: the general path's im2col buffer. The fast path's is shared
  // by all its layers and counted once, by Conv3x3Scratch::size_floats(), not here.
  std::size_t cache_bytes() const { return work_.size(); }
  // True when the CPU path is the Winograd 3x3 one (conv3x3_winograd.h).
  bool fast3x3() const { return fast3x3_; }
  std::int64_t slots() const { return slots_; }

 private:
  void check_x(const Tensor& x) const;
  void allocate_cpu_workspace();
  // The cuDNN half of the layer, made on first use in a CUDA context (only with cuDNN).
  cuda::Conv2dCudnn& cudnn();
  Config config_;
  int w_ = -1, b_ = -1;
  std::int64_t slots_ = 1, dw_images_ = 1;
  bool fast3x3_ = false;
  Buffer work_;                     // general path
  Conv3x3Scratch::Reservation scratch_;  // fast path
  std::unique_ptr<cuda::Conv2dCudnn> cudnn_;
};

}  // namespace sparq
