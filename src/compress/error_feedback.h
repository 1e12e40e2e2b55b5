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
//
// Step statistics (metrics only; they never change what is sent or kept):
//   input_sq()  ||a||^2 summed over every accumulate() since begin_step(): with the residual's
//               ||e||^2 after the exchange it gives the relative compression error
//               ||e|| / ||a|| of the bucket (two_phase: the sum over its regions).
//   send history (log.never_sent_window, optional): encode() decodes its own message once more
//               into a scratch span and stamps the coordinates whose decoded value is non-zero.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "compress/compressor.h"
#include "compress/send_history.h"
#include "core/status.h"

namespace sparq::compress {

class ErrorFeedback {
 public:
  explicit ErrorFeedback(std::span<float> residual) : residual_(residual) {}

  // Encodes a = g + e[offset, offset + g.size()) with `c` into msg and leaves a - D(msg) in
  // that part of the residual. `offset` indexes the residual; ctx.offset is where g sits in
  // the bucket (they differ for a server-side residual that covers one region only).
  void encode(Compressor& c, std::span<const float> g, std::size_t offset, const EncodeContext& ctx,
              Message& msg);

  // Forms a = T(g) + e in residual[offset, offset + g.size()) (Compressor::accumulate) and
  // adds ||a||^2 to input_sq(); returns that part of the residual, which now holds a.
  // Strategies that decide only after the exchange what was applied (tree, low_rank) call
  // this and then update the residual themselves through residual().
  std::span<float> accumulate(Compressor& c, std::span<const float> g, std::size_t offset,
                              const EncodeContext& ctx);
  std::span<float> residual() const { return residual_; }

  void begin_step() { input_sq_ = 0; }
  double input_sq() const { return input_sq_; }

  // Turns the send history on: `history` covers the same range as the residual, `scratch` at
  // least the longest span one encode() sees (it is only written during encode(), so buckets
  // run one at a time may share it). Null history: off.
  void track_sends(SendHistory* history, std::span<float> scratch) {
    history_ = history;
    scratch_ = scratch;
  }
  SendHistory* send_history() const { return history_; }

 private:
  std::span<float> residual_;
  double input_sq_ = 0;
  SendHistory* history_ = nullptr;
  std::span<float> scratch_;
};

}  // namespace sparq::compress
