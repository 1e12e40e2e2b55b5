// DeviceTwoPhase: the two_phase strategy (two_phase_aggregator.h) for a compressed bucket of a
// store on a CUDA device, through the compressor's DeviceCodec, with fixed-capacity messages
// so that NCCL's collectives suffice and the host never waits:
//   phase 1  each rank encodes region R_j = [j n / P, (j + 1) n / P) of its bucket (error
//            feedback fused, ctx.offset = begin of R_j) into block j of a P-block buffer, all
//            blocks of the same capacity (the largest region's); one alltoall of the blocks
//            (NCCL's grouped send/recv) brings rank j the P messages of its region, which it
//            decodes in rank order with alpha = 1/P (the first setting) into its average;
//   phase 2  server compression on: the owner encodes its average with error feedback
//            against its server residual (this bucket's, kept here on the device), else
//            sends the average as dense f32; one allgather of the owners' blocks, each
//            decoded (alpha 1) or copied into its region of the bucket.
// Every step mirrors the CPU's contexts (the sender's rank, the region's offset), so the
// messages are the CPU's bytes and the bucket the CPU's floats. A world of one on a host
// communicator decodes its own blocks (Note [A world of one on NCCL], device_exchange.h).
// The server residuals are checkpointed in TwoPhaseAggregator's format (save_floats of the
// rank's region), so checkpoints and elastic resume treat them as the CPU's.
//
// Buffers grow at the first step that needs them (a stream synchronization then); the
// server residual of a bucket is allocated, zeroed, at its first exchange.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <vector>

#include "comm/communicator.h"
#include "compress/compressor.h"
#include "compress/device_codec.h"
#include "core/buffer.h"
#include "core/exec_context.h"
#include "core/status.h"

namespace sparq::compress {

class DeviceTwoPhase {
 public:
  explicit DeviceTwoPhase(bool server_compression) : server_compression_(server_compression) {}

  // Replaces the device bucket by the average of every rank's decoded messages, as
  // DeviceAllgather::run does, by two phases. `bucket_index` keys the server residual;
  // `invalid` and `own_decoded` as DeviceAllgather::run's (own_decoded: this rank's phase-1
  // messages, decoded into their regions).
  Status run(std::size_t bucket_index, std::span<float> bucket, DeviceCodec& codec, float* residual,
             comm::Communicator& comm, const EncodeContext& ctx, const ExecContext& exec,
             std::uint32_t* invalid, float* own_decoded = nullptr);
  // Bytes this rank sent in the last run: P region blocks and its region result's block.
  std::size_t last_payload_bytes() const { return payload_bytes_; }

  // The bucket's server residual (this rank's region), in TwoPhaseAggregator's format.
  void save_state(std::size_t bucket_index, std::vector<std::uint8_t>& out) const;
  Status load_state(std::size_t bucket_index, std::span<const std::uint8_t> in);

 private:
  [[maybe_unused]] bool server_compression_;  // read by the CUDA build's run() only
  Buffer send_, recv_, average_, result_, gathered_, scratch_;
  std::map<std::size_t, Buffer> server_residual_;  // per bucket: the rank's region, floats
  std::map<std::size_t, std::size_t> server_floats_;
  std::size_t payload_bytes_ = 0;
};

}  // namespace sparq::compress
