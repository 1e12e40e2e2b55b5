#include "comm/mpi_ring.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "comm/byte_model.h"
#include "comm/mpi_check.h"
#include "comm/mpi_support.h"
#include "comm/mpi_types.h"
#include "comm/mpi_wait.h"
#include "core/check.h"

namespace sparq::comm {
namespace {

constexpr int kRingTag = 0;

int wrap(int r, int size) { return ((r % size) + size) % size; }

// One sub-chunk of the segment a ring step receives (and the next step forwards).
struct Piece {
  int step = 0;
  std::size_t offset = 0;  // elements from the start of the buffer
  int count = 0;           // elements; at most one sub-chunk, so it fits an MPI int
};

// Calls fn(offset, n) for each sub-chunk of `block`, in order. An empty block has none: both
// ends of a transfer see the same block, so they agree on the messages without any header.
template <typename Fn>
void for_each_piece(RingBlock block, std::size_t piece_elems, Fn&& fn) {
  for (std::size_t done = 0; done < block.count; done += piece_elems) {
    fn(block.offset + done, static_cast<int>(std::min(piece_elems, block.count - done)));
  }
}

void wait_all(std::vector<MPI_Request>& requests, MpiWait mode) {
  if (requests.empty()) return;
  MPI_CHECK(wait_all_requests(requests, mode));
  requests.clear();
}

}  // namespace

void ring_allreduce_sum(MPI_Comm comm, int rank, int size, const void* in, void* out,
                        std::size_t count, DType dtype, std::vector<char>& scratch, MpiWait wait) {
  const std::size_t es = dtype_size(dtype), bytes = count * es;
  char* dst = static_cast<char*>(out);
  const char* src = static_cast<const char*>(in);
  if (src != dst && mpi_support::overlaps(src, bytes, dst, bytes)) {
    std::memmove(dst, src, bytes);  // then it is an in-place call
    src = dst;
  }
  const bool in_place = src == dst;
  if (size == 1 || count == 0) {
    if (!in_place && bytes > 0) std::memcpy(dst, src, bytes);
    return;
  }

  const MPI_Datatype type = mpi_datatype(dtype);
  const int right = wrap(rank + 1, size), left = wrap(rank - 1, size);
  const int steps = 2 * (size - 1), reduce_steps = size - 1;
  const std::size_t piece_elems = std::max<std::size_t>(1, kRingChunkBytes / es);
  auto segment = [&](int index) { return ring_block(count, wrap(index, size), size); };

  // Every receive of the whole call, in the order the left neighbour sends them (it forwards
  // step t's pieces in the order it receives them, so the orders agree and one tag suffices).
  std::vector<Piece> receives;
  for (int t = 0; t < steps; ++t) {
    for_each_piece(segment(rank - t - 2), piece_elems, [&](std::size_t offset, int n) {
      receives.push_back({t, offset, n});
    });
  }
  std::vector<MPI_Request> recv_requests(receives.size(), MPI_REQUEST_NULL);
  std::vector<std::vector<MPI_Request>> sends(steps);  // outstanding sends, by step
  // How many sends each step makes (step 0 this rank's own pieces, step s > 0 one forward per
  // receive of step s - 1) and how many it has posted so far.
  std::vector<std::size_t> sends_expected(steps, 0), sends_posted(steps, 0);
  for_each_piece(segment(rank - 1), piece_elems, [&](std::size_t, int) { ++sends_expected[0]; });
  for (const Piece& p : receives) {
    if (p.step + 1 < steps) ++sends_expected[p.step + 1];
  }

  // In place, a reduce-scatter piece cannot land in `out` (that holds this rank's own
  // contribution), so it goes to one of kRingChunksInFlight staging slots. Out of place it
  // lands in `out` directly and this rank's input is added to it.
  // Slots are no larger than the largest piece, so a small call does not touch a large buffer.
  const std::size_t slot_bytes = std::min(piece_elems, segment(0).count) * es;
  if (in_place && scratch.size() < kRingChunksInFlight * slot_bytes) {
    scratch.resize(kRingChunksInFlight * slot_bytes);
  }
  auto landing = [&](std::size_t i) -> char* {
    const Piece& p = receives[i];
    if (in_place && p.step < reduce_steps) {
      return scratch.data() + (i % kRingChunksInFlight) * slot_bytes;
    }
    return dst + p.offset * es;
  };

  auto post_send = [&](int step, const char* base, std::size_t offset, int n) {
    ++sends_posted[step];
    sends[step].emplace_back();
    MPI_CHECK(MPI_Isend(base + offset * es, n, type, right, kRingTag, comm, &sends[step].back()));
  };
  // An allgather step t overwrites segment r-t-2 with its final sum; that segment was last
  // sent (as this rank's partial sum, or its input in place) at step t-(P-1). Those sends
  // must be complete before the first receive of step t may land on their data, so that
  // receive is posted only once every one of them has been posted (the forwards of step
  // t-(P-1) are posted as step t-P's receives are processed, which the window of receives
  // posted ahead can outrun: P = 3 and 3 * 65536 + 1 floats did) and then waited for.
  auto may_post = [&](std::size_t i) {
    const int t = receives[i].step;
    return t < reduce_steps || sends_posted[t - reduce_steps] == sends_expected[t - reduce_steps];
  };
  auto post_receive = [&](std::size_t i) {
    const Piece& p = receives[i];
    const bool first_of_step = i == 0 || receives[i - 1].step != p.step;
    if (p.step >= reduce_steps && first_of_step) {
      SPARQ_CHECK(may_post(i), "ring allreduce: step {}'s receive posted before step {}'s sends",
                  p.step, p.step - reduce_steps);
      wait_all(sends[p.step - reduce_steps], wait);
    }
    MPI_CHECK(MPI_Irecv(landing(i), p.count, type, left, kRingTag, comm, &recv_requests[i]));
  };

  // Step 0 sends this rank's own data of segment r-1; every later send forwards a piece as
  // soon as it has been received (and, while reducing, summed).
  for_each_piece(segment(rank - 1), piece_elems,
                 [&](std::size_t offset, int n) { post_send(0, src, offset, n); });
  // At most kRingChunksInFlight receives ahead of the one processed (the staging slots), and
  // none before may_post allows it. Receive i itself always may be posted when it is next:
  // the receives of earlier steps are processed by then.
  std::size_t posted = 0;
  auto post_ahead = [&](std::size_t processed) {
    while (posted < receives.size() &&
           posted < processed + static_cast<std::size_t>(kRingChunksInFlight) && may_post(posted)) {
      post_receive(posted++);
    }
  };
  for (std::size_t i = 0; i < receives.size(); ++i) {
    post_ahead(i);
    const Piece& p = receives[i];
    MPI_Status status;
    MPI_CHECK(wait_request(&recv_requests[i], &status, wait));
    int got = 0;
    MPI_CHECK(MPI_Get_count(&status, type, &got));
    SPARQ_CHECK(got == p.count,
                "ring allreduce: rank {} got {} elements from rank {} at step {}, expected {}",
                rank, got, left, p.step, p.count);
    char* target = dst + p.offset * es;
    if (p.step < reduce_steps) {
      // dst += received (in place) or dst(received) += input: the same commutative sum.
      sum_host(in_place ? landing(i) : src + p.offset * es, target, p.count, dtype);
    }
    if (p.step + 1 < steps) post_send(p.step + 1, dst, p.offset, p.count);
    // The slot of piece i is free again: its successor in the window may use it.
    post_ahead(i + 1);
  }
  for (auto& step_sends : sends) wait_all(step_sends, wait);
}

}  // namespace sparq::comm
