// Parameter initialisers. Each is deterministic in (seed, parameter name): adding or
// reordering other parameters never changes a tensor's initial values.
#pragma once

#include <cstdint>
#include <string>

#include "core/tensor.h"

namespace sparq {

struct Init {
  enum class Kind { kZeros, kOnes, kConstant, kNormal, kUniform, kXavierUniform, kKaimingNormal };
  Kind kind = Kind::kZeros;
  float a = 0.0f;  // constant value | stddev | low | gain
  float b = 0.0f;  // high (uniform)

  static Init zeros() { return {Kind::kZeros}; }
  static Init ones() { return {Kind::kOnes}; }
  static Init constant(float value) { return {Kind::kConstant, value}; }
  static Init normal(float stddev) { return {Kind::kNormal, stddev}; }
  static Init uniform(float low, float high) { return {Kind::kUniform, low, high}; }
  // U(-g*sqrt(6/(fan_in+fan_out)), +...) (Glorot & Bengio).
  static Init xavier_uniform(float gain = 1.0f) { return {Kind::kXavierUniform, gain}; }
  // N(0, gain/sqrt(fan_out)) with gain sqrt(2) for ReLU (He et al., fan_out mode as in
  // torchvision's VGG).
  static Init kaiming_normal() { return {Kind::kKaimingNormal, 1.41421356f}; }

  std::string str() const;
};

// Fan-in and fan-out as PyTorch computes them: dim 1 * receptive field, dim 0 * receptive
// field, where the receptive field is the product of dims 2.. (1-D tensors: fan = numel).
void compute_fans(const Shape& shape, double* fan_in, double* fan_out);

// Fills a host f32 tensor.
void apply_init(const Init& init, const Tensor& tensor, std::uint64_t seed, std::uint64_t stream);

}  // namespace sparq
