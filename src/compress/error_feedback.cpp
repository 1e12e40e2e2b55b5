#include "compress/error_feedback.h"

#include "core/check.h"

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

}  // namespace sparq::compress
