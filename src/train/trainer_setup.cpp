// Trainer set-up: building the model, store, optimizer and exchange from the config (build),
// connecting the buckets to their queue (connect_buckets), initial weights, the cross-rank
// checks of config and bucket plan, and the start-up description. The step loop, evaluation
// and tracing are in trainer.cpp, checkpoints in checkpointing.cpp and resume_agreement.cpp.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>

#include "comm/agree.h"
#include "comm/nccl_queue.h"
#include "core/threading.h"
#include "models/vgg.h"
#include "train/trainer.h"

namespace sparq::train {

Status Trainer::build(const Options& options) {
  const TrainConfig& c = config_;
  if (c.train.threads > 0) {
    caller_threads_ = max_threads();
    set_num_threads(c.train.threads);
  }
  trace_.set_step_base(1);  // spans carry the 0-based step index; the trace shows log numbers
  const bool lm = c.model.is_language_model();
  const std::int64_t rows = options.dry_run ? 1 : c.train.micro_batch;
  activation_scale_ = static_cast<double>(c.train.micro_batch) / static_cast<double>(rows);
  if (c.train.device == Device::kCUDA) {
    SPARQ_ASSIGN_OR_RETURN(local_, local_rank_from_environment(comm_.size()));
    // A dry run checks the config and prints the plan without opening a device, so it works
    // on a machine without a GPU.
    if (!options.dry_run) {
      SPARQ_RETURN_IF_ERROR(check_device_support(c));
      SPARQ_ASSIGN_OR_RETURN(context_, open_rank_device(local_, c.train.precision == "bf16"
                                                                    ? GemmPrecision::kBF16
                                                                    : GemmPrecision::kF32));
      stager_ = std::make_unique<BatchStager>(*context_, c.train.accumulation + 1);
    }
  }
  if (c.model.arch == ModelArch::kVgg) {
    SPARQ_RETURN_IF_ERROR(Vgg::check_training_batch(c.model, c.train.micro_batch));
  }
  SPARQ_ASSIGN_OR_RETURN(model_,
                         make_model(c.model, {rows, lm ? c.data.seq_len : 0, c.train.device}));
  model_->declare(store_);
  const auto dense_last = [&](const ParamSpec& s) { return c.comm.plan.is_dense(s); };
  store_.allocate(context(), dense_last);
  if (context().is_cuda()) {
    model_->declare(host_mirror_);
    host_mirror_.allocate(ExecContext::cpu(), dense_last);
  }
  // Identical on every rank: no broadcast needed.
  const bool init_from_file = !c.train.init_from.empty() && !options.resuming;
  if (!options.dry_run) {
    store_.initialize(c.train.seed);
    if (init_from_file) SPARQ_RETURN_IF_ERROR(load_initial_weights(false));
  } else if (std::error_code ec;
             init_from_file && std::filesystem::is_regular_file(c.train.init_from, ec)) {
    // A dry run checks the names, shapes and dtypes from the file's header (review,
    // 2026-12-07: a file for another model passed as valid, to fail when training began).
    SPARQ_RETURN_IF_ERROR(load_initial_weights(true));
  }
  model_->bind(store_);
  model_->set_dropout_seed(c.train.seed, static_cast<std::uint32_t>(comm_.rank()));

  const int slots = c.train.accumulation;
  std::vector<std::string> missing;
  for (const std::string& path : {c.data.train_path, c.data.eval_path}) {
    std::error_code ec;
    if (!path.empty() && !std::filesystem::exists(path, ec)) {
      // Unreadable is not missing: a dry run reads no data, so it is said here.
      if (ec) return Status::error("{}: cannot look up '{}': {}", c.where(), path, ec.message());
      missing.push_back(path);
    }
  }
  if (options.dry_run && !missing.empty()) {
    SPARQ_RETURN_IF_ERROR(check_source_feeds_model(c));
    data_info_.description = fmt::format("{} not found: needed before training (see README, "
                                         "\"Data\")", fmt::join(missing, ", "));
  } else {
    SPARQ_ASSIGN_OR_RETURN(train_data_, make_batch_source(c, true, comm_.rank(), comm_.size(),
                                                          slots, &data_info_));
    SPARQ_ASSIGN_OR_RETURN(eval_data_, make_batch_source(c, false, comm_.rank(), comm_.size(), 1));
    SPARQ_RETURN_IF_ERROR(check_initial_weights_fit_data());
    const std::uint64_t eval_steps = eval_data_->steps_per_epoch();
    if (comm_.rank() == 0 && eval_steps < static_cast<std::uint64_t>(c.train.eval_batches)) {
      spdlog::info(
          "evaluation: the eval set fills {} global batch(es) of {} x {} rank(s), the "
          "last one padded; each evaluation scores it once, in {} batch(es) per rank "
          "rather than train.eval_batches = {}",
          eval_steps, c.train.micro_batch, comm_.size(), eval_steps, c.train.eval_batches);
    }
  }
  batches_.resize(static_cast<std::size_t>(slots));

  SPARQ_ASSIGN_OR_RETURN(optimizer_, optim::make_optimizer(c.optim, store_));
  // Fields derived from others, not settings: set here from what they follow, so an edit of a
  // validated config in code (which effective_yaml does not write, so nothing revalidated it)
  // cannot reach the schedule or the plan unchecked (review, 2026-12-07).
  optim::LrScheduleConfig schedule = c.schedule;
  schedule.total_steps = c.train.steps;  // decays end with the run (config_sections.cpp)
  schedule_ = std::make_unique<optim::LrSchedule>(schedule);

  const std::int64_t tied_rows =
      model_->tied_embedding().empty() ? 0 : store_.entry(model_->tied_embedding()).spec.shape[0];
  SPARQ_ASSIGN_OR_RETURN(split_tied_, resolve_tied_split(c, tied_rows, comm_.size()));
  SPARQ_RETURN_IF_ERROR(c.comm.plan.check_patterns_match(store_).with_context(c.where()));
  comm::BucketPlanConfig plan_config = c.comm.plan;
  plan_config.isolated.clear();
  if (split_tied_) plan_config.isolated = {model_->tied_embedding()};
  auto plan = comm::BucketPlan::build(store_, model_->layers(), plan_config);
  if (!plan.is_ok()) return plan.status().with_context(c.where() + ": comm");
  plan_ = std::make_unique<comm::BucketPlan>(std::move(plan).value());
  compress::GradientExchangeConfig exchange_config = c.compress;
  exchange_config.never_sent_window = c.log.never_sent_window;  // a log key, measured there
  if (c.comm.plan_mode == "auto") {
    if (!options.plan_buckets) {
      return Status::error(
          "{}: comm.plan: auto is planned by run_training() and train_main() "
          "(the step simulator); this Trainer was created without a planner",
          c.where());
    }
    SPARQ_ASSIGN_OR_RETURN(BucketChoice planned, options.plan_buckets(c, *plan_, comm_.size()));
    if (planned.choice.size() != plan_->size()) {
      return Status::error("comm.plan: auto: {} choices for a plan of {} buckets",
                           planned.choice.size(), plan_->size());
    }
    exchange_config.bucket_choice = planned.choice;
    for (const std::string& line : planned.report) plan_choice_ += line + "\n";
    if (is_root()) spdlog::info("comm.plan: auto\n{}", plan_choice_);
  }
  auto exchange = compress::GradientExchange::create(store_, *plan_, exchange_config);
  if (!exchange.is_ok()) return exchange.status().with_context(c.where());
  exchange_ = std::move(exchange).value();

  comm::CommEngine::Options eo;
  eo.timeout_s = c.comm.timeout_s;
  eo.trace = &trace_;
  engine_ = std::make_unique<comm::CommEngine>(comm_, eo);
  return Status::ok();
}

Status Trainer::connect_buckets() {
  const TrainConfig& c = config_;
  comm::CommQueue* buckets = engine_.get();
  if (context().is_cuda() && (comm_.size() > 1 || comm::nccl_queue_built())) {
    // GPUs: NCCL exchanges the buckets on its own stream, gated on the compute stream
    // (comm/nccl_queue.h), with comm.emulate's link spent on that stream; one rank too, so
    // that its bucket and backward times are the GPU's. Created on the control engine's
    // thread, the only one that may call MPI now, as a collective every rank reaches after
    // agreeing that build() succeeded everywhere.
    const comm::NcclQueueOptions options{
        .timeout_s = c.comm.timeout_s, .trace = &trace_, .emulate = c.comm.emulate};
    Status started;
    SPARQ_RETURN_IF_ERROR(run_control("NCCL bootstrap", [&](comm::Communicator& host) {
      auto queue = comm::make_nccl_queue(host, *context_, options);
      if (queue.is_ok()) bucket_queue_ = std::move(queue).value();
      started = queue.status();
      return Status::ok();
    }));
    // One rank needs no collective: where NCCL cannot start (a sandboxed machine, a broken
    // install) it trains on the thread queue, as a build without NCCL does, and says why; an
    // emulated link needs NCCL's stream. Several ranks agreed on the failure: all refuse.
    if (!started.is_ok() && (comm_.size() > 1 || c.comm.emulate.ranks > 0)) return started;
    if (!started.is_ok() && is_root()) {
      spdlog::warn(
          "{}; one rank: the buckets go through the thread queue instead of NCCL's "
          "stream",
          started.message());
    }
    if (started.is_ok()) buckets = bucket_queue_.get();
  } else if (c.comm.emulate.ranks > 0 &&
             !(options_.dry_run && c.train.device == Device::kCUDA && comm::nccl_queue_built())) {
    // A dry run builds on the CPU (it opens no device), so a GPU config with NCCL built is
    // what the real run accepts (review, 2026-12-06: the wfbp configs were refused here).
    return Status::error(
        "{}: comm.emulate.ranks prices the GPU bucket queue's NCCL calls, and "
        "this run has none (train.device: {}, sparq built {} NCCL)",
        c.where(), device_name(c.train.device), comm::nccl_queue_built() ? "with" : "without");
  }
  scheduler_ = std::make_unique<comm::WfbpScheduler>(
      *plan_, *buckets, *exchange_, comm::WfbpScheduler::Options{.overlap = c.comm.overlap});
  stepper_ = std::make_unique<DataParallelStepper>(
      *model_, store_, *optimizer_, *schedule_, *scheduler_,
      DataParallelStepper::Options{.clip_norm = c.clip_norm,
                                   .norm_scope = !clips_locally(c) ? NormScope::kAggregate
                                                 : holds_buckets_for_local_norm(c)
                                                     ? NormScope::kLocalHeld
                                                     : NormScope::kLocalByRange,
                                   .split_tied_embedding = split_tied_,
                                   .control = engine_.get()},
      &trace_);
  return Status::ok();
}

Status Trainer::check_same_config() {
  Status s;
  const auto compare = [&](comm::Communicator& c) {
    s = comm::check_same_text(c, config_.resolved_yaml, "config",
                              "every rank must run the same config; check --set arguments and "
                              "files");
    return Status::ok();
  };
  SPARQ_RETURN_IF_ERROR(run_control("config check", compare));
  return s;
}

// An embedder makes one communicator and runs several configs on it (train/run.h): a run whose
// comm.emulate differs from the link the communicator was made with trained on the other link
// while its report named its own, and comm.backend: mpi on a one-process communicator trained
// alone (review, 2026-12-05). comm.allreduce and comm.mpi_wait are settled per run instead.
Status Trainer::check_communicator() const {
  const auto describe = [](const comm::EmulatedLink* link) {
    if (link == nullptr || !link->enabled()) return std::string("no emulated link");
    return fmt::format("an emulated link of {} Gbit/s and {} us a call", link->gbit_per_s,
                       link->latency_us);
  };
  const comm::EmulatedLink* made = comm_.emulated_link();
  const comm::EmulatedLink& wanted = config_.comm.emulate;
  const bool same_link = (made != nullptr && made->enabled())
                             ? wanted.enabled() && made->gbit_per_s == wanted.gbit_per_s &&
                                   made->latency_us == wanted.latency_us
                             : !wanted.enabled();
  if (!same_link) {
    return Status::error(
        "{}: comm.emulate asks for {}, but the communicator was made with {}; the link is fixed "
        "when it is made: make one for this config (train::make_communicator(config.comm))",
        config_.where(), describe(&wanted), describe(made));
  }
  const std::string backend = comm_.backend();
  if (config_.comm.backend == "mpi" && backend.rfind("mpi", 0) != 0) {
    return Status::error("{}: comm.backend: mpi, but the communicator is '{}'", config_.where(),
                         backend);
  }
  if (config_.comm.backend == "self" && comm_.size() > 1) {
    return Status::error("{}: comm.backend: self, but the communicator has {} ranks ('{}')",
                         config_.where(), comm_.size(), backend);
  }
  return Status::ok();
}

Status Trainer::check_same_plan() {
  if (config_.comm.plan_mode != "auto") return Status::ok();
  Status s;
  const auto compare = [&](comm::Communicator& c) {
    s = comm::check_same_text(c, plan_choice_, "comm.plan: auto's bucket choice",
                              "every rank must read the same comm.plan_profile");
    return Status::ok();
  };
  SPARQ_RETURN_IF_ERROR(run_control("bucket choice hash", compare));
  return s;
}

std::size_t Trainer::memory_estimate_bytes() const {
  const auto flat = static_cast<std::size_t>(store_.flat_numel()) * sizeof(float);
  std::size_t optimizer_copies = 0;
  if (config_.optim.name == "sgd") optimizer_copies = config_.optim.momentum > 0 ? 1 : 0;
  else optimizer_copies = 2;
  const std::size_t residual = exchange_->residual().size() * sizeof(float);
  return flat * (2 + optimizer_copies) + residual +
         static_cast<std::size_t>(static_cast<double>(model_->activation_bytes()) *
                                  activation_scale_);
}

std::string Trainer::describe() const {
  const TrainConfig& c = config_;
  std::string s;
  s += fmt::format("model:     {}{}\n", model_->summary(),
                   activation_scale_ != 1 ? " (dry run: built for one row)" : "");
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
  s += fmt::format("world:     {} rank(s), micro-batch {} x accumulation {} -> global batch {}\n",
                   comm_.size(), c.train.micro_batch, c.train.accumulation,
                   std::int64_t{c.train.micro_batch} * c.train.accumulation * comm_.size());
  if (c.comm.emulate.enabled()) {
    s += fmt::format(
        "link:      emulated, {} Gbit/s, {} us per call{}\n", c.comm.emulate.gbit_per_s,
        c.comm.emulate.latency_us,
        c.comm.emulate.ranks > 0
            ? fmt::format(", bucket collectives priced as in {} ranks", c.comm.emulate.ranks)
            : "");
  }
  s += fmt::format("optimizer: {} lr {} ({} schedule, warm-up {}), weight decay {}, clip {}{}, "
                   "communicates the {}{}\n",
                   c.optim.name, c.schedule.lr, c.schedule.kind, c.schedule.warmup_steps,
                   c.optim.weight_decay, c.clip_norm > 0 ? fmt::format("{}", c.clip_norm) : "off",
                   c.clip_norm > 0 ? (clips_locally(c) ? " (local)" : " (aggregate)") : "",
                   c.optim.communicate,
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
  if (c.schedule.warmup_steps >= c.train.steps) {
    s += fmt::format(
        "           note: optim.warmup_steps {} >= train.steps {}: the learning "
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
  s += "bucket plan:\n" +
       plan_->describe([this](int b) { return exchange_->compressor_name(b); }) + "\n";
  s += fmt::format("memory:    about {} per rank (parameters, gradients, optimizer state, "
                   "residual, activations)\n",
                   format_bytes(static_cast<double>(memory_estimate_bytes())));
  return s;
}

}  // namespace sparq::train
