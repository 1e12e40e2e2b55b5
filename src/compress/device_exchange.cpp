#include "compress/device_exchange.h"

#include <algorithm>
#include <utility>

#include "core/check.h"

#if SPARQ_HAS_CUDA
#include <cuda_runtime_api.h>

#include <vector>

#include "compress/cuda/lbs_cuda.h"
#include "compress/cuda/span_stats_cuda.h"
#include "core/cuda/cuda_check.h"
#include "core/cuda/device_resources.h"
#endif

namespace sparq::compress {

bool exchanges_with_collective(const comm::Communicator& comm) {
  return comm.size() > 1 || comm.device() == Device::kCUDA;
}

#if SPARQ_HAS_CUDA
// A world of one without NCCL runs the exchange on the CommEngine's thread, whose current
// device is not set, hence the cudaSetDevice.
void* device_exchange_stream(comm::Communicator& comm, const ExecContext& exec) {
  CUDA_CHECK(cudaSetDevice(exec.ordinal()));
  return comm.device_stream() != nullptr ? comm.device_stream()
                                         : static_cast<void*>(exec.cuda().stream.get());
}

void drain_exchange_stream(comm::Communicator& comm, void* stream, const std::string& what) {
  if (stream == comm.device_stream()) {
    comm.drain(what);
  } else {
    CUDA_CHECK(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)));
  }
}

Buffer exchange_buffer_zeroed(std::size_t bytes, void* stream) {
  Buffer buffer = Buffer::device(bytes);
  if (bytes > 0) {
    CUDA_CHECK(cudaMemsetAsync(buffer.data(), 0, bytes, static_cast<cudaStream_t>(stream)));
  }
  return buffer;
}

void zero_device_ranges(float* base, std::span<const ParamRange> ranges, void* stream) {
  for (const ParamRange& r : ranges) {
    CUDA_CHECK(cudaMemsetAsync(base + r.offset, 0,
                               static_cast<std::size_t>(r.count) * sizeof(float),
                               static_cast<cudaStream_t>(stream)));
  }
}

void reserve_exchange_buffer(Buffer& buffer, std::size_t bytes, comm::Communicator& comm,
                             void* stream) {
  if (buffer.size() >= bytes && buffer.size() > 0) return;
  if (buffer.size() > 0) drain_exchange_stream(comm, stream, "growing an exchange buffer");
  buffer = Buffer();
  buffer = exchange_buffer_zeroed(std::max<std::size_t>(bytes, 16), stream);
}

struct DeviceBucketMetrics::Events {
  std::vector<cuda::Event> copied;
};

// Per bucket two SpanStats on the device and on the host: [input, residual].
DeviceBucketMetrics::DeviceBucketMetrics(std::size_t buckets, std::size_t max_bucket_floats)
    : buckets_(buckets),
      device_(Buffer::device(2 * buckets * sizeof(SpanStats), /*zeroed=*/true)),
      host_(Buffer::pinned(2 * buckets * sizeof(SpanStats), /*zeroed=*/true)),
      scratch_(Buffer::device(cuda::span_stats_scratch_bytes(max_bucket_floats) + 1)),
      events_(std::make_unique<Events>()) {
  events_->copied.resize(buckets);
}

DeviceBucketMetrics::~DeviceBucketMetrics() = default;

void DeviceBucketMetrics::measure_input(std::size_t bucket, const float* g, const float* e,
                                        std::size_t n, void* stream) {
  cuda::span_stats(g, n, StatTerm::kSquare, StatTerm::kNone, scratch_.data(),
                   device_.as<SpanStats>() + 2 * bucket, static_cast<cudaStream_t>(stream), e);
}

void DeviceBucketMetrics::measure_residual(std::size_t bucket, const float* e, std::size_t n,
                                           void* stream) {
  const auto s = static_cast<cudaStream_t>(stream);
  SpanStats* pair = device_.as<SpanStats>() + 2 * bucket;
  cuda::span_stats(e, n, StatTerm::kSquare, StatTerm::kNone, scratch_.data(), pair + 1, s);
  CUDA_CHECK(cudaMemcpyAsync(host_.as<SpanStats>() + 2 * bucket, pair, 2 * sizeof(SpanStats),
                             cudaMemcpyDeviceToHost, s));
  events_->copied[bucket].record(s);
}

SpanStats* DeviceBucketMetrics::input_stats(std::size_t bucket) const {
  return device_.as<SpanStats>() + 2 * bucket;
}

DeviceBucketMetrics::Values DeviceBucketMetrics::read(std::size_t bucket) const {
  events_->copied[bucket].synchronize();
  const SpanStats* pair = host_.as<SpanStats>() + 2 * bucket;
  return {pair[0].sum_a, pair[1].sum_a};
}

struct DeviceMessageChecks::Events {
  std::vector<cuda::Event> copied;
};

DeviceMessageChecks::DeviceMessageChecks(std::vector<std::string> names, int world)
    : names_(std::move(names)),
      buckets_(names_.size()),
      world_(world),
      // Not zeroed here: begin() clears a bucket's words on the stream before any use, and
      // this is built inside the first bucket's exchange (Note [No unbounded waits in the
      // exchange]).
      device_(Buffer::device(buckets_ * static_cast<std::size_t>(world) * 4)),
      host_(Buffer::pinned(buckets_ * static_cast<std::size_t>(world) * 4, /*zeroed=*/true)),
      events_(std::make_unique<Events>()),
      pending_(buckets_, false) {
  events_->copied.resize(buckets_);
}

DeviceMessageChecks::~DeviceMessageChecks() = default;

std::uint32_t* DeviceMessageChecks::begin(std::size_t bucket, void* stream) {
  std::uint32_t* words = device_.as<std::uint32_t>() + bucket * static_cast<std::size_t>(world_);
  CUDA_CHECK(cudaMemsetAsync(words, 0, static_cast<std::size_t>(world_) * 4,
                             static_cast<cudaStream_t>(stream)));
  return words;
}

void DeviceMessageChecks::finish(std::size_t bucket, void* stream) {
  const std::size_t first = bucket * static_cast<std::size_t>(world_);
  const auto s = static_cast<cudaStream_t>(stream);
  CUDA_CHECK(cudaMemcpyAsync(host_.as<std::uint32_t>() + first, device_.as<std::uint32_t>() + first,
                             static_cast<std::size_t>(world_) * 4, cudaMemcpyDeviceToHost, s));
  events_->copied[bucket].record(s);
  pending_[bucket] = true;
}

Status DeviceMessageChecks::check() {
  Status first;
  for (std::size_t b = 0; b < buckets_; ++b) {
    if (!pending_[b]) continue;
    pending_[b] = false;
    events_->copied[b].synchronize();
    const std::uint32_t* words = host_.as<std::uint32_t>() + b * static_cast<std::size_t>(world_);
    for (int r = 0; r < world_ && first.is_ok(); ++r) {
      if (words[r] == 0) continue;
      const char* reason = words[r] == cuda::kSparseBadHeader  ? "a bad header"
                           : words[r] == cuda::kSparseBadCount ? "a wrong number of indices"
                           : words[r] == cuda::kSparseBadScale
                               ? "a scale it refuses (a negative one; for lbs and "
                                 "blockquant also an infinite or NaN block scale)"
                               : "bad indices";
      first = Status::error("bucket {} ({}): message from rank {} failed validation on the "
                            "device: {}",
                            b, names_[b], r, reason);
    }
  }
  return first;
}

Status check_device_communicator(const comm::Communicator& comm, const EncodeContext& ctx) {
  if (comm.size() > 1 && comm.device() != Device::kCUDA) {
    return Status::error("bucket {}: a {} communicator cannot exchange a GPU store's messages",
                         ctx.bucket_id, comm.backend());
  }
  return Status::ok();
}

namespace {

Status check_capacity(std::size_t capacity, std::size_t planned, const EncodeContext& ctx) {
  if (capacity <= planned) return Status::ok();
  return Status::error("bucket {}: a message of {} bytes does not fit the {} planned",
                       ctx.bucket_id, capacity, planned);
}

}  // namespace
#else
// Without CUDA no store lives on a device, so none of this is reached.
void* device_exchange_stream(comm::Communicator&, const ExecContext&) {
  SPARQ_FATAL("built without CUDA");
}
void drain_exchange_stream(comm::Communicator&, void*, const std::string&) {
  SPARQ_FATAL("built without CUDA");
}
void reserve_exchange_buffer(Buffer&, std::size_t, comm::Communicator&, void*) {
  SPARQ_FATAL("built without CUDA");
}
Buffer exchange_buffer_zeroed(std::size_t, void*) { SPARQ_FATAL("built without CUDA"); }
void zero_device_ranges(float*, std::span<const ParamRange>, void*) {
  SPARQ_FATAL("built without CUDA");
}
struct DeviceBucketMetrics::Events {};
DeviceBucketMetrics::DeviceBucketMetrics(std::size_t, std::size_t) {
  SPARQ_FATAL("built without CUDA");
}
DeviceBucketMetrics::~DeviceBucketMetrics() = default;
void DeviceBucketMetrics::measure_input(std::size_t, const float*, const float*, std::size_t,
                                        void*) {}
void DeviceBucketMetrics::measure_residual(std::size_t, const float*, std::size_t, void*) {}
DeviceBucketMetrics::Values DeviceBucketMetrics::read(std::size_t) const { return {}; }
SpanStats* DeviceBucketMetrics::input_stats(std::size_t) const { return nullptr; }
struct DeviceMessageChecks::Events {};
DeviceMessageChecks::DeviceMessageChecks(std::vector<std::string>, int) {
  SPARQ_FATAL("built without CUDA");
}
DeviceMessageChecks::~DeviceMessageChecks() = default;
std::uint32_t* DeviceMessageChecks::begin(std::size_t, void*) { return nullptr; }
void DeviceMessageChecks::finish(std::size_t, void*) {}
Status DeviceMessageChecks::check() { return Status::ok(); }
#endif

Status DeviceAllreduce::run(std::span<float> bucket, DeviceCodec& codec, DType wire_dtype,
                            float* residual, comm::Communicator& comm, const EncodeContext& ctx_in,
                            const ExecContext& exec, float* own_decoded) {
#if SPARQ_HAS_CUDA
  SPARQ_RETURN_IF_ERROR(check_device_communicator(comm, ctx_in));
  void* stream = device_exchange_stream(comm, exec);
  if (message_.size() == 0) message_ = Buffer::device(max_capacity_);
  EncodeContext ctx = ctx_in;
  ctx.rank = comm.rank();
  ctx.world_size = comm.size();
  const std::size_t n = bucket.size();
  const std::size_t capacity = codec.capacity(n, ctx);
  SPARQ_RETURN_IF_ERROR(check_capacity(capacity, max_capacity_, ctx));
  auto* msg = message_.as<std::uint8_t>();
  codec.encode(bucket.data(), residual, n, ctx, msg, nullptr, 0, stream);
  if (own_decoded != nullptr) {
    codec.decode(msg, n, ctx, 1.0f, /*add=*/false, own_decoded, nullptr, 0, stream, nullptr);
  }
  payload_bytes_ = capacity;
  if (exchanges_with_collective(comm)) {
    comm.allreduce(msg, msg, capacity / dtype_size(wire_dtype), wire_dtype, comm::ReduceOp::kSum);
  }
  // A sum of 16-bit casts: memory-safe whatever its bytes, nothing to validate.
  codec.decode(msg, n, ctx, 1.0f / static_cast<float>(ctx.world_size), /*add=*/false, bucket.data(),
               nullptr, 0, stream, nullptr);
  return Status::ok();
#else
  (void)wire_dtype;
  (void)own_decoded;
  (void)residual;
  (void)comm;
  (void)exec;
  (void)codec;
  (void)bucket;
  return Status::error("bucket {}: exchanging a GPU store needs sparq built with CUDA",
                       ctx_in.bucket_id);
#endif
}

Status DeviceAllgather::run(std::span<float> bucket, DeviceCodec& codec, float* residual,
                            comm::Communicator& comm, const EncodeContext& ctx_in,
                            const ExecContext& exec, std::uint32_t* invalid, float* own_decoded) {
#if SPARQ_HAS_CUDA
  const int world = comm.size();
  SPARQ_RETURN_IF_ERROR(check_device_communicator(comm, ctx_in));
  void* stream = device_exchange_stream(comm, exec);
  const bool collective = exchanges_with_collective(comm);
  if (send_.size() == 0) {
    // Zeroed once: a message shorter than the capacity sends the rest of its block too, which
    // should never be uninitialised memory, and a selection gated off on the device
    // (topk_exact_if) scans scratch it did not write.
    // On the stream: Note [No unbounded waits in the exchange].
    send_ = exchange_buffer_zeroed(max_capacity_, stream);
    if (collective) recv_ = Buffer::device(max_capacity_ * static_cast<std::size_t>(world));
    if (max_scratch_ > 0) scratch_ = exchange_buffer_zeroed(max_scratch_, stream);
  }
  EncodeContext ctx = ctx_in;
  ctx.rank = comm.rank();
  ctx.world_size = world;
  const std::size_t n = bucket.size();
  const std::size_t capacity = codec.capacity(n, ctx);
  SPARQ_RETURN_IF_ERROR(check_capacity(capacity, max_capacity_, ctx));
  auto* send = send_.as<std::uint8_t>();
  codec.encode(bucket.data(), residual, n, ctx, send, scratch_.data(), max_scratch_, stream);
  if (own_decoded != nullptr) {
    codec.decode(send, n, ctx, 1.0f, /*add=*/false, own_decoded, scratch_.data(), max_scratch_,
                 stream, nullptr);
  }
  payload_bytes_ = capacity;
  if (!collective) {
    codec.decode(send, n, ctx, 1.0f, /*add=*/false, bucket.data(), scratch_.data(), max_scratch_,
                 stream, invalid);
    return Status::ok();
  }
  auto* recv = recv_.as<std::uint8_t>();
  comm.allgather(send, recv, capacity, DType::kU8);
  const float alpha = 1.0f / static_cast<float>(world);
  for (int r = 0; r < world; ++r) {
    EncodeContext from = ctx;
    from.rank = r;  // the context the message was encoded under
    codec.decode(recv + static_cast<std::size_t>(r) * capacity, n, from, alpha, r > 0,
                 bucket.data(), scratch_.data(), max_scratch_, stream,
                 invalid != nullptr ? invalid + r : nullptr);
  }
  return Status::ok();
#else
  (void)invalid;
  (void)own_decoded;
  return Status::error("bucket {}: exchanging a GPU store needs sparq built with CUDA",
                       ctx_in.bucket_id);
#endif
}

}  // namespace sparq::compress
