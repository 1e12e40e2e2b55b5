#include "core/init.h"

#include <cmath>
#include <fmt/format.h>

#include "core/rng.h"

namespace sparq {

std::string Init::str() const {
  switch (kind) {
    case Kind::kZeros: return "zeros";
    case Kind::kOnes: return "ones";
    case Kind::kConstant: return fmt::format("constant({})", a);
    case Kind::kNormal: return fmt::format("normal({:.4g})", a);
    case Kind::kUniform: return fmt::format("uniform({:.4g}, {:.4g})", a, b);
    case Kind::kXavierUniform: return "xavier_uniform";
    case Kind::kKaimingNormal: return "kaiming_normal";
  }
  return "?";
}

void compute_fans(const Shape& shape, double* fan_in, double* fan_out) {
  if (shape.ndim() < 2) {
    *fan_in = *fan_out = static_cast<double>(shape.numel());
    return;
  }
  double receptive = 1.0;
  for (int i = 2; i < shape.ndim(); ++i) receptive *= static_cast<double>(shape[i]);
  *fan_in = static_cast<double>(shape[1]) * receptive;
  *fan_out = static_cast<double>(shape[0]) * receptive;
}

void apply_init(const Init& init, const Tensor& tensor, std::uint64_t seed, std::uint64_t stream) {
  float* p = tensor.data<float>();
  const auto n = static_cast<std::size_t>(tensor.numel());
  SPARQ_CHECK(tensor.is_cpu(), "initialisers run on host tensors");
  double fan_in = 0, fan_out = 0;
  compute_fans(tensor.shape(), &fan_in, &fan_out);
  switch (init.kind) {
    case Init::Kind::kZeros:
      for (std::size_t i = 0; i < n; ++i) p[i] = 0.0f;
      break;
    case Init::Kind::kOnes:
      for (std::size_t i = 0; i < n; ++i) p[i] = 1.0f;
      break;
    case Init::Kind::kConstant:
      for (std::size_t i = 0; i < n; ++i) p[i] = init.a;
      break;
    case Init::Kind::kNormal:
      fill_normal(p, n, 0.0f, init.a, seed, stream);
      break;
    case Init::Kind::kUniform:
      fill_uniform(p, n, init.a, init.b, seed, stream);
      break;
    case Init::Kind::kXavierUniform: {
      const float bound = static_cast<float>(init.a * std::sqrt(6.0 / (fan_in + fan_out)));
      fill_uniform(p, n, -bound, bound, seed, stream);
      break;
    }
    case Init::Kind::kKaimingNormal:
      fill_normal(p, n, 0.0f, static_cast<float>(init.a / std::sqrt(fan_out)), seed, stream);
      break;
  }
}

}  // namespace sparq
