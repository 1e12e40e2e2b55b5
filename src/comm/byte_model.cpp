#include "comm/byte_model.h"

#include <algorithm>
#include <numeric>

#include "comm/communicator.h"
#include "core/check.h"

namespace sparq::comm {
namespace {

int wrap(int r, int size) { return ((r % size) + size) % size; }

void check_rank(int rank, int size, const char* what) {
  SPARQ_CHECK(size > 0 && rank >= 0 && rank < size, "{}: rank {} outside a world of {}", what, rank,
              size);
}

}  // namespace

RingBlock ring_block(std::size_t count, int block, int size) {
  SPARQ_CHECK(size > 0 && block >= 0 && block < size, "ring_block: block {} outside {} blocks",
              block, size);
  const std::size_t base = count / static_cast<std::size_t>(size);
  const std::size_t extra = count % static_cast<std::size_t>(size);
  const auto b = static_cast<std::size_t>(block);
  return {b * base + std::min(b, extra), base + (b < extra ? 1 : 0)};
}

WireBytes ring_allreduce_bytes(std::size_t count, std::size_t elem_bytes, int rank, int size) {
  check_rank(rank, size, "ring_allreduce_bytes");
  if (size == 1) return {};
  const std::uint64_t total = count;
  // Reduce-scatter leaves block r on rank r: it sends every block but r and receives every
  // block but r-1. The allgather that follows sends every block but r+1 and receives all but r.
  const std::uint64_t sent = 2 * total - ring_block(count, rank, size).count -
                             ring_block(count, wrap(rank + 1, size), size).count;
  const std::uint64_t received = 2 * total - ring_block(count, wrap(rank - 1, size), size).count -
                                 ring_block(count, rank, size).count;
  return {sent * elem_bytes, received * elem_bytes};
}

WireBytes ring_allgatherv_bytes(std::span<const std::size_t> counts, std::size_t elem_bytes,
                                int rank) {
  const int size = static_cast<int>(counts.size());
  check_rank(rank, size, "ring_allgatherv_bytes");
  if (size == 1) return {};
  const std::uint64_t total = total_count(counts);
  // The block of the right neighbour travels the whole ring and ends here: never forwarded.
  return {(total - counts[wrap(rank + 1, size)]) * elem_bytes, (total - counts[rank]) * elem_bytes};
}

WireBytes ring_reduce_scatter_bytes(std::span<const std::size_t> counts, std::size_t elem_bytes,
                                    int rank) {
  const int size = static_cast<int>(counts.size());
  check_rank(rank, size, "ring_reduce_scatter_bytes");
  if (size == 1) return {};
  const std::uint64_t total = total_count(counts);
  return {(total - counts[rank]) * elem_bytes, (total - counts[wrap(rank - 1, size)]) * elem_bytes};
}

WireBytes alltoallv_bytes(std::span<const std::size_t> send_counts,
                          std::span<const std::size_t> recv_counts, std::size_t elem_bytes,
                          int rank) {
  const int size = static_cast<int>(send_counts.size());
  check_rank(rank, size, "alltoallv_bytes");
  SPARQ_CHECK(recv_counts.size() == send_counts.size(),
              "alltoallv_bytes: {} send counts but {} receive counts", send_counts.size(),
              recv_counts.size());
  return {(total_count(send_counts) - send_counts[rank]) * elem_bytes,
          (total_count(recv_counts) - recv_counts[rank]) * elem_bytes};
}

WireBytes chain_broadcast_bytes(std::size_t count, std::size_t elem_bytes, int rank, int root,
                                int size) {
  check_rank(rank, size, "chain_broadcast_bytes");
  check_rank(root, size, "chain_broadcast_bytes root");
  if (size == 1) return {};
  const std::uint64_t n = static_cast<std::uint64_t>(count) * elem_bytes;
  const bool last_in_chain = rank == wrap(root - 1, size);
  return {last_in_chain ? 0 : n, rank == root ? 0 : n};
}

}  // namespace sparq::comm
