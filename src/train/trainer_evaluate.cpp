// Trainer::evaluate: one pass (at most) over the evaluation set on every rank, the ranks' exact
// sums gathered (Note [Exact evaluation sums], eval_sums.h), and the report of the result.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <span>

#include "core/check.h"
#include "core/timer.h"
#include "train/eval_sums.h"
#include "train/trainer.h"

namespace sparq::train {

namespace {

std::span<const std::int32_t> ids_of(const Tensor& t) {
  return {t.data<std::int32_t>(), static_cast<std::size_t>(t.numel())};
}
}  // namespace

EvalMetrics Trainer::evaluate() {
  const bool lm = config_.model.is_language_model();
  const bool mlm = config_.model.arch == ModelArch::kBert;
  const Status shared = share_model_state("evaluation");
  SPARQ_CHECK(shared.is_ok(), "{}", shared.message());
  model_->set_training(false);
  const data::LoaderState start{config_.train.seed, 0, 0};
  SPARQ_CHECK(eval_data_->restore(start).is_ok(), "cannot rewind the evaluation data");
  // This rank's sums (Note [Exact evaluation sums], eval_sums.h).
  EvalSums mine;
  const data::MarkovChain* source = data_info_.source.get();
  // At most one pass over the eval set (sampler.h): no item is scored twice.
  const std::uint64_t batches = std::min<std::uint64_t>(
      static_cast<std::uint64_t>(config_.train.eval_batches), eval_data_->steps_per_epoch());
  for (std::uint64_t i = 0; i < batches; ++i) {
    Batch b = eval_data_->next(0);
    if (source) {  // on the host batch, before any staging; counted like score.count below
      mine.source_loss += source->log_loss_sum(ids_of(b.tokens), ids_of(b.targets), kIgnoreIndex);
    }
    if (stager_) b = stager_->stage(b, static_cast<int>(batches_.size()));
    const float loss = model_->forward_for_evaluation(b);
    const Model::Score score = model_->score(b);
    // The loss over the counted targets only (BERT's NSP term is trained on, not evaluated).
    mine.add_batch(static_cast<double>(loss) - score.unscored_loss, score.count, score.correct);
  }
  EvalSums all;
  const Status s = engine_->run("eval allgather", step_, [&](comm::Communicator& cm) {
    all = world_eval_sums(cm, mine);
    return Status::ok();
  });
  SPARQ_CHECK(s.is_ok(), "evaluation sums failed: {}", s.message());
  EvalMetrics e;
  e.step = step_;
  e.count = all.count;
  const double n = static_cast<double>(all.count);
  if (all.count == 0) {
    // Nothing scored (BERT rows with no masked token): a loss of 0 read as a perfect model
    // (review, 2026-12-07). NaN is null in the metrics and "n/a" in the log (EvalMetrics).
    e.loss = std::numeric_limits<double>::quiet_NaN();
    if (is_root()) {
      spdlog::warn("evaluation at step {} scored no target: {}; its loss and accuracy are unknown",
                   step_,
                   mlm ? fmt::format("no token of the evaluated rows is masked (data.mask_prob {}, "
                                     "data.seq_len {}, train.eval_batches {})",
                                     config_.data.mask_prob, config_.data.seq_len,
                                     config_.train.eval_batches)
                       : std::string("the evaluated batches hold no counted target"));
    }
    return e;
  }
  e.loss = all.loss / n;
  if (lm && !mlm) e.perplexity = std::exp(e.loss);
  if (mlm || !lm) e.accuracy = static_cast<double>(all.correct) / n;
  if (source) e.source_loss = all.source_loss / n;
  return e;
}

EvalMetrics Trainer::evaluate_and_report() {
  const Stopwatch watch;
  EvalMetrics e = evaluate();
  e.eval_ms = watch.millis();
  if (is_root()) {
    spdlog::info("{}", format_eval(e));
    metrics_.write(to_json(e));
  }
  if (options_.on_eval) options_.on_eval(e);
  return e;
}

}  // namespace sparq::train
