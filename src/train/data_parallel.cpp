#include "train/data_parallel.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "core/fault.h"
#include "core/ops.h"
#include "core/tensor_copy.h"
#include "core/timer.h"

#if SPARQ_HAS_CUDA
#include "core/cuda/device_resources.h"
#endif

namespace sparq::train {
namespace {

// When the compute thread handed each bucket to the engine, as zero-length spans on the
// compute row: submission during backward is what WFBP controls, while the engine's own
// "bucket <i>" spans start whenever its thread gets to run them.
void record_submissions(TraceRecorder* trace, const comm::StepCommStats& stats) {
  if (trace == nullptr || !trace->enabled() || !stats.communicated) return;
  for (const comm::BucketTiming& b : stats.buckets) {
    trace->record({fmt::format("enqueue bucket {}", b.index), "comm.enqueue", b.enqueue_us,
                   b.enqueue_us, TraceLane::kCompute, stats.step});
  }
}

}  // namespace

DataParallelStepper::DataParallelStepper(Model& model, ParamStore& store,
                                         optim::Optimizer& optimizer,
                                         const optim::LrSchedule& schedule,
                                         comm::WfbpScheduler& scheduler, Options options,
                                         TraceRecorder* trace)
    : model_(model),
      store_(store),
      optimizer_(optimizer),
      schedule_(schedule),
      scheduler_(scheduler),
      options_(options),
      trace_(trace) {
  SPARQ_CHECK(options_.norm_scope != NormScope::kLocalByRange || store_.device() == Device::kCPU,
              "NormScope::kLocalByRange is the CPU's local scope: not on a GPU store (its "
              "local norm is read once, at the end)");
  if (options_.split_tied_embedding) {
    SPARQ_CHECK(options_.norm_scope == NormScope::kAggregate,
                "the tied embedding split needs aggregate clipping: local "
                "clipping needs the whole local gradient before anything is sent");
    tied_range_ = store_.entry(model_.tied_embedding()).range();
  }
  SPARQ_CHECK(!model_.weighs_counted_targets() || options_.control != nullptr,
              "{}: weighing micro-batches by their targets needs Options::control, the queue "
              "that counts them across ranks (Note [Token-weighted micro-batches])",
              model_.config().spec);
}

comm::ByteCounters DataParallelStepper::weigh_micro_batches(std::int64_t step,
                                                            std::span<const Batch> micro_batches) {
  // Note [Token-weighted micro-batches]: the counts first, then s_ri = P A c_ri / C.
  std::int64_t total = 0;
  for (const Batch& b : micro_batches) {
    const std::int64_t counted = model_.counted_target_count(b);
    target_counts_.push_back(counted);
    target_scales_.push_back(static_cast<double>(counted));
    total += counted;
  }
  int ranks = 1;
  comm::ByteCounters moved;
  const Status s = options_.control->run("count targets", step, [&](comm::Communicator& c) {
    const comm::ByteCounters before = c.bytes();
    c.allreduce(&total, &total, 1, DType::kI64, comm::ReduceOp::kSum);
    moved = c.bytes_since(before);
    ranks = c.size();
    return Status::ok();
  });
  SPARQ_CHECK(s.is_ok(), "counting the step's targets failed: {}", s.message());
  // No counted target anywhere: every loss gradient is zero already, whatever its scale.
  const double micro_batches_in_step =
      static_cast<double>(ranks) * static_cast<double>(micro_batches.size());
  for (double& scale : target_scales_) {
    scale = total > 0 ? micro_batches_in_step * scale / static_cast<double>(total) : 1.0;
  }
  return moved;
}

void DataParallelStepper::submit_tied_rows(float scale) {
  RowSparseGrad& rows = model_.tied_lookup_grad();
  if (scale != 1.0f) {
    for (float& v : rows.values) v *= scale;
  }
  scheduler_.submit_tail("tied embedding rows", [this](comm::Communicator& c) {
    const RowSparseGrad& r = model_.tied_lookup_grad();
    tied_rows_.add_average(c, r.rows, r.values, r.dim, store_.grads() + tied_range_.offset,
                           tied_range_.count / r.dim);
    return Status::ok();
  });
}

StepResult DataParallelStepper::step(std::int64_t step, std::span<const Batch> micro_batches) {
  SPARQ_CHECK(!micro_batches.empty(), "step {} has no micro-batch", step);
  StepResult r;
  r.step = step;
  r.lr = schedule_.lr_at(step);
  Stopwatch step_watch;
  const auto count = static_cast<std::int64_t>(micro_batches.size());
  const float accumulation_scale = 1.0f / static_cast<float>(count);
  double loss_sum = 0.0, weighted_loss_sum = 0.0;
  held_.clear();
  target_scales_.clear();
  target_counts_.clear();
  // The count's allreduce blocks before the forward: exposed communication, which the comm
  // metrics left out while step_ms held it (review, 2026-12-07).
  double count_ms = 0;
  comm::ByteCounters count_bytes;
  if (model_.weighs_counted_targets()) {
    const Stopwatch count_watch;
    count_bytes = weigh_micro_batches(step, micro_batches);
    count_ms = count_watch.millis();
  }
  double local_squares = 0.0;  // NormScope::kLocalByRange: this rank's, in report order
  const bool held = options_.norm_scope == NormScope::kLocalHeld;
  const bool by_range = options_.norm_scope == NormScope::kLocalByRange;
  const auto report_ready = [&](const ParamRange& range) {
    if (by_range && range.count > 0) {
      const Tensor g = store_.grad_range(range);
      local_squares += ops::sum_squares(g.data<float>(), static_cast<std::size_t>(range.count));
    }
    // Fault point "gradient.nonfinite" (docs/reliability.md): a NaN in this rank's gradient,
    // which Note [Non-finite local gradients] (gradient_exchange.h) must keep out of the
    // residual and the messages.
    if (range.count > 0 && fault::point("gradient.nonfinite", step)) {
      // x * NaN = NaN, on the store's device (a GPU store's gradient never leaves it).
      scale_in_place(store_.grad_range({range.offset, 1}), std::numeric_limits<float>::quiet_NaN(),
                     store_.context());
    }
    optimizer_.before_communication(step, range);
    scheduler_.on_grads_ready(range);
  };

  for (std::int64_t i = 0; i < count; ++i) {
    const bool last = i + 1 == count;
    // Each micro-batch draws its own dropout masks: keyed by step * count + i, which is the
    // step itself without accumulation (DropoutKey::kStepShift leaves 2^24 keys).
    model_.set_step(static_cast<std::uint64_t>(step * count + i));
    scheduler_.begin_step(step, /*communicate=*/last);
    if (options_.split_tied_embedding) model_.set_tied_split(last);
    // Before the forward: the fused head takes its gradient there (Note [Eager head gradient]).
    if (!target_scales_.empty()) {
      model_.set_target_grad_scale(static_cast<float>(target_scales_[i]));
    }
    Stopwatch watch;
    {
      ScopedTrace span(trace_, fmt::format("forward {}", i), "forward", step);
      const double loss = model_.forward_for_backward(micro_batches[i]);
      loss_sum += loss;
      if (!target_counts_.empty()) {
        weighted_loss_sum += loss * static_cast<double>(target_counts_[i]);
      }
    }
    r.forward_ms += watch.millis();
    watch.restart();
    {
      ScopedTrace span(trace_, fmt::format("backward {}", i), "backward", step);
      // Each layer's own span runs from the previous layer's readiness to its own.
      std::int64_t layer_start = now_us();
      model_.backward([&](const GradReady& ready) {
        if (trace_ && trace_->enabled()) {
          const std::int64_t now = now_us();
          trace_->record({"backward " + ready.layer->name, "backward.layer", layer_start, now,
                          TraceLane::kCompute, step});
          layer_start = now;
        }
        for (const ParamRange& range : *ready.ranges) {
          if (last && count > 1) {
            scale_in_place(store_.grad_range(range), accumulation_scale, store_.context());
          }
          if (!last) {
            scheduler_.on_grads_ready(range);
          } else if (held) {
            held_.push_back(range);
          } else {
            report_ready(range);
          }
        }
      });
      if (last && held) {
        r.grad_norm = optimizer_.clip_local_gradient(options_.clip_norm);
        for (const ParamRange& range : held_) report_ready(range);
      }
      if (last && by_range) r.grad_norm = std::sqrt(local_squares);
    }
    r.backward_ms += watch.millis();
    scheduler_.on_backward_done();
    if (last && options_.split_tied_embedding) submit_tied_rows(accumulation_scale);
  }
  if (!target_scales_.empty()) model_.set_target_grad_scale(1.0f);  // a backward after the step
  if (target_counts_.empty()) {
    r.loss = static_cast<float>(loss_sum / static_cast<double>(count));
  } else {  // Note [Token-weighted micro-batches]: by the counts, NaN without any
    std::int64_t counted = 0;
    for (const std::int64_t c : target_counts_) counted += c;
    r.loss = counted > 0 ? static_cast<float>(weighted_loss_sum / static_cast<double>(counted))
                         : std::numeric_limits<float>::quiet_NaN();
  }
  // On a GPU whose buckets run on streams, the optimizer's kernels wait for the exchange on
  // the compute stream, not the host (guarded_optimizer_step).
  if (store_.context().is_cuda() && optimizer_.on_device() && scheduler_.gate(compute_stream())) {
    guarded_optimizer_step(step, r);
    r.comm.add_exposed_control(count_ms, count_bytes);
    r.step_ms = step_watch.millis();
    return r;
  }
  finish_communication(r);
  r.comm.add_exposed_control(count_ms, count_bytes);

  Stopwatch opt_watch;
  {
    ScopedTrace span(trace_, "optimizer", "optimizer", step);
    // On CUDA the scale stays on the device and step() folds it in (Optimizer::clip_grad_norm).
    double aggregate_norm = 0;
    if (options_.norm_scope != NormScope::kAggregate) {
      aggregate_norm = optimizer_.clip_grad_norm(0.0);  // measure only: the skip decision
    } else {
      r.grad_norm = aggregate_norm = optimizer_.clip_grad_norm(options_.clip_norm);
    }
    // Only the aggregate decides: it is the same on every rank (a rank's non-finite gradient
    // makes it NaN everywhere, Note [Non-finite local gradients], gradient_exchange.h), while
    // r.loss is this rank's own, and a skip decided by it could leave the replicas apart.
    r.skipped = !std::isfinite(aggregate_norm);
    if (!r.skipped) optimizer_.step(r.lr);
    store_.zero_grads();
  }
  r.optimizer_ms = opt_watch.millis();
  r.step_ms = step_watch.millis();
  return r;
}

void DataParallelStepper::finish_communication(StepResult& r) {
  // A task that threw ends the job as a failed one does, through the fatal handler (which
  // aborts every rank under MPI). Unwinding out of the trainer ended this rank alone, by
  // std::terminate, and its peers waited in the step's last collective (review, 2026-12-06).
  Status comm_status;
  try {
    comm_status = scheduler_.wait_all();
  } catch (const std::exception& e) {
    SPARQ_FATAL("communication failed: {}", e.what());
  } catch (...) {
    SPARQ_FATAL("communication failed: a task threw something that is not a std::exception");
  }
  SPARQ_CHECK(comm_status.is_ok(), "communication failed: {}", comm_status.message());
  r.comm = scheduler_.step_stats();
  if (r.comm.tail) r.tied_rows_bytes = tied_rows_.last_payload_bytes();
  record_submissions(trace_, r.comm);
}

void DataParallelStepper::guarded_optimizer_step(std::int64_t step, StepResult& r) {
  Stopwatch opt_watch;
  ScopedTrace span(trace_, "optimizer", "optimizer", step);
  // The clip and the update are enqueued behind the buckets' end events; the update skips
  // itself on the device when the aggregate's norm is not finite (Optimizer::step's guard),
  // the host's skip rule below, decided without waiting for it first.
  const bool local = options_.norm_scope != NormScope::kAggregate;
  optimizer_.clip_grad_norm_on_device(local ? 0.0 : options_.clip_norm);
  optimizer_.step(r.lr);
  store_.zero_grads();
  // The wait for the exchange is exposed communication (r.comm), not optimizer time.
  Stopwatch comm_watch;
  finish_communication(r);
  const double waited_ms = comm_watch.millis();
  const double aggregate_norm = optimizer_.finish_guarded_step();
  if (!local) r.grad_norm = aggregate_norm;
  r.skipped = !std::isfinite(aggregate_norm);
  r.optimizer_ms = std::max(0.0, opt_watch.millis() - waited_ms);
}

void* DataParallelStepper::compute_stream() const {
#if SPARQ_HAS_CUDA
  return store_.context().cuda().stream.get();
#else
  return nullptr;
#endif
}

}  // namespace sparq::train
