// Agreement on errors across ranks, so that a failure is reported once and ends every rank
// (docs/reliability.md, "Errors").
//
// One line per error: when every rank detects the same error (a bad config, a missing file on
// a shared disk) rank 0 prints it once, "error (on all N ranks): <msg>", instead of N copies;
// when only some ranks fail, or they fail differently, rank 0 prints one line per distinct
// message naming its ranks, "error on rank 1 of 3: <msg>", so the line itself says where to
// look. A rank that failed alone is thereby named too.
//
// Collective functions below: every rank calls them in the same order (Note [Rank-identical
// collective order], communicator.h); the extra collectives after the first depend only on the
// allreduced failure count, so every rank takes the same path. Host buffers only.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "comm/communicator.h"
#include "core/status.h"

namespace sparq::comm {

// Every rank's outcome: failures[r] is rank r's message, nullopt when rank r succeeded.
struct ErrorReport {
  std::vector<std::optional<std::string>> failures;

  int world_size() const { return static_cast<int>(failures.size()); }
  int failed_count() const;
  bool any_failed() const { return failed_count() > 0; }
  // One line per distinct message, in order of its lowest rank: "error (on all N ranks):
  // <msg>" when every rank of a world of several failed with the same message, "error on
  // rank 1 of 3: <msg>" / "error on ranks 0, 2 of 3: <msg>" otherwise, "error: <msg>" in a
  // world of one. No trailing newline; empty when nothing failed.
  std::vector<std::string> lines() const;
  // The report as a Status: ok when no rank failed; else the lines joined by '\n'. The same
  // on every rank, so that any rank's copy can be printed and rank 0's is.
  Status status() const;
};

// Collective: every rank contributes its own status and learns every rank's. Costs one
// allreduce of a failure count when no rank failed, plus a gather of the messages when one did.
ErrorReport gather_errors(Communicator& comm, const Status& local);

// For a world of one, the report of a single failure is its message itself (no "error:"
// prefix), so single-process callers see the message they would without agreement.
Status agree_on_errors(Communicator& comm, const Status& local);

// The first line where `mine` and `reference` differ, each described with its YAML key path
// ("optim.lr: 0.002" for the line "  lr: 0.002" under "optim:"), as {mine, reference}; an
// absent line is "(nothing)"; texts that differ only there are "a final newline" and "no
// final newline". Both empty when the texts are equal.
std::pair<std::string, std::string> first_yaml_difference(std::string_view mine,
                                                          std::string_view reference);

// Collective: rank 0's `text` (its resolved config) is broadcast and every rank compares
// its own with it byte for byte; each differing rank finds its first differing line, and every
// rank returns the same failure:
//   "<what> differs between ranks: rank 2 has optim.lr: 0.002 where rank 0 has optim.lr: 0.001
//    (<advice>)"
// naming every differing rank. Two broadcasts and an allgather of one flag when all agree.
Status check_same_text(Communicator& comm, const std::string& text, std::string_view what,
                       std::string_view advice);

}  // namespace sparq::comm
