// Trainer::fold_server_residual (trainer.h): Note [A server residual no server sends]
// (compress/gradient_exchange.h) at the end of a resume, and what it did in the user's terms.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <utility>

#include "train/trainer.h"

namespace sparq::train {
namespace {

// What fold_loaded_server_residual() did, in the user's terms (rank 0).
void log_server_residual_fold(const compress::GradientExchange::ServerResidualFold& fold) {
  if (!fold.folded.empty()) {
    spdlog::info(
        "resume: compress.server_compression is off, so the checkpoint's two_phase server "
        "residual of bucket(s) {} (sum |s| = {:.6g}) is folded into the error-feedback residual",
        fmt::join(fold.folded, ", "), fold.folded_mass);
  }
  if (!fold.dropped.empty()) {
    spdlog::warn(
        "resume: the checkpoint's two_phase server residual of bucket(s) {} (sum |s| = {:.6g}) "
        "is dropped, never applied: compress.server_compression is off and this run keeps no "
        "error-feedback residual to fold it into (compress.error_feedback)",
        fmt::join(fold.dropped, ", "), fold.dropped_mass);
  }
}

}  // namespace

Result<bool> Trainer::fold_server_residual(const std::string& what) {
  // On the engine's thread, after resume() agreed that every rank loaded: inside
  // load_checkpoint a rank whose load failed went on to agree() while the others waited in
  // this collective, and the job ended at comm.timeout_s (review, 2026-12-06).
  compress::GradientExchange::ServerResidualFold fold;
  Status folded;
  SPARQ_RETURN_IF_ERROR(
      run_control("resume: the two_phase server residual", [&](comm::Communicator& c) {
        auto result = exchange_->fold_loaded_server_residual(c);
        if (result.is_ok()) {
          fold = std::move(result).value();
        } else {
          folded = result.status();
        }
        return Status::ok();
      }));
  SPARQ_RETURN_IF_ERROR(agree(folded, what));
  if (is_root()) log_server_residual_fold(fold);
  return !fold.folded.empty();
}

}  // namespace sparq::train
