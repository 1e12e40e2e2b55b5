// DeviceAllgather: the allgather strategy (aggregation.h) for a compressed bucket of a store
// on a CUDA device, through the compressor's DeviceCodec (device_codec.h). Every rank encodes
// its bucket, error feedback fused, into a message of fixed capacity; the messages travel as
// capacity-sized blocks of one allgather (NCCL has no allgatherv: no size exchange, no host
// round-trip); every rank decodes all of them in rank order with alpha = 1/P into the bucket,
// the first one setting it, as the CPU strategy does, so every rank ends with the same
// floats. A world of one on a host communicator decodes its own message, which is what the
// CPU's allgather of one message amounts to; on NCCL it allgathers too (Note [A world of one
// on NCCL]).
//
// The codec's kernels and the collective run on the communicator's stream when it has one
// (NCCL, Communicator::device_stream), else on the store's compute stream: either way one
// stream, so the buckets share this strategy's buffers safely. The buffers are allocated at
// the first run at their largest sizes, so that no allocation waits for queued work later.
// Received messages are validated on the device as they are decoded (DeviceCodec::decode's
// `invalid`, DeviceMessageChecks below) instead of before, as the CPU's check_message does.
// DeviceAllreduce (below) is the same for summable messages.
//
// Fields marked [[maybe_unused]] here and in device_nonfinite.h are read only by the CUDA
// build; without CUDA these classes are stubs that refuse to run.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "compress/compressor.h"
#include "compress/device_codec.h"
#include "compress/span_stats.h"
#include "core/buffer.h"
#include "core/exec_context.h"
#include "core/param_store.h"
#include "core/status.h"

namespace sparq::compress {

// Note [A world of one on NCCL]: a bucket runs its collective whenever the world has several
// ranks or the communicator is a device one (NCCL: the trainer's bucket queue on a GPU, one
// rank included). On NCCL a world of one costs a device copy at most, keeps one GPU on the
// code path of many (decoding the received messages, NCCL's in-place average), and gives an
// emulated link (comm/emulated_link.h, EmulatedLink::ranks) a call to price. A host
// communicator of one rank has nothing to move and skips it (and the CPU's results with it).
bool exchanges_with_collective(const comm::Communicator& comm);

// A GPU store's messages move through a device communicator (NCCL), or through none at all
// (a world of one): an error naming the bucket otherwise. Built with CUDA only.
Status check_device_communicator(const comm::Communicator& comm, const EncodeContext& ctx);

// The stream a GPU store's compressed exchange runs on: the communicator's (NCCL) when it has
// one, else the store's compute stream (and the calling thread's device is set to the
// store's). Everything a bucket's exchange enqueues goes there, in order.
void* device_exchange_stream(comm::Communicator& comm, const ExecContext& exec);

// Waits until everything enqueued on `stream` (device_exchange_stream's) has completed, e.g.
// before a buffer it may still read is freed: through the communicator when it is the
// communicator's stream, so the wait is bounded (Communicator::drain), else with
// cudaStreamSynchronize (a compute stream carries no collective). Built with CUDA only.
void drain_exchange_stream(comm::Communicator& comm, void* stream, const std::string& what);

// Note [No unbounded waits in the exchange]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A bucket's exchange runs while earlier buckets' collectives may still be on the NCCL stream.
// If a peer has died, those never complete, and every host call that waits for the whole
// device blocks forever instead of failing after comm.timeout_s: freeing device memory
// (cudaFree), a synchronous cudaMemset (Buffer::zero), cudaDeviceSynchronize, or
// cudaStreamSynchronize on that stream. So inside a step the exchange code allocates only
// buffers it zeroes ON ITS STREAM (exchange_buffer_zeroed), frees only after
// drain_exchange_stream (bounded), and sizes per-bucket state before the first step
// (DeviceCodec::prepare). Checkpoint save and load may wait: no collective is in flight then.

// `bytes` of device memory, zeroed on `stream` (no host wait): for buffers that only work
// on `stream` touches.
Buffer exchange_buffer_zeroed(std::size_t bytes, void* stream);

// Zeroes the floats [r.offset, r.end()) of `base` (device memory) for each range, enqueued on
// `stream` behind the bucket's decode: the alignment gaps of a sign codec's bucket (Note
// [Padding stays zero], core/param_store.h).
void zero_device_ranges(float* base, std::span<const ParamRange> ranges, void* stream);

// Grows `buffer` to at least `bytes`, zeroed (the unused tail of a fixed-capacity block goes
// on the wire too). A buffer that must be replaced is freed only after
// drain_exchange_stream, since queued work may still read it; the first allocation waits for
// nothing (Note [No unbounded waits in the exchange]).
void reserve_exchange_buffer(Buffer& buffer, std::size_t bytes, comm::Communicator& comm,
                             void* stream);

// DeviceBucketMetrics: what the CPU's ErrorFeedback measures per bucket, ||a||^2 of
// a = g + e before the encode and ||e||^2 after it, measured on the device for a GPU store
// with error feedback: fixed-partition sums (Note [Fixed-partition sums]) on the exchange's
// stream, copied to pinned host memory behind the bucket's exchange, so the host never
// waits inside the step. read() waits for the bucket's copy (an event), which the step's end
// has already drained (the optimizer reads the gradient norm back).
class DeviceBucketMetrics {
 public:
  DeviceBucketMetrics(std::size_t buckets, std::size_t max_bucket_floats);
  ~DeviceBucketMetrics();
  DeviceBucketMetrics(const DeviceBucketMetrics&) = delete;
  DeviceBucketMetrics& operator=(const DeviceBucketMetrics&) = delete;

  // Before the encode: ||g + e||^2.
  void measure_input(std::size_t bucket, const float* g, const float* e, std::size_t n,
                     void* stream);
  // After it: ||e||^2, then both values travel to the host.
  void measure_residual(std::size_t bucket, const float* e, std::size_t n, void* stream);
  struct Values {
    double input_sq = 0, residual_sq = 0;
  };
  Values read(std::size_t bucket) const;
  // The bucket's ||g + e||^2 in device memory, valid on the stream after measure_input
  // (DeviceNonfiniteGuard reads it there).
  // A codec whose feedback adds something other than g rewrites it in its encode
  // (DeviceCodec::set_input_measurement).
  SpanStats* input_stats(std::size_t bucket) const;

 private:
  struct Events;  // one CUDA event per bucket (CUDA types stay out of this header)
  [[maybe_unused]] std::size_t buckets_;
  Buffer device_, host_, scratch_;
  std::unique_ptr<Events> events_;
};

// DeviceMessageChecks: the verdicts of the device's validation of received messages
// (DeviceCodec::decode's `invalid`), one word per (bucket, sender), zeroed before the
// bucket's exchange and copied to pinned memory behind it, so the host never waits inside
// the step. check() reads them after the step and names the first bad message as the CPU's
// check_received does (that run fails the step there and then; here the step has been
// applied without the bad message's contribution when the error surfaces).
class DeviceMessageChecks {
 public:
  // `names`: each bucket's compressor, for the messages check() writes.
  DeviceMessageChecks(std::vector<std::string> names, int world);
  ~DeviceMessageChecks();
  DeviceMessageChecks(const DeviceMessageChecks&) = delete;
  DeviceMessageChecks& operator=(const DeviceMessageChecks&) = delete;

  // Zeroes the bucket's words on the stream; returns them (device memory, one per rank).
  std::uint32_t* begin(std::size_t bucket, void* stream);
  // Queues the copy of the bucket's words to the host.
  void finish(std::size_t bucket, void* stream);
  // After the step: the first message that failed, as "bucket B (NAME): message from rank R
  // failed validation on the device: REASON".
  Status check();

 private:
  struct Events;
  std::vector<std::string> names_;
  [[maybe_unused]] std::size_t buckets_;
  [[maybe_unused]] int world_;
  Buffer device_, host_;
  std::unique_ptr<Events> events_;
  std::vector<bool> pending_;  // finished since the last check
};

class DeviceAllgather {
 public:
  // The largest capacity and scratch any bucket will need.
  DeviceAllgather(std::size_t max_capacity, std::size_t max_scratch)
      : max_capacity_(max_capacity), max_scratch_(max_scratch) {}

  // Replaces the device bucket by the average of every rank's decoded message. `residual`:
  // the bucket's device residual, or nullptr without error feedback. ctx.rank and
  // ctx.world_size are taken from `comm`. `invalid`: a word per rank for the verdict of its
  // message's validation (DeviceMessageChecks), or nullptr. `own_decoded`: when set, n floats
  // that receive this rank's own message decoded with alpha 1 (DeviceSendHistory).
  Status run(std::span<float> bucket, DeviceCodec& codec, float* residual, comm::Communicator& comm,
             const EncodeContext& ctx, const ExecContext& exec, std::uint32_t* invalid = nullptr,
             float* own_decoded = nullptr);
  // Bytes this rank sent in the last run: the message capacity, which is what moves.
  std::size_t last_payload_bytes() const { return payload_bytes_; }

 private:
  [[maybe_unused]] std::size_t max_capacity_;
  [[maybe_unused]] std::size_t max_scratch_;
  Buffer send_, recv_, scratch_;
  std::size_t payload_bytes_ = 0;
};

// DeviceAllreduce: the allreduce strategy for a summable compressor's bucket on the device
// (fp16, bf16: CompressorCapabilities::summable). Every rank encodes its bucket, error feedback
// fused, into a message of the compressor's wire type; the collective sums the messages in
// place in that type (NCCL adds f16 and bf16 natively; what the issue calls the bf16 dense
// allreduce); every rank decodes the sum with alpha = 1/P, setting the bucket, as the CPU
// strategy does (aggregation.cpp). A world of one on a host communicator decodes its own
// message (Note [A world of one on NCCL]). Streams and
// buffers as DeviceAllgather's. The sum differs from MPI's on the CPU only by the order of
// the additions (NCCL's ring), as a dense allreduce does.
class DeviceAllreduce {
 public:
  explicit DeviceAllreduce(std::size_t max_capacity) : max_capacity_(max_capacity) {}

  // `own_decoded` as DeviceAllgather's: decoded before the collective sums the message.
  Status run(std::span<float> bucket, DeviceCodec& codec, DType wire_dtype, float* residual,
             comm::Communicator& comm, const EncodeContext& ctx, const ExecContext& exec,
             float* own_decoded = nullptr);
  std::size_t last_payload_bytes() const { return payload_bytes_; }

 private:
  [[maybe_unused]] std::size_t max_capacity_;
  Buffer message_;
  std::size_t payload_bytes_ = 0;
};

}  // namespace sparq::compress
