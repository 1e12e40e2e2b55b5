// Trainer set-up: building the model, store, optimizer and exchange from the config (build),
// connecting the buckets to their queue (connect_buckets), initial weights and the cross-rank
// checks of config and bucket plan. The start-up description is in trainer_describe.cpp, the
// step loop, evaluation and tracing in trainer.cpp, checkpoints in checkpointing.cpp and
// resume_agreement.cpp.
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
  SPARQ_ASSIGN_OR_RETURN(model_, make_model(c.model, {.micro_batch = rows,
                                                      .seq_len = lm ? c.data.seq_len : 0,
                                                      .device = c.train.device,
                                                      .plan_only = options.dry_run}));
  if (rows != c.train.micro_batch) {
    // Note [A dry run's activations]: the model of one row, and a throwaway plan of two rows.
    const std::size_t one = model_->activation_bytes();
    SPARQ_ASSIGN_OR_RETURN(const std::unique_ptr<Model> two,
                           make_model(c.model, {.micro_batch = 2,
                                                .seq_len = lm ? c.data.seq_len : 0,
                                                .device = c.train.device,
                                                .plan_only = true}));
    const std::size_t per_row = std::max(two->activation_bytes(), one) - one;
    planned_activation_bytes_ = one + static_cast<std::size_t>(c.train.micro_batch - 1) * per_row;
  }
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

}  // namespace sparq::train
