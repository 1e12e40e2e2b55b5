#include "compress/device_two_phase.h"

#include <fmt/format.h>

#include <algorithm>

#include "compress/byte_io.h"
#include "compress/device_exchange.h"
#include "compress/random_streams.h"
#include "compress/two_phase_aggregator.h"
#include "core/check.h"

#if SPARQ_HAS_CUDA
#include <cuda_runtime_api.h>

#include "core/cuda/cuda_check.h"
#include "core/cuda/sync_copy.h"
#endif

namespace sparq::compress {

#if SPARQ_HAS_CUDA
namespace {

// Blocks start 16-byte aligned (the codecs write and read words).
std::size_t block_bytes(std::size_t bytes) { return (bytes + 15) / 16 * 16; }

}  // namespace

Status DeviceTwoPhase::run(std::size_t bucket_index, std::span<float> bucket, DeviceCodec& codec,
                           float* residual, comm::Communicator& comm, const EncodeContext& ctx_in,
                           const ExecContext& exec, std::uint32_t* invalid, float* own_decoded) {
  SPARQ_RETURN_IF_ERROR(check_device_communicator(comm, ctx_in));
  const std::size_t n = bucket.size(), p = static_cast<std::size_t>(comm.size());
  const std::size_t me = static_cast<std::size_t>(comm.rank());
  void* stream = device_exchange_stream(comm, exec);
  const auto s = static_cast<cudaStream_t>(stream);
  const bool collective = exchanges_with_collective(comm);
  EncodeContext ctx = ctx_in;
  ctx.rank = comm.rank();
  ctx.world_size = comm.size();

  // One block size for every region's message: the largest region's capacity.
  std::size_t capacity = 0, scratch = 0, max_len = 0;
  for (std::size_t j = 0; j < p; ++j) {
    const std::size_t begin = two_phase_region_begin(n, p, j),
                      len = two_phase_region_begin(n, p, j + 1) - begin;
    if (len == 0) continue;
    EncodeContext at = ctx;
    at.offset = begin;
    capacity = std::max(capacity, codec.capacity(len, at));
    scratch = std::max(scratch, codec.scratch_bytes(len, at));
    max_len = std::max(max_len, len);
  }
  const std::size_t block1 = block_bytes(capacity);
  const std::size_t block2 = server_compression_ ? block1 : block_bytes(4 * max_len);
  reserve_exchange_buffer(send_, p * block1, comm, stream);
  if (collective) reserve_exchange_buffer(recv_, p * block1, comm, stream);
  reserve_exchange_buffer(average_, 4 * max_len, comm, stream);
  reserve_exchange_buffer(result_, block2, comm, stream);
  if (collective) reserve_exchange_buffer(gathered_, p * block2, comm, stream);
  reserve_exchange_buffer(scratch_, scratch, comm, stream);

  const std::size_t my_begin = two_phase_region_begin(n, p, me);
  const std::size_t my_len = two_phase_region_begin(n, p, me + 1) - my_begin;
  if (server_compression_) {
    // Checked before the first collective: a rank that stopped between the phases would leave
    // its peers' phase-2 allgather unmatched.
    Buffer& server = server_residual_[bucket_index];
    std::size_t& floats = server_floats_[bucket_index];
    if (server.size() == 0) {
      // Note [No unbounded waits in the exchange] (device_exchange.h).
      server = exchange_buffer_zeroed(4 * my_len + 4, stream);
      floats = my_len;
    }
    // Fatal, with the CPU's message (two_phase_aggregator.cpp): a mismatch can hold on some
    // ranks only (regions of unequal length), and an error returned here would leave the
    // others waiting in the collective until the timeout. Checked before any collective,
    // where the CPU checks after phase 1: the outcome is the same, the job ends.
    SPARQ_CHECK(floats == my_len,
                "bucket {}: two_phase server residual of {} floats for a region of {} "
                "(state saved with another world size?)",
                ctx.bucket_id, floats, my_len);
  }

  // Phase 1: region j's message into block j; the owner decodes its region's in rank order.
  auto* send = send_.as<std::uint8_t>();
  for (std::size_t j = 0; j < p; ++j) {
    const std::size_t begin = two_phase_region_begin(n, p, j),
                      len = two_phase_region_begin(n, p, j + 1) - begin;
    if (len == 0) continue;
    EncodeContext at = ctx;
    at.offset = begin;
    codec.encode(bucket.data() + begin, residual != nullptr ? residual + begin : nullptr, len, at,
                 send + j * block1, scratch_.data(), scratch_.size(), stream);
    if (own_decoded != nullptr) {
      codec.decode(send + j * block1, len, at, 1.0f, /*add=*/false, own_decoded + begin,
                   scratch_.data(), scratch_.size(), stream, nullptr);
    }
  }
  const std::uint8_t* in = send;
  if (collective) {
    comm.alltoall(send, recv_.data(), block1, DType::kU8);
    in = recv_.as<std::uint8_t>();
  }
  auto* average = average_.as<float>();
  EncodeContext mine = ctx;
  mine.offset = my_begin;
  if (my_len > 0) {
    for (std::size_t r = 0; r < p; ++r) {
      EncodeContext from = mine;
      from.rank = static_cast<int>(r);
      codec.decode(in + r * block1, my_len, from, 1.0f / static_cast<float>(p), r > 0, average,
                   scratch_.data(), scratch_.size(), stream,
                   invalid != nullptr ? invalid + r : nullptr);
    }
  }

  // Phase 2: the region result, re-compressed against the server residual or dense f32.
  auto* result = result_.as<std::uint8_t>();
  if (server_compression_) {
    Buffer& server = server_residual_.at(bucket_index);
    if (my_len > 0) {
      codec.encode(average, server.as<float>(), my_len, server_encode_context(mine), result,
                   scratch_.data(), scratch_.size(), stream);
    }
  } else if (my_len > 0) {
    CUDA_CHECK(cudaMemcpyAsync(result, average, 4 * my_len, cudaMemcpyDeviceToDevice, s));
  }
  const std::uint8_t* results = result;
  if (collective) {
    comm.allgather(result, gathered_.data(), block2, DType::kU8);
    results = gathered_.as<std::uint8_t>();
  }
  for (std::size_t j = 0; j < p; ++j) {
    const std::size_t begin = two_phase_region_begin(n, p, j),
                      len = two_phase_region_begin(n, p, j + 1) - begin;
    if (len == 0) continue;
    const std::uint8_t* block = results + j * block2;
    if (server_compression_) {
      EncodeContext from = ctx;
      from.rank = static_cast<int>(j);
      from.offset = begin;
      from = server_encode_context(from);  // Note [Server draws]
      codec.decode(block, len, from, 1.0f, /*add=*/false, bucket.data() + begin, scratch_.data(),
                   scratch_.size(), stream, invalid != nullptr ? invalid + j : nullptr);
    } else {
      CUDA_CHECK(
          cudaMemcpyAsync(bucket.data() + begin, block, 4 * len, cudaMemcpyDeviceToDevice, s));
    }
  }
  payload_bytes_ = p * block1 + block2;
  return Status::ok();
}

void DeviceTwoPhase::save_state(std::size_t bucket_index, std::vector<std::uint8_t>& out) const {
  const auto it = server_residual_.find(bucket_index);
  std::vector<float> host;
  if (it != server_residual_.end()) {
    host.resize(server_floats_.at(bucket_index));
    // After the last exchange, which may still be queued.
    cuda::copy_synchronously(host.data(), it->second.data(), 4 * host.size());
  }
  save_floats(host, out);
}

Status DeviceTwoPhase::load_state(std::size_t bucket_index, std::span<const std::uint8_t> in) {
  std::vector<float> host;
  SPARQ_RETURN_IF_ERROR(load_floats(in, host, "two_phase server residual"));
  CUDA_CHECK(cudaDeviceSynchronize());
  if (host.empty()) {  // saved before its first exchange: zeros when it comes
    server_residual_.erase(bucket_index);
    server_floats_.erase(bucket_index);
    return Status::ok();
  }
  Buffer server = Buffer::device(4 * host.size() + 4);
  // Landed before the next exchange: Note [Synchronous copies and non-blocking streams].
  cuda::copy_synchronously(server.data(), host.data(), 4 * host.size());
  server_residual_[bucket_index] = std::move(server);
  server_floats_[bucket_index] = host.size();
  return Status::ok();
}
#else
// Without CUDA no store lives on a device, so none of this is reached.
Status DeviceTwoPhase::run(std::size_t, std::span<float>, DeviceCodec&, float*, comm::Communicator&,
                           const EncodeContext& ctx, const ExecContext&, std::uint32_t*, float*) {
  return Status::error("bucket {}: exchanging a GPU store needs sparq built with CUDA",
                       ctx.bucket_id);
}
void DeviceTwoPhase::save_state(std::size_t, std::vector<std::uint8_t>& out) const { out.clear(); }
Status DeviceTwoPhase::load_state(std::size_t, std::span<const std::uint8_t>) {
  return Status::ok();
}
#endif

}  // namespace sparq::compress
