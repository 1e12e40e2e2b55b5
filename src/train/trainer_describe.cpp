// The trainer's start-up description (describe, printed by the train command and a dry run)
// and its memory estimate: what a run will do, said before it does it, with a note for every
// setting that is valid but leaves part of what it asks for undone. Set-up is in
// trainer_setup.cpp.
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <thread>

#include "core/threading.h"
#include "train/trainer.h"

namespace sparq::train {

std::size_t Trainer::memory_estimate_bytes() const {
  const auto flat = static_cast<std::size_t>(store_.flat_numel()) * sizeof(float);
  std::size_t optimizer_copies = 0;
  if (config_.optim.name == "sgd")
    optimizer_copies = config_.optim.momentum > 0 ? 1 : 0;
  else
    optimizer_copies = 2;
  const std::size_t residual = exchange_->residual().size() * sizeof(float);
  return flat * (2 + optimizer_copies) + residual +
         planned_activation_bytes_.value_or(model_->activation_bytes());
}

std::string Trainer::describe() const {
  const TrainConfig& c = config_;
  std::string s;
  s += fmt::format("model:     {}{}\n", model_->summary(),
                   planned_activation_bytes_
                       ? fmt::format(" (dry run: built for one row; {} for B={})",
                                     format_bytes(static_cast<double>(*planned_activation_bytes_)),
                                     c.train.micro_batch)
                       : std::string());
  s += fmt::format("data:      {}\n", data_info_.description);
  if (data_info_.entropy_rate >= 0 && data_info_.loss_bound > data_info_.entropy_rate) {
    // Note [A row's achievable loss] (data/markov_source.h).
    const std::int64_t short_targets =
        std::min<std::int64_t>(data_info_.source_order - 1, c.data.seq_len);
    s += fmt::format(
        "           entropy rate {:.4f} nats/token; the lowest achievable loss on rows of {} "
        "tokens is {:.4f}: {} of a row see{} fewer than the order-{} source's {} tokens\n",
        data_info_.entropy_rate, c.data.seq_len, data_info_.loss_bound,
        short_targets == 1 ? std::string("the first target")
                           : fmt::format("the first {} targets", short_targets),
        short_targets == 1 ? "s" : "", data_info_.source_order, data_info_.source_order);
  } else if (data_info_.entropy_rate >= 0) {
    s += fmt::format("           entropy rate {:.4f} nats/token: the lowest achievable loss\n",
                     data_info_.entropy_rate);
  }
  if (!c.train.init_from.empty() && options_.resuming) {
    s += fmt::format("init:      weights from the checkpoint (train.init_from {} not read)\n",
                     c.train.init_from);
  } else if (!c.train.init_from.empty()) {
    // A dry run reads only the file's header (build); a missing file is said, as a missing
    // data file is (review, 2026-12-05: it passed as valid without a word).
    std::error_code ec;
    const bool found = std::filesystem::is_regular_file(c.train.init_from, ec);
    s += fmt::format("init:      weights from {} (train.init_format {}){}\n", c.train.init_from,
                     c.train.init_format,
                     !found             ? ": not found, needed before training"
                     : options_.dry_run ? ": names and shapes checked"
                                        : "");
  }
  if (c.train.device == Device::kCUDA) {
    s += fmt::format("device:    {}; local rank {} of {} ({})\n",
                     context_ ? context_->describe()
                              : fmt::format("cuda, one GPU per rank, {} GEMMs (not opened "
                                            "in a dry run)",
                                            c.train.precision == "bf16" ? "bf16" : "f32"),
                     local_.rank, local_.size, local_.source);
    const Status support = check_device_support(c);
    if (!support.is_ok()) s += "           note: training refused: " + support.message() + "\n";
#if !SPARQ_HAS_CUDA
    // The dry run said "configuration valid" and nothing else, where training refuses at
    // once (open_rank_device) (review, 2026-12-06). A note of its own: the config is fine.
    s += "           note: this sparq was built without CUDA (sparq_info: 'CUDA: not built'), "
         "so training would be refused here; the config is checked all the same\n";
#endif
  }
  // The threads too: plain mpirun without OMP_NUM_THREADS gave every rank all the cores, and
  // nothing said so (review, 2026-12-08).
  const int threads = max_threads();
  s += fmt::format(
      "world:     {} rank(s) x {} thread(s), micro-batch {} x accumulation {} -> global batch "
      "{}\n",
      comm_.size(), threads, c.train.micro_batch, c.train.accumulation,
      std::int64_t{c.train.micro_batch} * c.train.accumulation * comm_.size());
  if (c.train.device == Device::kCPU) {
    const Result<LocalRank> local = local_rank_from_environment(comm_.size());
    const unsigned cores = std::thread::hardware_concurrency();
    if (local.is_ok() && cores > 0 &&
        static_cast<unsigned>(local->size) * static_cast<unsigned>(threads) > cores) {
      s += fmt::format(
          "           note: {} rank(s) on this node x {} thread(s) = {} > its {} cores: they "
          "take turns; set OMP_NUM_THREADS (or train.threads) to {} (scripts/mpirun.sh does)\n",
          local->size, threads, local->size * threads, cores,
          std::max(1u, cores / static_cast<unsigned>(local->size)));
    }
  }
  if (c.comm.emulate.enabled()) {
    s += fmt::format(
        "link:      emulated, {} Gbit/s, {} us per call{}\n", c.comm.emulate.gbit_per_s,
        c.comm.emulate.latency_us,
        c.comm.emulate.ranks > 0
            ? fmt::format(", bucket collectives priced as in {} ranks", c.comm.emulate.ranks)
            : "");
  }
  s += fmt::format(
      "optimizer: {} lr {} ({} schedule, warm-up {}), weight decay {}, clip {}{}, "
      "communicates the {}{}\n",
      c.optim.name, c.schedule.lr, c.schedule.kind, c.schedule.warmup_steps, c.optim.weight_decay,
      c.clip_norm > 0 ? fmt::format("{}", c.clip_norm) : "off",
      c.clip_norm > 0 ? (clips_locally(c) ? " (local)" : " (aggregate)") : "", c.optim.communicate,
      c.optim.communicate == "momentum"
          ? fmt::format(" (variance frozen after {} steps)", c.optim.freeze_steps)
          : "");
  for (const std::string& unread : c.optim.unread_settings())
    s += "           note: " + unread + "\n";
  for (const std::string& unread : c.schedule.unread_settings())
    s += "           note: " + unread + "\n";
  for (const std::string& unread : unread_settings(c)) s += "           note: " + unread + "\n";
  // Only two_phase reads compress.server_compression, and a bucket's strategy is known once the
  // exchange is built (compress.aggregation: auto, comm.plan: auto): it was ignored without a
  // word for every other strategy (review, 2026-12-07).
  const std::vector<std::string> strategies = exchange_->aggregation_names();
  if (c.compress.aggregator.server_compression !=
          compress::AggregatorOptions{}.server_compression &&
      std::find(strategies.begin(), strategies.end(), "two_phase") == strategies.end()) {
    s += "           note: compress.server_compression is ignored: only two_phase reads it, and "
         "no bucket of this run aggregates by two_phase\n";
  }
  // Settings that are valid but leave part of what they ask for undone in this run (the
  // decays refuse the first; these schedules and the freeze would pass without a word).
  // Step W - 1 of a W-step warm-up runs at lr itself (lr * W / W): only a longer one never
  // gets there (the note named W = train.steps too; review, 2026-12-07).
  if (c.schedule.warmup_steps > c.train.steps) {
    s += fmt::format(
        "           note: optim.warmup_steps {} > train.steps {}: the learning "
        "rate never reaches optim.lr\n",
        c.schedule.warmup_steps, c.train.steps);
  }
  if (c.optim.communicate == "momentum" && c.optim.freeze_steps >= c.train.steps) {
    s += fmt::format(
        "           note: optim.freeze_steps {} >= train.steps {}: the variance "
        "never freezes, and every step is dense Adam\n",
        c.optim.freeze_steps, c.train.steps);
  }
  std::string params;
  for (const auto& [k, v] : c.compress.compress.params) params += fmt::format(" {}={}", k, v);
  if (c.compress.compress.compression_off()) {
    // Error feedback and the warm-up do nothing without a compressor: saying "error feedback
    // on" suggested a residual that is never kept (new-user review, 2026-12-06).
    s += fmt::format("compress:  none (every bucket averaged in f32), overlap {}\n",
                     c.comm.overlap ? "on" : "off");
  } else {
    // The density warm-up too: it showed only in the resolved config (review, 2026-12-07).
    const std::string density_warmup =
        c.compress.density_warmup_steps > 0
            ? fmt::format(", density warm-up {} steps", c.compress.density_warmup_steps)
            : "";
    s += fmt::format("compress:  {}{}, error feedback {}, dense warm-up {} steps{}, overlap {}\n",
                     c.compress.compress.name, params, c.compress.error_feedback ? "on" : "off",
                     c.compress.dense_warmup_steps, density_warmup, c.comm.overlap ? "on" : "off");
    // As the freeze note above: valid, but no step of this run compresses (review,
    // 2026-12-06: said nothing, and the plan below still named the compressor).
    if (c.compress.dense_warmup_steps >= c.train.steps) {
      s += fmt::format(
          "           note: compress.dense_warmup_steps {} >= train.steps {}: no step "
          "compresses, every bucket is averaged dense in f32\n",
          c.compress.dense_warmup_steps, c.train.steps);
    }
  }
  if (c.compress.compress.name == "dgc") {
    // optim.momentum must be 0 with dgc (it applies momentum itself), so whatever dgc does not
    // compress trains by plain SGD: say so rather than leave it to be found in the losses.
    s += "           dgc applies momentum only where it compresses: dense buckets (below) and "
         "the dense warm-up steps train without momentum\n";
    if (c.optim.name != "sgd") {
      // DGC's momentum correction is SGD's momentum moved before compression; under Adam it
      // is a second momentum on top of Adam's (docs/compress.md).
      s += fmt::format(
          "           note: dgc's momentum ({}) stacks under {}'s own first moment; DGC is "
          "defined for SGD (optim.name: sgd)\n",
          c.compress.compress.params.count("momentum") ? c.compress.compress.params.at("momentum")
                                                       : "0.9",
          c.optim.name);
    }
  }
  if (!model_->tied_embedding().empty()) {
    s += fmt::format("tied:      {} {}\n", model_->tied_embedding(),
                     split_tied_ ? "split: the head's share is exchanged as soon as the head's "
                                   "backward ends, the lookup's rows exactly at the end"
                                 : "whole: exchanged once backward ends");
  }
  s += "bucket plan:\n" + plan_->describe([this](int b) { return exchange_->compressor_name(b); }) +
       "\n";
  s += fmt::format(
      "memory:    about {} per rank (parameters, gradients, optimizer state, "
      "residual, activations)\n",
      format_bytes(static_cast<double>(memory_estimate_bytes())));
  return s;
}

}  // namespace sparq::train
