#include "compress/device_exchange.h"

#if SPARQ_HAS_CUDA
#include <cuda_runtime_api.h>

#include "core/cuda/cuda_check.h"
#include "core/cuda/device_resources.h"
#endif

namespace sparq::compress {

#if SPARQ_HAS_CUDA
namespace {

// The stream both strategies run on: the communicator's (NCCL) when it has one, else the
// store's compute stream. A world of one runs on the CommEngine's thread, whose current
// device is not set, hence the cudaSetDevice.
void* exchange_stream(comm::Communicator& comm, const ExecContext& exec) {
  CUDA_CHECK(cudaSetDevice(exec.ordinal()));
  return comm.device_stream() != nullptr ? comm.device_stream()
                                         : static_cast<void*>(exec.cuda().stream.get());
}

Status check_device_communicator(const comm::Communicator& comm, const EncodeContext& ctx) {
  if (comm.size() > 1 && comm.device() != Device::kCUDA) {
    return Status::error("bucket {}: a {} communicator cannot exchange a GPU store's messages",
                         ctx.bucket_id, comm.backend());
  }
  return Status::ok();
}

Status check_capacity(std::size_t capacity, std::size_t planned, const EncodeContext& ctx) {
  if (capacity <= planned) return Status::ok();
  return Status::error("bucket {}: a message of {} bytes does not fit the {} planned",
                       ctx.bucket_id, capacity, planned);
}

}  // namespace
#endif

Status DeviceAllreduce::run(std::span<float> bucket, DeviceCodec& codec, DType wire_dtype,
                            float* residual, comm::Communicator& comm, const EncodeContext& ctx_in,
                            const ExecContext& exec) {
#if SPARQ_HAS_CUDA
  SPARQ_RETURN_IF_ERROR(check_device_communicator(comm, ctx_in));
  void* stream = exchange_stream(comm, exec);
  if (message_.size() == 0) message_ = Buffer::device(max_capacity_);
  EncodeContext ctx = ctx_in;
  ctx.rank = comm.rank();
  ctx.world_size = comm.size();
  const std::size_t n = bucket.size();
  const std::size_t capacity = codec.capacity(n, ctx);
  SPARQ_RETURN_IF_ERROR(check_capacity(capacity, max_capacity_, ctx));
  auto* msg = message_.as<std::uint8_t>();
  codec.encode(bucket.data(), residual, n, ctx, msg, nullptr, 0, stream);
  payload_bytes_ = capacity;
  if (ctx.world_size > 1) {
    comm.allreduce(msg, msg, capacity / dtype_size(wire_dtype), wire_dtype, comm::ReduceOp::kSum);
  }
  codec.decode(msg, n, ctx, 1.0f / static_cast<float>(ctx.world_size), /*add=*/false, bucket.data(),
               nullptr, 0, stream);
  return Status::ok();
#else
  (void)wire_dtype;
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
                            const ExecContext& exec) {
#if SPARQ_HAS_CUDA
  const int world = comm.size();
  SPARQ_RETURN_IF_ERROR(check_device_communicator(comm, ctx_in));
  void* stream = exchange_stream(comm, exec);
  if (send_.size() == 0) {
    send_ = Buffer::device(max_capacity_);
    if (world > 1) recv_ = Buffer::device(max_capacity_ * static_cast<std::size_t>(world));
    if (max_scratch_ > 0) scratch_ = Buffer::device(max_scratch_);
  }
  EncodeContext ctx = ctx_in;
  ctx.rank = comm.rank();
  ctx.world_size = world;
  const std::size_t n = bucket.size();
  const std::size_t capacity = codec.capacity(n, ctx);
  SPARQ_RETURN_IF_ERROR(check_capacity(capacity, max_capacity_, ctx));
  auto* send = send_.as<std::uint8_t>();
  codec.encode(bucket.data(), residual, n, ctx, send, scratch_.data(), max_scratch_, stream);
  payload_bytes_ = capacity;
  if (world == 1) {
    codec.decode(send, n, ctx, 1.0f, /*add=*/false, bucket.data(), scratch_.data(),
                 max_scratch_, stream);
    return Status::ok();
  }
  auto* recv = recv_.as<std::uint8_t>();
  comm.allgather(send, recv, capacity, DType::kU8);
  const float alpha = 1.0f / static_cast<float>(world);
  for (int r = 0; r < world; ++r) {
    EncodeContext from = ctx;
    from.rank = r;  // the context the message was encoded under
    codec.decode(recv + static_cast<std::size_t>(r) * capacity, n, from, alpha, r > 0,
                 bucket.data(), scratch_.data(), max_scratch_, stream);
  }
  return Status::ok();
#else
  return Status::error("bucket {}: exchanging a GPU store needs sparq built with CUDA",
                       ctx_in.bucket_id);
#endif
}

}  // namespace sparq::compress
