// Gathers built from the Communicator's collectives, for callers that hold one byte string
// per rank: compressed messages (the allgather and two_phase strategies) and the Chrome trace
// (the trainer). Collective: every rank calls them in the same order (Note [Rank-identical
// collective order], communicator.h). Host buffers only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "comm/communicator.h"
#include "core/trace.h"

namespace sparq::comm {

// Allgathers one variable-size byte string per rank: `recv` gets every rank's bytes packed in
// rank order, `counts`/`displs` their sizes and offsets. When `fixed` is set every rank's
// string has that size (checked) and the size exchange is skipped. The output vectors are
// reused across calls to avoid reallocation.
//
// `max_each` bounds every rank's size, checked before anything is allocated: a size beyond it
// (or below 0) is a peer's bug or a corrupt exchange, and ends the job naming the rank. Every
// rank sees every size, so all fail together. Unchecked, a negative size became 2^64 - 1 and
// the std::length_error thrown between two collectives left this rank's sequence of
// collectives out of step with its peers' (review, 2026-12-07).
void allgather_bytes(Communicator& comm, std::span<const std::uint8_t> mine,
                     std::optional<std::size_t> fixed, std::size_t max_each,
                     std::vector<std::uint8_t>& recv, std::vector<std::size_t>& counts,
                     std::vector<std::size_t>& displs);

// A size a peer sent, before it sizes a buffer: in [0, max], or the job ends naming the peer
// and `what` (a received size is never trusted; Note above).
std::size_t checked_peer_size(std::int64_t size, std::size_t max, int peer, std::string_view what);

// Every rank's recorded spans as Chrome trace events (pid = rank), on a common time origin
// (the earliest span of any rank), joined with commas in rank order. Every rank receives the
// whole string.
//
// Clocks: span times are steady-clock microseconds, which agree between the processes of one
// host but not between hosts (each counts from its own boot; NTP does not change that). When
// the ranks' host names differ, each rank's times are re-based on the moment it leaves one
// barrier, so the merged trace is aligned to within that barrier's exit skew (about a one-way
// network latency) instead of being off by the hosts' difference in uptime.
//
// The ranks' events gathered total at most kMaxMergedTraceBytes (MPI's counts and offsets are
// ints; the joining commas come on top): each rank in order is kept if its events still fit,
// else left out, and rank 0 warns of each one left out.
inline constexpr std::size_t kMaxMergedTraceBytes = std::numeric_limits<int>::max();
std::string gather_trace_events(Communicator& comm, const TraceRecorder& trace);
// The same with the choices made by the caller (tests): `shared_clock` false re-bases every
// rank's spans on now() read right after a barrier; now() must read the spans' clock;
// `max_total` bounds the merged string.
std::string gather_trace_events(Communicator& comm, const TraceRecorder& trace, bool shared_clock,
                                const std::function<std::int64_t()>& now, std::size_t max_total);

}  // namespace sparq::comm
