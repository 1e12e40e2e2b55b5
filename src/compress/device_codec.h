// DeviceCodec: a compressor's twin on a CUDA device, for the gradient exchange of a store that
// lives there (device_exchange.h). It encodes one rank's bucket, with error feedback fused,
// into a message of fixed capacity (what NCCL's plain allgather moves), and decodes such
// messages; the message bytes are the CPU compressor's (Note [Byte-identical block codes],
// quant_math.h), so what MPI-run tests prove about the CPU exchange carries over. Compressors
// that have one declare CompressorCapabilities::device_twin and return it from
// Compressor::device_codec() in a build with CUDA (nullptr without).
//
// Every pointer is device memory; `stream` is the cudaStream_t the work is enqueued on (a
// void* here, so that this header stays CUDA-free). Nothing waits for the device.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "compress/block_codec.h"
#include "compress/compressor.h"
#include "compress/dgc.h"
#include "compress/span_stats.h"

namespace sparq::compress {

class DeviceCodec {
 public:
  virtual ~DeviceCodec() = default;
  // Bytes of a message for n floats at ctx (its density), at most: the buffer every rank
  // sends and receives per rank.
  virtual std::size_t capacity(std::size_t n, const EncodeContext& ctx) const = 0;
  // Device scratch an encode or decode of n floats needs.
  virtual std::size_t scratch_bytes(std::size_t n, const EncodeContext& ctx) const = 0;
  // e == nullptr: encodes g. Otherwise a = g + e is formed in e, encoded, and e = a - D(m)
  // is left behind (ErrorFeedback::encode). `scratch` holds at least scratch_bytes(n, ctx)
  // of the `scratch_size` bytes passed.
  virtual void encode(const float* g, float* e, std::size_t n, const EncodeContext& ctx,
                      std::uint8_t* msg, void* scratch, std::size_t scratch_size,
                      void* stream) = 0;
  // out = alpha * D(msg) (add == false) or out += alpha * D(msg); ctx is the sender's.
  // `invalid` (device memory, may be null; given for received messages): the codecs whose
  // decode is driven by indices in the message (lbs, topk) validate its structure on the
  // device as they decode, blockquant, qsgd, terngrad and sign their scales (as the CPU's
  // check_message); they add nothing for a message that fails and write the reason there when
  // it is still 0 (lbs_cuda.h's SparseInvalid). The others' decodes are memory-safe for any
  // bytes and have nothing to refuse.
  virtual void decode(const std::uint8_t* msg, std::size_t n, const EncodeContext& ctx,
                      float alpha, bool add, float* out, void* scratch,
                      std::size_t scratch_size, void* stream, std::uint32_t* invalid) const = 0;

  // Per-bucket state a twin keeps on the device (dgc's momentum), saved and loaded in the CPU
  // compressor's own format (Compressor::save_state), so checkpoints move between devices.
  // save_state and load_state synchronize with the device. Stateless twins keep these.
  virtual bool has_state() const { return false; }
  // Called once, before any step, with the bucket's size and whether its encodes will get a
  // residual: a twin with state allocates it here for the whole bucket, so that no encode
  // inside a step allocates, zeroes or frees device memory (each of which would wait for the
  // device, the NCCL stream included, without a bound). State already held (loaded before
  // this call) is kept. Stateless twins need nothing.
  virtual void prepare(std::size_t /*bucket_floats*/, bool /*error_feedback*/) {}

  // The exchange measures error feedback's input as ||g + e||^2 before the encode
  // (DeviceBucketMetrics), which is ||a||^2 for every codec whose feedback adds g. dgc adds its
  // momentum u instead, which its encode updates first; given the bucket's measurement here
  // (device memory; nullptr: none), it writes ||u + e||^2 over it there, as the CPU's
  // ErrorFeedback::accumulate measures what Compressor::accumulate formed. Others ignore it.
  virtual void set_input_measurement(SpanStats* /*input*/) {}
  virtual void save_state(std::vector<std::uint8_t>& out) const { out.clear(); }
  virtual Status load_state(std::span<const std::uint8_t> in) {
    return in.empty()
               ? Status::ok()
               : Status::error("a stateless device codec was given {} bytes of state", in.size());
  }
};

// The compressors that have a twin, for messages that suggest one.
inline constexpr std::string_view kDeviceCompressorsHint =
    "lbs, topk, topk_sampled, gtopk, threshold, dgc, blockquant, qsgd, terngrad, signsgd, "
    "onebit, randomk, powersgd, fp16, bf16 or none";

// Whether the device exchange has strategy `strategy` (aggregation_name()) for a compressor
// with these capabilities: allgather for every twin, two_phase for self-contained ones
// (device_two_phase.h), tree for reselectable sparse lists (device_tree.h), allreduce for
// summable ones (device_exchange.h), low_rank for powersgd (device_low_rank.h).
bool device_strategy_built(std::string_view strategy, const CompressorCapabilities& caps);

// The twins (nullptr in a build without CUDA).
// sampled: lbs's `selection: sampled`, a count the device chooses (as topk_sampled's).
std::unique_ptr<DeviceCodec> make_lbs_device_codec(double density, const BlockQuantParams& quant,
                                                   bool sampled = false);
std::unique_ptr<DeviceCodec> make_topk_device_codec(double density);
// topk_sampled and threshold: a count the device chooses (SelectedSparse, device_codec.cpp).
std::unique_ptr<DeviceCodec> make_topk_sampled_device_codec(double density);
std::unique_ptr<DeviceCodec> make_threshold_device_codec(double threshold);
std::unique_ptr<DeviceCodec> make_blockquant_device_codec(const BlockQuantParams& quant);
// fp16 / bf16 casts (kF16, kBF16): summable, so the allreduce strategy can sum their messages.
std::unique_ptr<DeviceCodec> make_dense_cast_device_codec(bool half);
std::unique_ptr<DeviceCodec> make_randomk_device_codec(double density);
std::unique_ptr<DeviceCodec> make_qsgd_device_codec(int levels, int code_bits, std::size_t chunk);
std::unique_ptr<DeviceCodec> make_terngrad_device_codec(double clip_sigma);
// rms: onebit's scale; else signsgd's.
std::unique_ptr<DeviceCodec> make_sign_device_codec(bool rms);
// dgc (dgc.h): its momentum lives in the codec, on the device (dgc_device_codec.cpp).
std::unique_ptr<DeviceCodec> make_dgc_device_codec(const DgcCompressor::Options& options);

}  // namespace sparq::compress
