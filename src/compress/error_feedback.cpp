#include "compress/error_feedback.h"

#include "core/check.h"
#include "core/ops.h"

namespace sparq::compress {

std::span<float> ErrorFeedback::accumulate(Compressor& c, std::span<const float> g,
                                           std::size_t offset, const EncodeContext& ctx) {
  SPARQ_CHECK(offset + g.size() <= residual_.size(),
              "error feedback: range [{}, {}) outside a "
              "residual of {}",
              offset, offset + g.size(), residual_.size());
  std::span<float> e = residual_.subspan(offset, g.size());
  c.accumulate(g, e, ctx);  // e now holds a = g + e (dgc: momentum-corrected g)
  input_sq_ += ops::sum_squares(e.data(), e.size());
  return e;
}

void ErrorFeedback::encode(Compressor& c, std::span<const float> g, std::size_t offset,
                           const EncodeContext& ctx, Message& msg) {
  std::span<float> e = accumulate(c, g, offset, ctx);
  c.encode(e, ctx, msg);
  check_own_message_size(c, msg, g.size(), ctx);
  c.decode(msg, e, -1.0f, DecodeMode::kAdd, ctx);  // e = a - D(m)
  if (history_) {
    // D(m) decoded on its own says exactly where the message is non-zero (a - e would blur
    // that by rounding); it only reads msg, so nothing sent or kept changes.
    SPARQ_CHECK(scratch_.size() >= g.size(),
                "error feedback: send-history scratch of {} for "
                "a span of {}",
                scratch_.size(), g.size());
    const std::span<float> decoded = scratch_.subspan(0, g.size());
    c.decode(msg, decoded, 1.0f, DecodeMode::kSet, ctx);
    history_->mark_nonzero(offset, decoded);
  }
}

}  // namespace sparq::compress
