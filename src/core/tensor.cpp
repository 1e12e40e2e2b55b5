#include "core/tensor.h"

#include <fmt/format.h>

namespace sparq {

Shape::Shape(std::initializer_list<std::int64_t> dims) {
  SPARQ_CHECK(dims.size() <= kMaxDims, "shape has {} dims, at most {} supported", dims.size(),
              kMaxDims);
  bool empty = false;
  for (std::int64_t d : dims) {
    SPARQ_CHECK(d >= 0, "negative dimension {}", d);
    dims_[ndim_++] = d;
    empty = empty || d == 0;
  }
  // numel() must be exact: every size check is built on it ({2^32, 2^32} wrapped to 0 and
  // passed them all: review, 2026-12-06). A shape with a zero dimension holds nothing.
  std::int64_t n = 1;
  for (int i = 0; i < ndim_ && !empty; ++i) {
    SPARQ_CHECK(!__builtin_mul_overflow(n, dims_[i], &n), "shape {} has more than 2^63 elements",
                str());
  }
}

std::int64_t Shape::operator[](int i) const {
  if (i < 0) i += ndim_;
  SPARQ_CHECK(i >= 0 && i < ndim_, "dimension {} out of range for {}", i, str());
  return dims_[i];
}

std::int64_t Shape::numel() const {
  // A zero dimension first: {2^32, 2^32, 0} is a valid empty shape whose leading product
  // would overflow (UBSan; review, 2026-12-06). Otherwise the constructor checked the product.
  for (int i = 0; i < ndim_; ++i) {
    if (dims_[i] == 0) return 0;
  }
  std::int64_t n = 1;
  for (int i = 0; i < ndim_; ++i) n *= dims_[i];
  return n;
}

bool Shape::operator==(const Shape& other) const {
  if (ndim_ != other.ndim_) return false;
  for (int i = 0; i < ndim_; ++i) {
    if (dims_[i] != other.dims_[i]) return false;
  }
  return true;
}

std::string Shape::str() const {
  std::string s = "[";
  for (int i = 0; i < ndim_; ++i) s += fmt::format("{}{}", i ? ", " : "", dims_[i]);
  return s + "]";
}

std::size_t Tensor::nbytes() const {
  // f32[2^62] wrapped to 0 bytes (review, 2026-12-06).
  std::size_t bytes = 0;
  SPARQ_CHECK(
      !__builtin_mul_overflow(static_cast<std::size_t>(numel()), dtype_size(dtype_), &bytes),
      "tensor {} holds more than 2^64 bytes", str());
  return bytes;
}

Tensor Tensor::reshape(Shape shape) const {
  SPARQ_CHECK(shape.numel() == numel(), "cannot reshape {} to {}", shape_.str(), shape.str());
  return Tensor(data_, dtype_, shape, device_);
}

Tensor Tensor::slice_rows(std::int64_t begin, std::int64_t end) const {
  SPARQ_CHECK(ndim() >= 1 && 0 <= begin && begin <= end && end <= dim(0),
              "row slice [{}, {}) out of range for {}", begin, end, shape_.str());
  const std::int64_t row = dim(0) == 0 ? 0 : numel() / dim(0);
  Shape s;
  switch (ndim()) {
    case 1: s = Shape{end - begin}; break;
    case 2: s = Shape{end - begin, shape_[1]}; break;
    case 3: s = Shape{end - begin, shape_[1], shape_[2]}; break;
    default: s = Shape{end - begin, shape_[1], shape_[2], shape_[3]}; break;
  }
  auto* base = static_cast<char*>(data_) + begin * row * dtype_size(dtype_);
  return Tensor(base, dtype_, s, device_);
}

Tensor Tensor::flat_range(std::int64_t offset, std::int64_t count) const {
  // Compared without forming offset + count, which may overflow (review, 2026-12-06).
  SPARQ_CHECK(offset >= 0 && count >= 0 && offset <= numel() && count <= numel() - offset,
              "flat range of {} at {} out of range for {}", count, offset, shape_.str());
  auto* base = static_cast<char*>(data_) + offset * dtype_size(dtype_);
  return Tensor(base, dtype_, Shape{count}, device_);
}

std::string Tensor::str() const {
  return fmt::format("{}{} {}", dtype_name(dtype_), shape_.str(), device_name(device_));
}

}  // namespace sparq
