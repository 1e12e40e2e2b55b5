// Tensor: a NON-OWNING view (pointer, dtype, shape up to 4 dims, device). Storage belongs to
// a Buffer (buffer.h) or the ParamStore; a view must never outlive that storage. Views are
// cheap values: copy them freely, never delete through them. Layout is always dense
// row-major (the last dimension is contiguous).
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "core/check.h"
#include "core/dtype.h"

namespace sparq {

class Shape {
 public:
  static constexpr int kMaxDims = 4;

  Shape() = default;  // a scalar: ndim 0, numel 1
  Shape(std::initializer_list<std::int64_t> dims);

  int ndim() const { return ndim_; }
  std::int64_t operator[](int i) const;
  std::int64_t numel() const;
  bool operator==(const Shape& other) const;
  std::string str() const;  // "[4, 256, 768]"

 private:
  std::array<std::int64_t, kMaxDims> dims_{};
  int ndim_ = 0;
};

class Tensor {
 public:
  Tensor() = default;  // an empty view (null data, numel 1 scalar shape)
  Tensor(void* data, DType dtype, Shape shape, Device device = Device::kCPU)
      : data_(data), dtype_(dtype), shape_(shape), device_(device) {}

  void* raw() const { return data_; }
  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  Device device() const { return device_; }
  int ndim() const { return shape_.ndim(); }
  std::int64_t dim(int i) const { return shape_[i]; }
  std::int64_t numel() const { return shape_.numel(); }
  std::size_t nbytes() const;  // fails the check where that passes SIZE_MAX
  bool empty() const { return data_ == nullptr; }
  bool is_cpu() const { return device_ == Device::kCPU; }

  // Typed pointer; checks that T matches the dtype so a view cannot be misread.
  template <typename T>
  T* data() const {
    SPARQ_CHECK(DTypeOf<T>::value == dtype_, "tensor holds {}, read as {}", dtype_name(dtype_),
                dtype_name(DTypeOf<T>::value));
    return static_cast<T*>(data_);
  }

  // Same storage, new shape with the same number of elements.
  Tensor reshape(Shape shape) const;
  // Rows [begin, end) along dimension 0.
  Tensor slice_rows(std::int64_t begin, std::int64_t end) const;
  // The 1-D range [offset, offset + count) of the flattened tensor.
  Tensor flat_range(std::int64_t offset, std::int64_t count) const;

  std::string str() const;  // "f32[4, 256] cpu"

 private:
  void* data_ = nullptr;
  DType dtype_ = DType::kF32;
  Shape shape_;
  Device device_ = Device::kCPU;
};

// A named view of live state that a checkpoint saves and restores IN PLACE: BatchNorm running
// statistics (Model::state), optimizer moments (Optimizer::state), and the serialised
// compressor and aggregator state of the gradient exchange (u8 views). The name is relative to
// its owner ("exp_avg"); the checkpoint adds the owner's prefix.
struct StateTensor {
  std::string name;
  Tensor tensor;
};

}  // namespace sparq
