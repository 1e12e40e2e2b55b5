// Wire-volume model used for byte accounting, shared by every backend.
//
// MPI libraries and NCCL pick their algorithms at run time and do not report what they put on
// the wire, so sparq counts bytes with one documented model: the ring algorithms (which NCCL
// uses for large messages and which are bandwidth-optimal). For each collective the model
// gives the exact bytes THIS rank sends and receives, block by block, so that summed over all
// ranks sent == received. Point-to-point traffic is counted by payload size.
//
//   allreduce       ring reduce-scatter + ring allgather over P near-equal blocks:
//                   about 2(P-1)/P * n each way
//   allgather(v)    ring: receive every other rank's block, forward all but one
//   reduce_scatter  ring: send every block but your own, receive all but your left
//                   neighbour's
//   alltoall(v)     every block except the one to/from yourself
//   broadcast       pipelined chain from the root: every non-root receives n, every rank
//                   but the last in the chain sends n
// Pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace sparq::comm {

struct WireBytes {
  std::uint64_t sent = 0;
  std::uint64_t received = 0;
};

// Block `block` of `count` elements split over `size` near-equal contiguous blocks (the first
// count % size blocks get one more element): the partition the ring algorithms below assume
// and the one sparq's own ring allreduce (mpi_ring.h) uses, so its bytes match this model.
struct RingBlock {
  std::size_t offset = 0;  // elements
  std::size_t count = 0;
};
RingBlock ring_block(std::size_t count, int block, int size);

// `count` elements of `elem_bytes` each; rank in [0, size).
WireBytes ring_allreduce_bytes(std::size_t count, std::size_t elem_bytes, int rank, int size);
// counts[r]: rank r's block in elements.
WireBytes ring_allgatherv_bytes(std::span<const std::size_t> counts, std::size_t elem_bytes,
                                int rank);
WireBytes ring_reduce_scatter_bytes(std::span<const std::size_t> counts, std::size_t elem_bytes,
                                    int rank);
WireBytes alltoallv_bytes(std::span<const std::size_t> send_counts,
                          std::span<const std::size_t> recv_counts, std::size_t elem_bytes,
                          int rank);
WireBytes chain_broadcast_bytes(std::size_t count, std::size_t elem_bytes, int rank, int root,
                                int size);

}  // namespace sparq::comm
