// Gathers built from the Communicator's collectives, for callers that hold one byte string
// per rank: compressed messages (the allgather and two_phase strategies) and the Chrome trace
// (the trainer). Collective: every rank calls them in the same order (Note [Rank-identical
// collective order], communicator.h). Host buffers only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "core/trace.h"

namespace sparq::comm {

// Allgathers one variable-size byte string per rank: `recv` gets every rank's bytes packed in
// rank order, `counts`/`displs` their sizes and offsets. When `fixed` is set every rank's
// string has that size (checked) and the size exchange is skipped. The output vectors are
// reused across calls to avoid reallocation.
void allgather_bytes(Communicator& comm, std::span<const std::uint8_t> mine,
                     std::optional<std::size_t> fixed, std::vector<std::uint8_t>& recv,
                     std::vector<std::size_t>& counts, std::vector<std::size_t>& displs);

// Every rank's recorded spans as Chrome trace events (pid = rank), on a common time origin
// (the earliest span of any rank), joined with commas in rank order. Every rank receives the
// whole string.
//
// Clocks: span times are steady-clock microseconds, which agree between the processes of one
// host but not between hosts (each counts from its own boot; NTP does not change that). When
// the ranks' host names differ, each rank's times are re-based on the moment it leaves one
// barrier, so the merged trace is aligned to within that barrier's exit skew (about a one-way
// network latency) instead of being off by the hosts' difference in uptime.
std::string gather_trace_events(Communicator& comm, const TraceRecorder& trace);
// The same with the choice made by the caller (tests): `shared_clock` false re-bases every
// rank's spans on now() read right after a barrier; now() must read the spans' clock.
std::string gather_trace_events(Communicator& comm, const TraceRecorder& trace, bool shared_clock,
                                const std::function<std::int64_t()>& now);

}  // namespace sparq::comm
