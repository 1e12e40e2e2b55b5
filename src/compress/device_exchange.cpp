#include "compress/device_exchange.h"

#if SPARQ_HAS_CUDA
#include <cuda_runtime_api.h>

#include "core/cuda/cuda_check.h"
#include "core/cuda/device_resources.h"
#endif

namespace sparq::compress {

Status DeviceAllgather::run(std::span<float> bucket, DeviceCodec& codec, float* residual,
                            comm::Communicator& comm, const EncodeContext& ctx_in,
                            const ExecContext& exec) {
#if SPARQ_HAS_CUDA
  const int world = comm.size();
  if (world > 1 && comm.device() != Device::kCUDA) {
    return Status::error("bucket {}: a {} communicator cannot exchange a GPU store's messages",
                         ctx_in.bucket_id, comm.backend());
  }
  // A world of one runs this on the CommEngine's thread, whose current device is not set.
  CUDA_CHECK(cudaSetDevice(exec.ordinal()));
  void* stream = comm.device_stream() != nullptr
                     ? comm.device_stream()
                     : static_cast<void*>(exec.cuda().stream.get());
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
  if (capacity > max_capacity_) {
    return Status::error("bucket {}: a message of {} bytes does not fit the {} planned",
                         ctx.bucket_id, capacity, max_capacity_);
  }
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
