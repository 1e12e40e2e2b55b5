// Evaluation's running sums over one rank's batches, and their world total.
//
// Note [Exact evaluation sums]
// An evaluation's figures are ratios of sums over every scored target (or image) of every
// rank. The sums are kept so that the figure does not depend on the eval set's size, the world
// size's reduction tree or the MPI library:
//   * counts (targets, correct predictions) are int64, exact at any size: an f32 count stops
//     at 2^24 (16.8M targets, a few OpenWebText validation shards), and its ratio drifts
//     before that;
//   * loss sums are f64 on each rank (the loss of a batch arrives as an f32 mean);
//   * the world total is an allgather of every rank's sums, added in rank order on every rank,
//     not an allreduce whose order and tree the library picks: every rank holds the same bits,
//     and a figure reproduces on another cluster with the same world size.
#pragma once

#include <cstdint>

#include "comm/communicator.h"

namespace sparq::train {

struct EvalSums {
  double loss = 0;           // loss summed over the counted targets
  std::int64_t count = 0;    // counted targets (language models) or images
  std::int64_t correct = 0;  // of them, predicted right
  double source_loss = 0;    // the true source's loss over the same targets (Markov data)

  // One batch: its mean loss over `targets` counted targets and the predictions it got right.
  void add_batch(double mean_loss, std::int64_t targets, std::int64_t right);
};

// Every rank's sums added in rank order; the same on every rank (Note [Exact evaluation sums]).
// A collective: every rank of `comm` calls it.
EvalSums world_eval_sums(comm::Communicator& comm, const EvalSums& mine);

}  // namespace sparq::train
