// DeviceLowRank: powersgd's low_rank strategy (powersgd_aggregator.h) for a bucket of a store
// on a CUDA device, step for step PowerSgdAggregator::run with PowerSgdCompressor's factor
// steps (powersgd.h), with the factors kept on the device:
//   a = g + e formed in the residual (or a copy of g without error feedback);
//   first message: P = M Q for every matrix (alternate: M orth(Q) on even exchanges,
//     M^T orth(P) on odd ones), then the dense floats; allreduce (sum) in place;
//   full variant: Q = M^T orth(P summed); allreduce (sum);
//   bucket = P Q^T with the summed factor over the world, e = a - M_hat; the dense floats
//     over the world, e = 0 there; a factor that came out all zero gets its warm start back.
// Each step is the CPU's function bit for bit (Note [PowerSGD's fixed summation order],
// powersgd_math.h), so on one rank the bucket, the residual and the factors are the CPU's;
// with several ranks NCCL's ring sums the factors in another order than MPI, as it does for a
// dense bucket (DeviceAllreduce). No host round-trip: every step is enqueued on the exchange's
// stream (device_exchange_stream), and the message sizes come from the plan.
//
// The compressor object keeps the plan and the initial Q (drawn on the host by prepare());
// the factors go up at the first run and after a load_state, and come back into the
// compressor for save_state, so checkpoints carry the CPU's format and move between devices.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "comm/communicator.h"
#include "compress/compressor.h"
#include "compress/powersgd.h"
#include "core/buffer.h"
#include "core/exec_context.h"
#include "core/status.h"

namespace sparq::compress {

class DeviceLowRank {
 public:
  // `compressor` is the bucket's; it outlives this strategy (GradientExchange owns both).
  explicit DeviceLowRank(PowerSgdCompressor& compressor) : psgd_(compressor) {}

  // Replaces the device bucket by the average of the ranks' rank-r approximations (and the
  // dense floats' average). `residual`: the bucket's device residual, or nullptr without
  // error feedback. `own_decoded`: when set, n floats that receive M_hat, whose non-zero
  // entries are what was sent (as the CPU's send history marks them).
  Status run(std::span<float> bucket, float* residual, comm::Communicator& comm,
             const EncodeContext& ctx, const ExecContext& exec, float* own_decoded = nullptr);
  // Bytes this rank sent in the last run: the factor messages.
  std::size_t last_payload_bytes() const { return payload_bytes_; }

  // The compressor's state (PowerSgdCompressor::save_state's format), factors from the device.
  void save_state(std::vector<std::uint8_t>& out);
  Status load_state(std::span<const std::uint8_t> in);

 private:
  // The compressor's factors to the device (after the stream has drained).
  void upload(comm::Communicator& comm, void* stream);

  PowerSgdCompressor& psgd_;
  Buffer p_, q_, backup_p_, backup_q_, first_, second_, a_copy_, partial_;
  std::vector<std::size_t> p_at_, q_at_;  // each matrix's offset (floats) in p_ and q_
  std::size_t p_floats_ = 0, q_floats_ = 0, dense_floats_ = 0;
  bool uploaded_ = false;  // the device factors are current
  bool p_set_ = false;     // P holds a factor (alternate: not before the first exchange)
  std::uint64_t exchanges_ = 0;
  std::size_t payload_bytes_ = 0;
};

}  // namespace sparq::compress
