#include "compress/device_tree.h"

#include <algorithm>

#include "compress/device_exchange.h"
#include "compress/options.h"
#include "compress/random_streams.h"

#if SPARQ_HAS_CUDA
#include <cuda_runtime_api.h>

#include "compress/cuda/lbs_cuda.h"
#include "compress/cuda/tree_cuda.h"
#include "core/cuda/cuda_check.h"
#endif

namespace sparq::compress {

#if SPARQ_HAS_CUDA
Status DeviceTree::run(std::span<float> bucket, DeviceCodec& codec, double density,
                       bool merges_by_encode, float* residual, comm::Communicator& comm,
                       const EncodeContext& ctx_in, const ExecContext& exec, std::uint32_t* invalid,
                       float* own_decoded) {
  SPARQ_RETURN_IF_ERROR(check_device_communicator(comm, ctx_in));
  const std::size_t n = bucket.size();
  const int p = comm.size(), rank = comm.rank();
  void* stream = device_exchange_stream(comm, exec);
  const auto s = static_cast<cudaStream_t>(stream);
  const bool collective = exchanges_with_collective(comm);
  EncodeContext ctx = ctx_in;
  ctx.rank = rank;
  ctx.world_size = p;
  ctx.offset = 0;
  const std::size_t k = k_for(density_for(density, ctx), n);
  const std::size_t capacity = codec.capacity(n, ctx);
  reserve_exchange_buffer(message_, capacity, comm, stream);
  reserve_exchange_buffer(peer_, capacity, comm, stream);
  reserve_exchange_buffer(dense_, 4 * n, comm, stream);
  reserve_exchange_buffer(values_, 4 * k, comm, stream);
  reserve_exchange_buffer(scratch_, codec.scratch_bytes(n, ctx), comm, stream);
  if (residual == nullptr) reserve_exchange_buffer(local_, 4 * n, comm, stream);

  // 1. a = g + e in the residual (or a copy of g), and the local list.
  float* a = residual;
  if (a != nullptr) {
    cuda::add_into(a, bucket.data(), n, s);
  } else {
    a = local_.as<float>();
    CUDA_CHECK(cudaMemcpyAsync(a, bucket.data(), 4 * n, cudaMemcpyDeviceToDevice, s));
  }
  auto* message = message_.as<std::uint8_t>();
  auto* dense = dense_.as<float>();
  codec.encode(a, nullptr, n, ctx, message, scratch_.data(), scratch_.size(), stream);
  // As the CPU's tree counts: this rank's list (here its capacity, what moves on the
  // device), each merged list it sends up the tree (its own unmerged list is not counted
  // again), and the k values of the allreduce.
  payload_bytes_ = capacity + 4 * k;

  // 2. The tree to rank 0.
  bool merged = false;
  for (int dist = 1, round = 0; dist < p; dist <<= 1, ++round) {
    if (rank % (2 * dist) == dist) {
      comm.send(message, capacity, DType::kU8, rank - dist, round);
      if (merged) payload_bytes_ += capacity;
      break;
    }
    if (rank % (2 * dist) == 0 && rank + dist < p) {
      comm.recv(peer_.data(), capacity, DType::kU8, rank + dist, round);
      // Each list decoded under the context it was last encoded with, the sum encoded under
      // this round's (Note [Tree merge draws], random_streams.h), as on the CPU.
      const EncodeContext own = tree_list_context(ctx, rank, round);
      const EncodeContext from = tree_list_context(ctx, rank + dist, round);
      codec.decode(message, n, own, 1.0f, /*add=*/false, dense, scratch_.data(), scratch_.size(),
                   stream, nullptr);
      // Note [Listed zeros]: each list marked right after its decode (the scratch then holds
      // its indices), as the CPU's merge by encode does.
      if (merges_by_encode) {
        cuda::mark_listed_zeros(dense, n, cuda::sparse_decoded(scratch_.data(), n, k), k, s);
      }
      codec.decode(peer_.as<std::uint8_t>(), n, from, 1.0f, /*add=*/true, dense, scratch_.data(),
                   scratch_.size(), stream, invalid != nullptr ? invalid + rank + dist : nullptr);
      if (merges_by_encode) {
        cuda::mark_listed_zeros(dense, n, cuda::sparse_decoded(scratch_.data(), n, k), k, s);
      }
      codec.encode(dense, nullptr, n, tree_merge_context(ctx, round), message, scratch_.data(),
                   scratch_.size(), stream);
      merged = true;
    }
  }

  // 3. Rank 0's list is G, on every rank.
  if (collective) comm.broadcast(message, capacity, DType::kU8, 0);
  const EncodeContext root = tree_root_context(ctx);
  codec.decode(message, n, root, 1.0f, /*add=*/false, dense, scratch_.data(), scratch_.size(),
               stream, invalid);
  const cuda::SparseDecoded global = cuda::sparse_decoded(scratch_.data(), n, k);

  // 4. The ranks' a on G, summed; 5. the bucket and the residual.
  auto* values = values_.as<float>();
  cuda::gather_global(a, n, global, k, values, s);
  if (collective) comm.allreduce(values, values, k, DType::kF32, comm::ReduceOp::kSum);
  CUDA_CHECK(cudaMemsetAsync(bucket.data(), 0, 4 * n, s));
  if (own_decoded != nullptr) CUDA_CHECK(cudaMemsetAsync(own_decoded, 0, 4 * n, s));
  cuda::apply_global(bucket.data(), n, global, k, values, 1.0f / static_cast<float>(p), a,
                     residual != nullptr, own_decoded, s);
  return Status::ok();
}
#else
// Without CUDA no store lives on a device, so none of this is reached.
Status DeviceTree::run(std::span<float>, DeviceCodec&, double, bool, float*, comm::Communicator&,
                       const EncodeContext& ctx, const ExecContext&, std::uint32_t*, float*) {
  return Status::error("bucket {}: exchanging a GPU store needs sparq built with CUDA",
                       ctx.bucket_id);
}
#endif

}  // namespace sparq::compress
