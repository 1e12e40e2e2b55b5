// RAII, move-only owners of cuDNN descriptors (like core/cuda/cuda_handles.h for streams and
// handles), and the f32 NCHW / filter descriptors the vision layers build from them. Only
// compiled with cuDNN; included only by the layers' cuDNN .cpp files (compiled by g++).
#pragma once

#include <cudnn.h>

#include <cstdint>
#include <utility>

#include "core/cuda/cudnn_handle.h"

namespace sparq::cuda {

// Owns one descriptor made by Create and released by Destroy; a moved-from owner holds none.
template <typename Desc, cudnnStatus_t (*Create)(Desc*), cudnnStatus_t (*Destroy)(Desc)>
class CudnnDescriptor {
 public:
  CudnnDescriptor() { CUDNN_CHECK(Create(&desc_)); }
  ~CudnnDescriptor() {
    if (desc_) Destroy(desc_);
  }
  CudnnDescriptor(CudnnDescriptor&& o) noexcept : desc_(std::exchange(o.desc_, nullptr)) {}
  CudnnDescriptor& operator=(CudnnDescriptor&& o) noexcept {
    if (this != &o) {
      if (desc_) Destroy(desc_);
      desc_ = std::exchange(o.desc_, nullptr);
    }
    return *this;
  }
  CudnnDescriptor(const CudnnDescriptor&) = delete;
  CudnnDescriptor& operator=(const CudnnDescriptor&) = delete;

  Desc get() const { return desc_; }

 private:
  Desc desc_ = nullptr;
};

using TensorDescriptor = CudnnDescriptor<cudnnTensorDescriptor_t, &cudnnCreateTensorDescriptor,
                                         &cudnnDestroyTensorDescriptor>;
using FilterDescriptor = CudnnDescriptor<cudnnFilterDescriptor_t, &cudnnCreateFilterDescriptor,
                                         &cudnnDestroyFilterDescriptor>;
using ConvolutionDescriptor =
    CudnnDescriptor<cudnnConvolutionDescriptor_t, &cudnnCreateConvolutionDescriptor,
                    &cudnnDestroyConvolutionDescriptor>;

// A packed f32 NCHW tensor [n, c, h, w]; `what` names it in the error when a dimension does
// not fit cuDNN's int.
TensorDescriptor nchw_descriptor(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w,
                                 const char* what);
// An f32 filter [k, c, r, s] in NCHW (KCRS) order.
FilterDescriptor filter_descriptor(std::int64_t k, std::int64_t c, std::int64_t r, std::int64_t s,
                                   const char* what);
// cuDNN takes int sizes: v (>= 0) as an int, or a fatal error naming `what`.
int cudnn_int(std::int64_t v, const char* what);

}  // namespace sparq::cuda
