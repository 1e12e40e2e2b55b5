#include "layers/cuda/cudnn_descriptors.h"

#include <limits>

#include "core/check.h"

namespace sparq::cuda {

int cudnn_int(std::int64_t v, const char* what) {
  SPARQ_CHECK(v >= 0 && v <= std::numeric_limits<int>::max(),
              "{}: size {} does not fit cuDNN's int", what, v);
  return static_cast<int>(v);
}

TensorDescriptor nchw_descriptor(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w,
                                 const char* what) {
  // cuDNN indexes with int: the whole tensor, not only each dimension, must fit.
  SPARQ_CHECK(n * c * h * w <= std::numeric_limits<int>::max(),
              "{}: [{}, {}, {}, {}] has more elements than cuDNN's int can index", what, n, c, h,
              w);
  TensorDescriptor desc;
  CUDNN_CHECK(cudnnSetTensor4dDescriptor(desc.get(), CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT,
                                         cudnn_int(n, what), cudnn_int(c, what), cudnn_int(h, what),
                                         cudnn_int(w, what)));
  return desc;
}

FilterDescriptor filter_descriptor(std::int64_t k, std::int64_t c, std::int64_t r, std::int64_t s,
                                   const char* what) {
  FilterDescriptor desc;
  CUDNN_CHECK(cudnnSetFilter4dDescriptor(desc.get(), CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW,
                                         cudnn_int(k, what), cudnn_int(c, what), cudnn_int(r, what),
                                         cudnn_int(s, what)));
  return desc;
}

}  // namespace sparq::cuda
