#include "compress/dgc.h"

#include <cmath>

#include "compress/byte_io.h"
#include "compress/device_codec.h"
#include "compress/dgc_math.h"
#include "compress/options.h"
#include "compress/span_stats.h"
#include "compress/sparse_format.h"
#include "core/check.h"
#include "core/ops.h"

namespace sparq::compress {

Result<DgcCompressor::Options> DgcCompressor::Options::parse(ConfigReader& reader) {
  Options o;
  SPARQ_ASSIGN_OR_RETURN(o.density, parse_density(reader, 0.001));
  SPARQ_ASSIGN_OR_RETURN(o.momentum, reader.real("momentum", 0.9, 0.0, 0.999999));
  SPARQ_ASSIGN_OR_RETURN(o.clip_norm, reader.real("clip_norm", 0.0, 0.0, 1e30));
  SPARQ_ASSIGN_OR_RETURN(o.warmup_steps, reader.integer("warmup_steps", 0, 0, 1000000000));
  SPARQ_RETURN_IF_ERROR(reader.finish());
  return o;
}

double dgc_density_at(const DgcCompressor::Options& o, std::int64_t step) {
  const double start = 0.25;
  if (o.warmup_steps == 0 || step >= o.warmup_steps || o.density >= start) return o.density;
  const double t =
      static_cast<double>(std::max<std::int64_t>(step, 0)) / static_cast<double>(o.warmup_steps);
  return start * std::pow(o.density / start, t);
}

double DgcCompressor::density_at(std::int64_t step) const { return dgc_density_at(options_, step); }

std::unique_ptr<DeviceCodec> DgcCompressor::device_codec() const {
  return make_dgc_device_codec(options_);
}

void DgcCompressor::accumulate(std::span<const float> g, std::span<float> e,
                               const EncodeContext& ctx) {
  SPARQ_CHECK(g.size() == e.size(), "dgc: {} gradients for {} residuals", g.size(), e.size());
  if (u_.size() < ctx.offset + g.size()) u_.resize(ctx.offset + g.size(), 0.0f);
  // The norm as a fixed-partition sum, which the CUDA twin reproduces bit for bit.
  const float scale =
      options_.clip_norm > 0.0
          ? dgc_clip_scale(span_stats(g.data(), g.size(), StatTerm::kSquare, StatTerm::kNone).sum_a,
                           options_.clip_norm, ctx.world_size)
          : 1.0f;
  const float m = static_cast<float>(options_.momentum);
  accumulated_ = std::pair{ctx.offset, g.size()};
  float* u = u_.data() + ctx.offset;
  const std::size_t n = g.size();
  // `parallel for`, not `parallel for simd`: Note [Reduction lanes], core/ops.cpp.
#pragma omp parallel for schedule(static) if (n > (1u << 16))
  for (std::size_t i = 0; i < n; ++i) {
    u[i] = dgc_momentum(u[i], g[i], m, scale);
    e[i] += u[i];
  }
}

void DgcCompressor::encode(std::span<const float> a, const EncodeContext& ctx, Message& msg) {
  const double rho = ctx.density > 0 ? ctx.density : density_at(ctx.step - ctx.warmup_origin);
  selector_.exact(a, k_for(rho, a.size()), indices_, &kept_);
  encode_sparse_pairs(indices_, kept_, a.size(), msg);
  // Momentum factor masking: what was sent stops accumulating momentum; only for the span
  // whose momentum accumulate() just folded into `a` (accumulated_).
  if (accumulated_ == std::pair{ctx.offset, a.size()}) {
    for (std::uint32_t i : indices_) u_[ctx.offset + i] = 0.0f;
  }
  accumulated_.reset();
}


Status DgcCompressor::check_message(std::span<const std::uint8_t> msg, std::size_t n,
                           const EncodeContext& ctx) const {
  return check_sparse_f32(msg, n, name());
}

void DgcCompressor::decode(std::span<const std::uint8_t> msg, std::span<float> out, float alpha,
                           DecodeMode mode, const EncodeContext&) const {
  decode_sparse_f32(msg, out, alpha, mode, name());
}

double DgcCompressor::contraction_delta(std::size_t n) const {
  return static_cast<double>(k_for(options_.density, n)) / static_cast<double>(n);
}

void DgcCompressor::save_state(std::vector<std::uint8_t>& out) const { save_floats(u_, out); }

Status DgcCompressor::load_state(std::span<const std::uint8_t> in) {
  return load_floats(in, u_, "dgc momentum");
}

}  // namespace sparq::compress
