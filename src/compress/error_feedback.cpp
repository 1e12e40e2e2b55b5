#include "compress/error_feedback.h"

#include <cmath>
#include <cstring>

#include "core/check.h"
#include "core/ops.h"

namespace sparq::compress {

void ErrorFeedback::encode(Compressor& c, std::span<const float> g, std::size_t offset,
                           const EncodeContext& ctx, Message& msg) {
  SPARQ_CHECK(offset + g.size() <= residual_.size(), "error feedback: range [{}, {}) outside a "
              "residual of {}", offset, offset + g.size(), residual_.size());
  std::span<float> e = residual_.subspan(offset, g.size());
  c.accumulate(g, e, ctx);  // e now holds a = g + e (dgc: momentum-corrected g)
  c.encode(e, ctx, msg);
  c.decode(msg, e, -1.0f, DecodeMode::kAdd, ctx);  // e = a - D(m)
}

double ErrorFeedback::residual_norm() const {
  return std::sqrt(ops::sum_squares(residual_.data(), residual_.size()));
}

void ErrorFeedback::zero() { ops::fill(residual_.data(), residual_.size(), 0.0f); }

void ErrorFeedback::save(std::vector<std::uint8_t>& out) const {
  out.resize(residual_.size_bytes());
  std::memcpy(out.data(), residual_.data(), residual_.size_bytes());
}

Status ErrorFeedback::load(std::span<const std::uint8_t> in) {
  if (in.size() != residual_.size_bytes()) {
    return Status::error("error feedback: saved residual has {} bytes, the bucket needs {}",
                         in.size(), residual_.size_bytes());
  }
  std::memcpy(residual_.data(), in.data(), in.size());
  return Status::ok();
}

}  // namespace sparq::compress
