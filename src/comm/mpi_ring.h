// sparq's own ring allreduce over MPI point-to-point (internal to the MPI backend), for host
// buffers: a reduce-scatter of P-1 steps then an allgather of P-1 steps around the ring
// rank -> rank + 1, as in Baidu's ring allreduce. Every rank sends and receives
// 2(P-1)/P * n elements whatever P is, the bandwidth optimum; the price is 2(P-1) message
// latencies, so MPI's own latency-optimised algorithms win on small messages (the MPI
// communicator's `auto` choice picks between the two by size).
//
// Partition: the buffer is cut into P contiguous near-equal segments (comm/byte_model.h's
// ring_block; some are empty when count < P). At ring step t (0 <= t < 2(P-1)) rank r sends
// segment r-t-1 to r+1 and receives segment r-t-2 from r-1 (mod P); in the first P-1 steps it
// adds what it receives into its own copy, so after them segment r holds the full sum on rank
// r; the last P-1 steps pass the summed segments on. The segment received at step t is the
// one sent at step t+1, so the bytes are exactly ring_allreduce_bytes(), and every rank ends
// with the owner's bytes of every segment: results are bit-identical across ranks.
//
// Pipelining: each segment travels in sub-chunks of kRingChunkBytes. A sub-chunk is
// forwarded (MPI_Isend) as soon as it has been received and reduced, while the next
// kRingChunksInFlight receives are already posted, so reducing sub-chunk k overlaps the
// transfer of sub-chunk k+1 and successive steps overlap each other.
//
// Sums use sum_host (comm/mpi_types.h): the same per-element math as the MPI path's
// operators (f16/bf16 add in f32 and round each partial sum once). Every message holds at
// most one sub-chunk, so counts above INT_MAX need no splitting.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <vector>

#include "comm/mpi_wait.h"
#include "core/dtype.h"

namespace sparq::comm {

// Sub-chunk size. Large enough that the per-message cost (a few microseconds of matching and
// rendezvous over shared memory or TCP) stays small next to the transfer itself, small enough
// that a segment of a few MiB is still split into several pieces to pipeline and that the
// in-flight receive buffers of an in-place call (kRingChunksInFlight of them) stay in L2.
inline constexpr std::size_t kRingChunkBytes = std::size_t{256} << 10;
// Receives posted ahead of the one being reduced: at least 2 so that a transfer is always in
// progress while the previous sub-chunk is summed.
inline constexpr int kRingChunksInFlight = 4;

// out = sum over the ranks of `comm` of their `in` (count elements of a summable dtype).
// in == out is in place; any other overlap is allowed too (the input is moved into out
// first). Every rank of `comm` must call it with the same count and dtype (Note
// [Rank-identical collective order], communicator.h). The caller serialises access to MPI
// when the library is below MPI_THREAD_MULTIPLE, divides for kAvg and counts the bytes.
// Its messages use tag 0 on `comm`: give it a communicator of its own (the MPI
// communicator keeps a second duplicate for it) so they never meet send()/recv() traffic.
// `scratch` holds the staging buffers of in-place calls (up to kRingChunksInFlight *
// kRingChunkBytes); it is grown as needed and kept by the caller, so that repeated calls
// neither allocate nor fault in fresh pages. `wait`: how it waits for its messages (Note
// [Waiting for MPI], comm/mpi_wait.h).
void ring_allreduce_sum(MPI_Comm comm, int rank, int size, const void* in, void* out,
                        std::size_t count, DType dtype, std::vector<char>& scratch, MpiWait wait);

}  // namespace sparq::comm
