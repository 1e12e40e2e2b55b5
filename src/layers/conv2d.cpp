#include "layers/conv2d.h"

#include <algorithm>

#include "core/check.h"
#include "core/profile.h"
#include "core/threading.h"
#include "layers/conv3x3_winograd.h"
#include "layers/matmul.h"

#if SPARQ_HAS_CUDNN
#include "core/cuda/device_resources.h"
#include "layers/cuda/conv2d_cudnn.h"
#else
namespace sparq::cuda {
class Conv2dCudnn {};  // never constructed without cuDNN
}  // namespace sparq::cuda
#endif

namespace sparq {
namespace cpu {
namespace {

// Column matrix [C*R*S, Ho*Wo] of one image: row (c, i, j) holds
// x[c, oy*stride + i*dil - pad, ox*stride + j*dil - pad] for every output pixel (oy, ox), zero
// outside the image. Rows [row0, row1) only, `ld` apart (several images may share a row).
// Single-threaded: callers parallelise over images and rows.
template <typename T>
void im2col(const Conv2dGeom& g, const T* x, T* col, std::int64_t row0, std::int64_t row1,
            std::int64_t ld) {
  const std::int64_t oh = g.out_h(), ow = g.out_w();
  for (std::int64_t row = row0; row < row1; ++row) {
    const std::int64_t c = row / (g.r * g.s), i = row / g.s % g.r, j = row % g.s;
    const T* plane = x + c * g.h * g.w;
    const std::int64_t shift = j * g.dil_w - g.pad_w;
    // With stride 1 the in-image output columns [lo, hi) are the same for every oy.
    const std::int64_t lo = std::clamp<std::int64_t>(-shift, 0, ow);
    const std::int64_t hi = std::clamp<std::int64_t>(g.w - shift, lo, ow);
    T* out = col + row * ld;
    for (std::int64_t oy = 0; oy < oh; ++oy) {
      const std::int64_t iy = oy * g.stride_h + i * g.dil_h - g.pad_h;
      T* dst = out + oy * ow;
      if (iy < 0 || iy >= g.h) {
        std::fill(dst, dst + ow, T(0));
        continue;
      }
      const T* src = plane + iy * g.w;
      if (g.stride_w == 1) {
        std::fill(dst, dst + lo, T(0));
        std::copy(src + lo + shift, src + hi + shift, dst + lo);
        std::fill(dst + hi, dst + ow, T(0));
      } else {
        for (std::int64_t ox = 0; ox < ow; ++ox) {
          const std::int64_t ix = ox * g.stride_w + shift;
          dst[ox] = (ix >= 0 && ix < g.w) ? src[ix] : T(0);
        }
      }
    }
  }
}

// The adjoint of im2col for one image: dx = sum over column entries that read each pixel,
// always in (c, i, j, oy, ox) order. Single-threaded: callers parallelise over images.
template <typename T>
void col2im(const Conv2dGeom& g, const T* col, T* dx) {
  const std::int64_t oh = g.out_h(), ow = g.out_w();
  std::fill(dx, dx + g.c * g.h * g.w, T(0));
  for (std::int64_t c = 0; c < g.c; ++c) {
    T* plane = dx + c * g.h * g.w;
    for (std::int64_t i = 0; i < g.r; ++i) {
      for (std::int64_t j = 0; j < g.s; ++j) {
        const T* src = col + ((c * g.r + i) * g.s + j) * oh * ow;
        const std::int64_t shift = j * g.dil_w - g.pad_w;
        const std::int64_t lo = std::clamp<std::int64_t>(-shift, 0, ow);
        const std::int64_t hi = std::clamp<std::int64_t>(g.w - shift, lo, ow);
        for (std::int64_t oy = 0; oy < oh; ++oy) {
          const std::int64_t iy = oy * g.stride_h + i * g.dil_h - g.pad_h;
          if (iy < 0 || iy >= g.h) continue;
          T* dst = plane + iy * g.w;
          const T* s_row = src + oy * ow;
          if (g.stride_w == 1) {
            for (std::int64_t ox = lo; ox < hi; ++ox) dst[ox + shift] += s_row[ox];
          } else {
            for (std::int64_t ox = 0; ox < ow; ++ox) {
              const std::int64_t ix = ox * g.stride_w + shift;
              if (ix >= 0 && ix < g.w) dst[ix] += s_row[ox];
            }
          }
        }
      }
    }
  }
}

// Least dW columns per task in the weight-gradient product. Blocks depend on the geometry
// alone (not on the thread count), which keeps every GEMM call, and so every rounding, the
// same for any number of threads. Narrower blocks repack dY once per block: measured on the
// 64-channel 3x3 layer (576 columns), 288-wide blocks took 17 ms per batch of 32 images,
// 64-wide ones 21 ms, a single block on one thread 35 ms.
constexpr std::int64_t kMinDwBlock = 256;
// Columns (images x output pixels) the weight-gradient product aims to cover per chunk.
constexpr std::int64_t kDwColumns = 256;

}  // namespace

std::int64_t conv2d_workspace_elems(const Conv2dGeom& g, std::int64_t slots,
                                    std::int64_t dw_images) {
  const std::int64_t hw = g.col_cols();
  const std::int64_t per_image =
      g.is_pointwise() ? 0 : std::max<std::int64_t>(slots, 1) * g.col_rows() * hw;
  const std::int64_t dw_chunk = dw_images > 1 ? dw_images * (g.col_rows() + g.k) * hw : 0;
  return std::max(per_image, dw_chunk);
}

std::int64_t conv2d_dw_images(const Conv2dGeom& g) {
  return std::max<std::int64_t>(kDwColumns / g.col_cols(), 1);
}

template <typename T>
void conv2d_forward(const Conv2dGeom& g, const T* x, const T* w, const T* b, T* y, T* work,
                    std::int64_t slots) {
  const std::int64_t hw = g.col_cols(), crs = g.col_rows(), chw = g.c * g.h * g.w;
  slots = std::max<std::int64_t>(slots, 1);
  // Images are independent: one thread per image, each with its own column slot, running a
  // single-threaded GEMM (Eigen does not split a GEMM inside a parallel region). Measured on
  // VGG's 64-channel 32x32 layer this is ~1.4x faster than per-image multithreaded GEMMs.
  for (std::int64_t n0 = 0; n0 < g.n; n0 += slots) {
    const std::int64_t nb = std::min(slots, g.n - n0);
#pragma omp parallel for schedule(static) num_threads(static_cast<int>(nb)) if (nb > 1)
    for (std::int64_t j = 0; j < nb; ++j) {
      const T* x_img = x + (n0 + j) * chw;
      T* y_img = y + (n0 + j) * g.k * hw;
      const T* cols = x_img;
      if (!g.is_pointwise()) {
        T* col = work + j * crs * hw;
        im2col(g, x_img, col, 0, crs, hw);
        cols = col;
      }
      matmul<T>(GemmShape{false, false, g.k, hw, crs}, T(1), w, cols, T(0), y_img);
      if (b == nullptr) continue;
      for (std::int64_t k = 0; k < g.k; ++k) {
        T* row = y_img + k * hw;
        for (std::int64_t p = 0; p < hw; ++p) row[p] += b[k];
      }
    }
  }
}

template <typename T>
void conv2d_backward(const Conv2dGeom& g, const T* x, const T* w, const T* dy, T* dx, T* dw, T* db,
                     T* work, std::int64_t slots, std::int64_t dw_images) {
  const std::int64_t hw = g.col_cols(), crs = g.col_rows(), chw = g.c * g.h * g.w;
  slots = std::max<std::int64_t>(slots, 1);
  dw_images = std::max<std::int64_t>(dw_images, 1);
  // dW column blocks: as many as fit kMinDwBlock columns, rounded to whole SIMD widths.
  const std::int64_t dw_blocks = std::max<std::int64_t>(crs / kMinDwBlock, 1);
  const std::int64_t dw_width = ((crs + dw_blocks - 1) / dw_blocks + 15) & ~std::int64_t{15};
  for (std::int64_t n0 = 0; dw != nullptr && n0 < g.n; n0 += dw_images) {
    // A chunk's columns [CRS, nb*HW] and, for several images, dY staged as [K, nb*HW]: one
    // product per chunk, so small feature maps (HW = 16 at VGG's 4x4 layers) still give the
    // GEMM a long inner dimension instead of one 16-deep product per image.
    const std::int64_t nb = std::min(dw_images, g.n - n0), ld = nb * hw;
    const T* cols = x + n0 * chw;  // pointwise, one image: the image is its column matrix
    const T* dys = dy + n0 * g.k * hw;
    if (nb > 1 || !g.is_pointwise()) {
      T* col = work;
#pragma omp parallel for schedule(static) if (nb * crs * hw > 32768)
      for (std::int64_t t = 0; t < nb * g.c; ++t) {
        const std::int64_t img = t / g.c, c = t % g.c, rs = g.r * g.s;
        im2col(g, x + (n0 + img) * chw, col + img * hw, c * rs, (c + 1) * rs, ld);
      }
      cols = col;
    }
    if (nb > 1) {
      T* stage = work + nb * crs * hw;
#pragma omp parallel for schedule(static) if (nb * g.k * hw > 32768)
      for (std::int64_t t = 0; t < nb * g.k; ++t) {
        const std::int64_t img = t / g.k, k = t % g.k;
        std::copy(dys + t * hw, dys + (t + 1) * hw, stage + k * ld + img * hw);
      }
      dys = stage;
    }
    // Tasks own disjoint dW column blocks and chunks follow in image order, so the
    // accumulation order is fixed by the geometry, never by the threads.
#pragma omp parallel for schedule(dynamic) if (dw_blocks > 1)
    for (std::int64_t blk = 0; blk < dw_blocks; ++blk) {
      const std::int64_t c0 = blk * dw_width, width = std::min(dw_width, crs - c0);
      if (width <= 0) continue;
      matmul<T>(GemmShape{false, true, g.k, width, ld, ld, ld, crs}, T(1), dys, cols + c0 * ld,
                T(1), dw + c0);
    }
  }
  for (std::int64_t n0 = 0; dx != nullptr && n0 < g.n; n0 += slots) {
    const std::int64_t nb = std::min(slots, g.n - n0);
#pragma omp parallel for schedule(static) num_threads(static_cast<int>(nb)) if (nb > 1)
    for (std::int64_t j = 0; j < nb; ++j) {
      const T* dy_img = dy + (n0 + j) * g.k * hw;
      T* dx_img = dx + (n0 + j) * chw;
      if (g.is_pointwise()) {
        matmul<T>(GemmShape{true, false, crs, hw, g.k}, T(1), w, dy_img, T(0), dx_img);
      } else {
        T* col = work + j * crs * hw;
        matmul<T>(GemmShape{true, false, crs, hw, g.k}, T(1), w, dy_img, T(0), col);
        col2im(g, col, dx_img);
      }
    }
  }
  if (db != nullptr) conv2d_bias_backward(g, dy, db);
}

template <typename T>
void conv2d_bias_backward(const Conv2dGeom& g, const T* dy, T* db) {
  const std::int64_t hw = g.col_cols();
#pragma omp parallel for schedule(static) if (g.n * g.k * hw > 32768)
  for (std::int64_t k = 0; k < g.k; ++k) {
    T acc = 0;
    for (std::int64_t n = 0; n < g.n; ++n) {
      const T* row = dy + (n * g.k + k) * hw;
      for (std::int64_t p = 0; p < hw; ++p) acc += row[p];
    }
    db[k] += acc;
  }
}

template void conv2d_bias_backward<float>(const Conv2dGeom&, const float*, float*);
template void conv2d_bias_backward<double>(const Conv2dGeom&, const double*, double*);
template void conv2d_forward<float>(const Conv2dGeom&, const float*, const float*, const float*,
                                    float*, float*, std::int64_t);
template void conv2d_forward<double>(const Conv2dGeom&, const double*, const double*, const double*,
                                     double*, double*, std::int64_t);
template void conv2d_backward<float>(const Conv2dGeom&, const float*, const float*, const float*,
                                     float*, float*, float*, float*, std::int64_t, std::int64_t);
template void conv2d_backward<double>(const Conv2dGeom&, const double*, const double*,
                                      const double*, double*, double*, double*, double*,
                                      std::int64_t, std::int64_t);

}  // namespace cpu

Conv2d::Conv2d(std::string prefix, Config config) : ParamLayer(std::move(prefix)), config_(config) {
  const Config& c = config_;
  SPARQ_CHECK(c.in_channels > 0 && c.out_channels > 0 && c.kernel_h > 0 && c.kernel_w > 0,
              "{}: Conv2d needs positive channels and kernel, got {}->{} {}x{}", name(),
              c.in_channels, c.out_channels, c.kernel_h, c.kernel_w);
  SPARQ_CHECK(c.stride > 0 && c.dilation > 0 && c.padding >= 0,
              "{}: bad stride {} / dilation {} / padding {}", name(), c.stride, c.dilation,
              c.padding);
  const Conv2dGeom g = geom(1);
  // The dilated kernel must fit the padded input: out_h() divides toward zero, so with a
  // stride above 1 a kernel larger than the input would still give one output row.
  SPARQ_CHECK(c.in_h > 0 && c.in_w > 0 &&
                  c.in_h + 2 * c.padding >= c.dilation * (c.kernel_h - 1) + 1 &&
                  c.in_w + 2 * c.padding >= c.dilation * (c.kernel_w - 1) + 1,
              "{}: input {}x{} (padding {}) is smaller than the kernel {}x{} (dilation {})", name(),
              c.in_h, c.in_w, c.padding, c.kernel_h, c.kernel_w, c.dilation);
  w_ = params_.add("weight", {c.out_channels, c.in_channels, c.kernel_h, c.kernel_w},
                   Init::kaiming_normal(), true);
  if (c.bias) b_ = params_.add("bias", {c.out_channels}, Init::zeros(), false);
  fast3x3_ = cpu::winograd3x3_applies(g);
  slots_ = conv2d_slots(g);
  dw_images_ = cpu::conv2d_dw_images(g);
  allocate_cpu_workspace();
}

Conv2d::~Conv2d() = default;
Conv2d::Conv2d(Conv2d&&) noexcept = default;
Conv2d& Conv2d::operator=(Conv2d&&) noexcept = default;

void Conv2d::allocate_cpu_workspace() {
  if (fast3x3_) {
    if (scratch_.floats() == 0) {
      scratch_ = Conv3x3Scratch::Reservation(cpu::winograd3x3_workspace_elems(geom(1)));
    }
    return;
  }
  const std::int64_t elems = cpu::conv2d_workspace_elems(geom(1), slots_, dw_images_);
  if (elems > 0 && work_.size() == 0) work_ = Buffer::host(elems * sizeof(float));
}

void Conv2d::bind(const ParamStore& store) {
  ParamLayer::bind(store);
  cudnn_.reset();  // its algorithms were chosen for the previous context's workspace
  if (on_cuda()) {
    work_ = Buffer();
    scratch_ = Conv3x3Scratch::Reservation();
  } else {
    allocate_cpu_workspace();
  }
}

#if SPARQ_HAS_CUDNN
cuda::Conv2dCudnn& Conv2d::cudnn() {
  if (!cudnn_) {
    cudnn_ = std::make_unique<cuda::Conv2dCudnn>(name(), geom(1), b_ >= 0, config_.deterministic);
  }
  return *cudnn_;
}
#endif

std::int64_t conv2d_slots(const Conv2dGeom& g) {
  if (g.is_pointwise()) return 1;  // the image is its own column matrix: no workspace at all
  std::int64_t slots = std::clamp<std::int64_t>(max_threads(), 1, Conv2d::kMaxSlots);
  return slots;
}

Conv2dGeom Conv2d::geom(std::int64_t n) const {
  const Config& c = config_;
  return Conv2dGeom{n,          c.in_channels, c.in_h,    c.in_w,   c.out_channels,
                    c.kernel_h, c.kernel_w,    c.stride,  c.stride, c.padding,
                    c.padding,  c.dilation,    c.dilation};
}

Shape Conv2d::output_shape(std::int64_t n) const {
  const Conv2dGeom g = geom(n);
  return {n, g.k, g.out_h(), g.out_w()};
}

void Conv2d::check_x(const Tensor& x) const {
  SPARQ_CHECK(x.ndim() == 4, "{}: x must be NCHW, got {}", name(), x.shape().str());
  check_arg(x, {x.dim(0), config_.in_channels, config_.in_h, config_.in_w}, name(), "x",
            DType::kF32, device());
}

void Conv2d::forward(const Tensor& x, const Tensor& y) {
  SPARQ_PROFILE_SCOPE("conv2d.forward");  // Note [Profile scopes]
  check_x(x);
  check_arg(y, output_shape(x.dim(0)), name(), "y", DType::kF32, device());
  const float* w = params_.param(w_).data<float>();
  const float* b = b_ >= 0 ? params_.param(b_).data<float>() : nullptr;
  if (on_cuda()) {
#if SPARQ_HAS_CUDNN
    cudnn().forward(context().cuda(), x.dim(0), x.data<float>(), w, b, y.data<float>());
#else
    SPARQ_FATAL("{}: Conv2d on CUDA needs cuDNN, and sparq was built without it", name());
#endif
  } else {
    // Allocates only if a bind() to a CUDA store released the workspace and the layer was
    // then bound back to the CPU through ParamLayer::bind.
    allocate_cpu_workspace();
    if (fast3x3_) {
      const Conv3x3Scratch::Access scratch;
      cpu::winograd3x3_forward<float>(geom(x.dim(0)), x.data<float>(), w, b, y.data<float>(),
                                      scratch.data());
      return;
    }
    cpu::conv2d_forward<float>(geom(x.dim(0)), x.data<float>(), w, b, y.data<float>(),
                               work_.as<float>(), slots_);
  }
}

void Conv2d::backward(const Tensor& x, const Tensor& dy, const Tensor& dx) {
  SPARQ_PROFILE_SCOPE("conv2d.backward");  // Note [Profile scopes]
  check_x(x);
  check_arg(dy, output_shape(x.dim(0)), name(), "dy", DType::kF32, device());
  if (!dx.empty()) check_arg(dx, x.shape(), name(), "dx", DType::kF32, device());
  const float* w = params_.param(w_).data<float>();
  float* dx_data = dx.empty() ? nullptr : dx.data<float>();
  float* dw = params_.grad(w_).data<float>();
  float* db = b_ >= 0 ? params_.grad(b_).data<float>() : nullptr;
  if (on_cuda()) {
#if SPARQ_HAS_CUDNN
    cudnn().backward(context().cuda(), x.dim(0), x.data<float>(), w, dy.data<float>(), dx_data,
                     dw, db);
#else
    SPARQ_FATAL("{}: Conv2d on CUDA needs cuDNN, and sparq was built without it", name());
#endif
  } else {
    allocate_cpu_workspace();
    if (fast3x3_) {
      const Conv3x3Scratch::Access scratch;
      cpu::winograd3x3_backward<float>(geom(x.dim(0)), x.data<float>(), w, dy.data<float>(),
                                       dx_data, dw, db, scratch.data());
      return;
    }
    cpu::conv2d_backward<float>(geom(x.dim(0)), x.data<float>(), w, dy.data<float>(), dx_data, dw,
                                db, work_.as<float>(), slots_, dw_images_);
  }
}

}  // namespace sparq
