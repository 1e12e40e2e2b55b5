// ErrorFeedback: the wrapper that turns any compressor into an error-compensated one:
//     a = g + e;   m = C(a);   e = a - D(m)
// so decoded message + new residual == gradient + old residual (to float rounding): nothing
// the compressor drops or rounds away is lost, it is sent in a later step.
//
// Ownership: the residual is NOT owned. It is a range of a residual buffer laid out like the
// ParamStore (the bucket's ParamRange), so it is checkpointed per rank with the rest of the
// flat state, and its norm is measured by GradientExchange. The buffer must outlive this
// object and must not be touched by anyone else while a bucket is in flight.
//
// The sum a is formed in the residual itself (e += g), so the gradient bucket is only read;
// two_phase encodes several regions of one bucket, hence the offset/count form.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "compress/compressor.h"
#include "core/status.h"

namespace sparq::compress {

class ErrorFeedback {
 public:
  explicit ErrorFeedback(std::span<float> residual) : residual_(residual) {}

  // Encodes a = g + e[offset, offset + g.size()) with `c` into msg and leaves a - D(msg) in
  // that part of the residual. `offset` indexes the residual; ctx.offset is where g sits in
  // the bucket (they differ for a server-side residual that covers one region only).
  void encode(Compressor& c, std::span<const float> g, std::size_t offset,
              const EncodeContext& ctx, Message& msg);

  // Strategies that decide only after the exchange what was applied (gtopk) update the
  // residual themselves through this view.
  std::span<float> residual() const { return residual_; }

 private:
  std::span<float> residual_;
};

}  // namespace sparq::compress
