#include "comm/gather.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <string>

#include "core/check.h"
#include "core/log.h"
#include "core/timer.h"

namespace sparq::comm {

std::size_t checked_peer_size(std::int64_t size, std::size_t max, int peer, std::string_view what) {
  SPARQ_CHECK(size >= 0 && static_cast<std::uint64_t>(size) <= max,
              "rank {} sent a size of {} for {}, outside [0, {}]: a peer's bug or a corrupt "
              "exchange",
              peer, size, what, max);
  return static_cast<std::size_t>(size);
}

void allgather_bytes(Communicator& comm, std::span<const std::uint8_t> mine,
                     std::optional<std::size_t> fixed, std::size_t max_each,
                     std::vector<std::uint8_t>& recv, std::vector<std::size_t>& counts,
                     std::vector<std::size_t>& displs) {
  const std::size_t p = static_cast<std::size_t>(comm.size());
  SPARQ_CHECK(mine.size() <= max_each, "allgather of {} bytes from this rank, above the bound {}",
              mine.size(), max_each);
  counts.assign(p, mine.size());
  if (fixed) {
    SPARQ_CHECK(mine.size() == *fixed, "message of {} bytes, the compressor promised {}",
                mine.size(), *fixed);
  } else {
    std::vector<std::int64_t> sizes(p);
    const auto own = static_cast<std::int64_t>(mine.size());
    comm.allgather(&own, sizes.data(), 1, DType::kI64);
    for (std::size_t r = 0; r < p; ++r) {
      counts[r] = checked_peer_size(sizes[r], max_each, static_cast<int>(r), "its allgather");
    }
  }
  displs = packed_displs(counts);
  recv.resize(total_count(counts));
  if (fixed) {
    comm.allgather(mine.data(), recv.data(), mine.size(), DType::kU8);
  } else {
    comm.allgatherv(mine.data(), recv.data(), counts, displs, DType::kU8);
  }
}

std::string gather_trace_events(Communicator& comm, const TraceRecorder& trace) {
  // The host name log.cpp read once (the NCCL communicator hashes it the same way).
  const auto mine = static_cast<std::int64_t>(std::hash<std::string>{}(log::host_name()));
  std::vector<std::int64_t> hosts(static_cast<std::size_t>(comm.size()));
  comm.allgather(&mine, hosts.data(), 1, DType::kI64);
  const bool one_host =
      std::all_of(hosts.begin(), hosts.end(), [&](auto h) { return h == hosts[0]; });
  return gather_trace_events(
      comm, trace, one_host, [] { return now_us(); }, kMaxMergedTraceBytes);
}

std::string gather_trace_events(Communicator& comm, const TraceRecorder& trace, bool shared_clock,
                                const std::function<std::int64_t()>& now, std::size_t max_total) {
  const std::vector<TraceSpan> spans = trace.spans();
  // This rank's clock reading of the common moment: 0 when the clocks are shared.
  std::int64_t anchor = 0;
  if (!shared_clock) {
    comm.barrier();
    anchor = now();
  }
  constexpr std::int64_t kNone = std::numeric_limits<std::int64_t>::max();
  std::int64_t first = kNone;
  for (const TraceSpan& s : spans) first = std::min(first, s.start_us - anchor);
  std::vector<std::int64_t> firsts(static_cast<std::size_t>(comm.size()));
  comm.allgather(&first, firsts.data(), 1, DType::kI64);
  const std::int64_t earliest = *std::min_element(firsts.begin(), firsts.end());
  const std::int64_t origin = earliest == kNone ? 0 : anchor + earliest;

  std::string mine = trace.chrome_events(comm.rank(), origin);
  const std::size_t p = static_cast<std::size_t>(comm.size());
  std::vector<std::int64_t> sizes(p);
  const auto own = static_cast<std::int64_t>(mine.size());
  comm.allgather(&own, sizes.data(), 1, DType::kI64);
  // Each rank's events in rank order are kept if they still fit in max_total, else left out
  // with a word, rather than the bound ending a run that traced a long
  // window. Every rank decides from the same sizes, so all agree on the counts. (The bound was
  // 4 GiB a rank and the job ended in allgatherv once a count or an offset passed INT_MAX:
  // review, 2026-12-07.)
  std::vector<std::size_t> counts(p, 0);
  std::size_t total = 0;
  for (std::size_t r = 0; r < p; ++r) {
    const std::size_t size = checked_peer_size(sizes[r], std::numeric_limits<std::int64_t>::max(),
                                               static_cast<int>(r), "its trace");
    if (size <= max_total - total) {
      counts[r] = size;
      total += size;
    } else if (comm.rank() == 0) {
      spdlog::warn(
          "rank {}'s trace of {} bytes is left out of the merged trace (bounded at {} "
          "bytes, {} taken by the ranks before it); trace a shorter window "
          "(log.trace_start, log.trace_steps)",
          r, size, max_total, total);
    }
  }
  if (counts[static_cast<std::size_t>(comm.rank())] == 0) mine.clear();
  const std::vector<std::size_t> displs = packed_displs(counts);
  std::string recv(total, '\0');
  comm.allgatherv(mine.data(), recv.data(), counts, displs, DType::kU8);
  std::string all;
  for (std::size_t r = 0; r < p; ++r) {
    if (counts[r] == 0) continue;
    if (!all.empty()) all += ",";
    all.append(recv, displs[r], counts[r]);
  }
  return all;
}

}  // namespace sparq::comm
