// A resume is one decision of the whole world: every rank resolves the same checkpoint
// directory, loads its own file (checkpointing.cpp, or elastic_resume.h for another world
// size), and the ranks compare what they loaded before any of them trains on it. The load's
// warnings are logged only once every rank agreed, so a refused resume logs none of them.

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <string>
#include <vector>

#include "core/checksum.h"
#include "core/tensor_copy.h"
#include "train/checkpoint.h"
#include "train/trainer.h"

namespace sparq::train {
namespace {

// A resume of a checkpoint root whose newest complete step cannot be loaded names the step
// before it, which a resume must then be given by hand (review, 2026-12-07: the error named
// the damaged file only, and left finding an older step to the user).
Status with_earlier_step(const Status& failed, const std::string& path, const std::string& dir) {
  if (failed.is_ok() || same_directory(path, dir)) return failed;
  Result<std::int64_t> step = parse_step(dir);
  if (!step.is_ok()) return failed;
  Result<std::string> earlier = latest_checkpoint(path, *step);
  if (!earlier.is_ok()) return failed;
  return Status::error("{}; the newest complete step before it: --resume {}", failed.message(),
                       *earlier);
}

}  // namespace

Status Trainer::resume(const std::string& path) {
  // Every rank resolves a checkpoint root itself; on a shared file system whose directory
  // listings lag (NFS attribute caches) two ranks could find different newest steps and
  // resume diverged replicas without a word (review, 2026-12-05). They must agree on it.
  Result<std::string> dir = resolve_checkpoint_dir(path);
  SPARQ_RETURN_IF_ERROR(agree(dir.status(), "resuming from " + path));
  const Result<std::int64_t> step = parse_step(*dir);
  SPARQ_ASSIGN_OR_RETURN(
      const std::vector<std::int64_t> steps,
      every_ranks_value("agree: the checkpoint to resume", step.is_ok() ? step.value() : -1));
  for (std::size_t r = 0; r < steps.size(); ++r) {
    if (steps[r] != steps[0]) {
      return Status::error(
          "resuming from {}: rank 0 found step {} and rank {} step {} as its newest complete "
          "checkpoint (a shared file system not yet in step?); name the step directory",
          path, steps[0], r, steps[r]);
    }
  }
  ResumeMessages messages;
  SPARQ_RETURN_IF_ERROR(with_earlier_step(
      agree(load_checkpoint(*dir, messages), "resuming from " + path), path, *dir));
  SPARQ_RETURN_IF_ERROR(with_earlier_step(check_replicas_loaded_alike(*dir), path, *dir));
  // Note [A server residual no server sends] (gradient_exchange.h): a collective, so only
  // once every rank has loaded (server_residual_resume.cpp).
  SPARQ_ASSIGN_OR_RETURN(const bool folded, fold_server_residual("resuming from " + path));
  exchange_->residual_to_device();  // both load paths filled the host copy
  if (is_root()) {
    for (const std::string& line : messages.warnings) spdlog::warn("{}", line);
    const AbsentResidualLines& absent = messages.absent_residual;
    if (folded || messages.server_residual_folded) {
      if (!absent.folded.empty()) spdlog::info("{}", absent.folded);
    } else if (!absent.zeros.empty()) {
      spdlog::warn("{}", absent.zeros);
    }
    for (const std::string& line : messages.info) spdlog::info("{}", line);
  }
  return Status::ok();
}

Result<std::vector<std::int64_t>> Trainer::every_ranks_value(const std::string& what,
                                                             std::int64_t mine) {
  std::vector<std::int64_t> all(static_cast<std::size_t>(comm_.size()));
  SPARQ_RETURN_IF_ERROR(run_control(what, [&](comm::Communicator& c) {
    c.allgather(&mine, all.data(), 1, DType::kI64);
    return Status::ok();
  }));
  return all;
}

Status Trainer::check_replicas_loaded_alike(const std::string& dir) {
  // Every rank loaded the parameters from its own file: they must be the same bytes, or the
  // replicas train apart from here on. A file damaged in a way its checksum64 misses (two
  // sign flips, core/checksum.h) or taken from another run was resumed without a word
  // (review, 2026-12-07). The stronger hash of the loaded values, compared across ranks; the
  // same for every optimizer buffer the optimizer says is replicated (its moments on the
  // aggregate, Adam's frozen variance): a damaged moment on one rank made the replicas'
  // parameters differ at the next save, and the resume after that blamed the healthy step
  // (review, 2026-12-08). Per-rank state (residuals, local moments) has nothing to compare.
  struct Replicated {
    std::string what;
    std::uint64_t hash;
  };
  std::vector<Replicated> replicated;
  const ParamStore& host = host_params();
  replicated.push_back(
      {"parameters",
       mixed_hash64(host.params(), static_cast<std::size_t>(host.flat_numel()) * sizeof(float))});
  std::vector<float> staging;
  for (const StateTensor& s : optimizer_->state()) {
    const optim::Optimizer::StateAcrossRanks across = optimizer_->state_across_ranks(s.name);
    if (!across.replicated) continue;
    const float* values = host_floats(s.tensor, staging);
    replicated.push_back(
        {fmt::format("{} (optim/{})", across.label, s.name),
         mixed_hash64(values, static_cast<std::size_t>(s.tensor.numel()) * sizeof(float))});
  }
  for (const Replicated& r : replicated) {
    SPARQ_ASSIGN_OR_RETURN(
        const std::vector<std::int64_t> all,
        every_ranks_value("agree: the loaded " + r.what, static_cast<std::int64_t>(r.hash)));
    for (std::size_t rank = 1; rank < all.size(); ++rank) {
      if (all[rank] != all[0]) {
        return Status::error(
            "resuming from {}: rank {} loaded other {} than rank 0 (from {}): a rank file is "
            "damaged or from another run; resume from an earlier step",
            dir, rank, r.what, checkpoint_rank_file(dir, static_cast<int>(rank)));
      }
    }
  }
  return Status::ok();
}

}  // namespace sparq::train
