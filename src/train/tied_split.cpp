// comm.split_tied_embedding's rule (train/train_config.h, resolve_tied_split): whether the
// tied embedding's table and its lookup's rows travel apart.
#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <memory>

#include "compress/registry.h"
#include "train/train_config.h"

namespace sparq::train {

namespace {

// Wire bytes per element of the tied table's own exchange (Note [Tied split cost]).
Result<double> table_bytes_per_element(const TrainConfig& c, std::int64_t tied_rows) {
  const compress::CompressConfig& cc = c.compress.compress;
  if (cc.name == "none") return 4.0;
  SPARQ_ASSIGN_OR_RETURN(auto compressor, compress::make_compressor(cc));
  const auto n = static_cast<std::size_t>(tied_rows * c.model.n_embd);
  if (n == 0) return 4.0;
  if (auto bytes = compressor->fixed_message_bytes(n)) return static_cast<double>(*bytes) / n;
  // An f32 value and a 4-byte index per kept entry: more than any sparse format spends
  // (docs/compress.md), so the estimate errs towards splitting.
  if (auto rho = compressor->density()) return *rho * 8.0;
  // A size that follows the matrix layout (powersgd: 4 r (rows + cols) bytes for the table):
  // the table as its own [tied_rows, n_embd] matrix. Priced as dense, powersgd split the table
  // at P = 2 and sent 29 MB a step per rank instead of 3.8 MB on gpt2-124M (review,
  // 2026-12-07). A layout the compressor refuses (a rank above n_embd) is refused by the run.
  const compress::MatrixSegment table{"tied embedding", 0, static_cast<std::size_t>(tied_rows),
                                      static_cast<std::size_t>(c.model.n_embd)};
  if (compressor->set_layout(n, {table}).is_ok()) {
    if (auto bytes = compressor->fixed_message_bytes(n)) return static_cast<double>(*bytes) / n;
  }
  return 4.0;  // still unknown: priced as dense
}

}  // namespace

// Note [Tied split cost]
// The split exchanges the table (compressed or dense) early and the lookup's rows exactly
// (f32) at the end, where nothing hides them; each rank receives every other rank's rows.
// `auto` splits only when those rows, step_tokens * n_embd * 4 bytes over all ranks, cost at
// most half of what the table's own exchange costs, tied_rows * n_embd * e bytes with e its
// wire bytes per element: 4 dense, 2 for the bf16/fp16 casts, fixed_message_bytes / n for
// fixed-size messages, 8 * density for sparse ones, and for powersgd its factors' bytes with
// the table as one matrix, 4 r (tied_rows + n_embd) / (tied_rows n_embd). Dense, that is "the
// step's tokens cover at most half of the rows". Compressed at density 0.01 the rows usually lose:
// on the emulated cluster (4 nodes, 100 Mbit/s, gpt2-tiny, lbs 1% 4-bit) the split sent 1.85 MiB a
// step per rank, 80% of it the rows, against 370 KiB unsplit, and its step took 1.31-1.33 s
// against 1.15-1.16 s (docs/comm.md).
Result<bool> resolve_tied_split(const TrainConfig& c, std::int64_t tied_rows, int world_size) {
  const std::string& mode = c.comm.split_tied_embedding;
  if (mode == "never") return false;
  // The lookup's rows of one step, over all ranks, at most (the last micro-batch's tokens).
  const std::int64_t rank_tokens = std::int64_t{c.train.micro_batch} * c.data.seq_len;
  const std::int64_t step_tokens = rank_tokens * world_size;
  // One rank's rows in the gather: at most its tokens, and at most the table's rows.
  const std::int64_t rank_rows = std::min(rank_tokens, tied_rows);
  std::string why;
  if (tied_rows == 0) {
    why = "the model has no tied embedding (GPT-2 has one)";
  } else if (c.train.device != Device::kCPU) {
    why = "train.device: cuda does not split it yet";
  } else if (c.optim.communicate != "gradient") {
    why = "optim.communicate is not gradient (the optimizer needs the whole local gradient)";
  } else if (clips_locally(c)) {
    why = "a local clip scope needs the whole local gradient (its norm) before sending";
  } else if (static_cast<double>(rank_rows) * world_size * c.model.n_embd >
             static_cast<double>(std::numeric_limits<int>::max())) {
    // Every rank gathers every rank's rows (at most its tokens, at most the table's rows) in
    // one allgatherv, whose counts and displacements MPI takes as int: past 2^31 - 1 floats
    // the exchange ended the job at its first step (GPT-2 124M, B = 16, T = 1024: from 171
    // ranks; review, 2026-12-07).
    why = fmt::format(
        "the rows of a step over all ranks, {} ranks x up to {} rows x {} floats, exceed the "
        "2^31 - 1 floats one MPI allgatherv can gather",
        world_size, rank_rows, c.model.n_embd);
  } else if (c.compress.compress.name == "dgc") {
    // Measured: with the split, the convergence test's dgc run (SGD momentum 0.9 kept by the
    // compressor) ended at 1.20x the source's entropy instead of within it.
    why =
        "compress.name: dgc keeps the momentum in the compressor, which the exact rows "
        "would bypass";
  }
  // One rank exchanges nothing, so there is nothing to split, under always too: a config
  // valid for 32 ranks was refused by the dry run of one process on a login node (review,
  // 2026-12-07). Every other reason is still refused there, as the ranks would refuse it.
  if (why.empty() && world_size < 2) return false;
  if (!why.empty()) {
    if (mode != "always") return false;
    return Status::error("{}: comm.split_tied_embedding: always, but {}; use auto or never",
                         c.where(), why);
  }
  if (mode == "always") return true;  // the cost rule is auto's
  SPARQ_ASSIGN_OR_RETURN(const double e, table_bytes_per_element(c, tied_rows));
  return 2.0 * 4.0 * static_cast<double>(step_tokens) <= e * static_cast<double>(tied_rows);
}

}  // namespace sparq::train
