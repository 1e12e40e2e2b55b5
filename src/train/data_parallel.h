// One data-parallel training step, as DESIGN.md's "One iteration" describes it:
//
//   for each micro-batch: forward -> backward, whose per-layer callback reports gradient
//   readiness to the WFBP scheduler (only the last micro-batch communicates)
//   -> wait_all (every bucket averaged in place across ranks)
//   -> global-norm clipping on the aggregated gradient -> optimizer step -> zero gradients
//
// Local clipping (NormScope::kLocalHeld, optim.clip_scope: local; what the optimizer modes that
// send a momentum or an update use): the norm of THIS rank's gradient is only known once
// backward ends, so readiness is held back: the last micro-batch's ranges are reported to the
// scheduler, in backward order, after the gradient has been clipped. Communication then does not
// overlap backward (the cost is in the step's exposed time). The step is still skipped on a
// non-finite AGGREGATE, which every rank sees alike. Without clipping (optim.clip_norm 0) on
// the CPU nothing is held: the local norm is summed over the ranges as they are reported
// (NormScope::kLocalByRange).
//
// The split tied embedding (Options::split_tied_embedding, Note [Tied embedding split] in
// models/model.h): on the last micro-batch the model reports the tied table ready after the
// head's backward and keeps the lookup's share as rows; once backward ends the stepper submits
// their exact exchange as the scheduler's tail task, which runs after every bucket (so after
// the table's own buckets) and adds the averaged rows into the table's averaged gradient
// before wait_all() returns. Earlier micro-batches of an accumulation run unsplit.
//
// Gradient accumulation: micro-batch losses are means, so the summed gradients of A
// micro-batches are scaled by 1/A (layer by layer, on the compute thread, just before a layer
// is reported ready) and the step's gradient is the mean over all A * P micro-batches, each
// weighed by its counted targets where their number varies (the Note below).
//
// Note [Token-weighted micro-batches]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A micro-batch's loss is a mean over its counted targets (not kIgnoreIndex), and with the
// 1/A above and the exchange's 1/P every micro-batch weighs 1/(P A). That is one worker's
// gradient over the whole batch (DESIGN.md: P workers equal one with P times the batch) only
// when every micro-batch counts as many targets, as GPT-2's next tokens and VGG's images do in
// training. BERT's masked-LM targets are its masked positions, whose number varies (random
// masks, short sequences): micro-batches of 14 and 2 masked tokens weighed equally moved the
// gradient 117% away from the single batch's. So where the model says the counts vary
// (Model::weighs_counted_targets), micro-batch i of rank r, with c_ri counted targets, seeds
// its loss gradient with
//     s_ri = P A c_ri / C,   C = the sum of c over every micro-batch of every rank in the step,
// and after 1/A and 1/P the step's gradient is the mean over all C targets, one worker's.
// C is one 8-byte allreduce per step before the first forward (the caller fetched every
// micro-batch already), on Options::control: the trainer's control engine, whose thread alone
// may call the communicator (a GPU run's bucket queue is NCCL's, for device buffers). A GPU
// run's counts were taken on the host when its batches were staged (Batch::counted_targets),
// so counting reads nothing back from the device. The seed
// is a host scalar the model hands its loss layer (Model::set_target_grad_scale: the CPU,
// fused-head and CUDA cross-entropies all take it as their dloss), so no kernel changes. Other
// models get no collective and no scale: their numbers are bit-identical to the equal
// weights. BERT's NSP term (a mean over rows, as many in every micro-batch) keeps equal
// weights in the gradient. StepResult::loss weighs this rank's micro-batch losses by their
// counts too (sum c_ri loss_ri / sum c_ri: its masked-token mean; with NSP the NSP term is
// weighed alike, and a micro-batch with no masked token drops out with its NSP term), NaN when
// none counts a target, NSP or not: equal weights averaged a micro-batch with no target in as 0,
// and a step with none anywhere logged "loss 0.0000", read as a perfect model (review, 2026-12-07).
//
// The caller chooses train or eval mode (model.set_training) before calling step().
//
// Non-finite aggregated gradient norm (what a non-finite loss leads to): the update is skipped
// (parameters and optimizer state untouched, gradients zeroed) and reported in the result;
// the caller decides when to abort. The norm is the test, not the loss: every rank sees the
// same aggregated norm, so every rank skips the same steps, where a loss is each rank's own.
//
// Trace (when a recorder is given and enabled): per micro-batch "forward <i>" and
// "backward <i>" spans, one "backward <layer>" span per layer, a zero-length
// "enqueue bucket <b>" span when each bucket was submitted, and "optimizer".
//
// Ownership: borrows everything; all of it must outlive the stepper.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "comm/comm_queue.h"
#include "comm/sparse_rows.h"
#include "comm/wfbp_scheduler.h"
#include "core/trace.h"
#include "models/model.h"
#include "optim/lr_schedule.h"
#include "optim/optimizer.h"

namespace sparq::train {

struct StepResult {
  std::int64_t step = 0;
  float loss = 0;         // mean of the micro-batch losses on this rank (each a mean over
                          // its own targets), weighed by their counts where the model weighs
                          // counted targets (BERT), NaN there when none counts a target
                          // (Note [Token-weighted micro-batches])
  double grad_norm = 0;   // before clipping: of the aggregate, or of the local gradient
                          // with local clipping
  double lr = 0;
  bool skipped = false;   // non-finite loss or gradient: no update was applied
  double forward_ms = 0, backward_ms = 0, optimizer_ms = 0, step_ms = 0;
  comm::StepCommStats comm;  // exposed time, hidden fraction, bytes, per-bucket timings
  std::size_t tied_rows_bytes = 0;  // this rank's message of the split tied table's rows
};

// Whose gradient norm a step measures, logs as grad_norm and clips by (see above).
enum class NormScope {
  kAggregate,    // the aggregated gradient's, after communication
  kLocalHeld,    // this rank's, before communication: readiness is held until backward ends
  kLocalByRange  // this rank's, summed range by range as reported, nothing held; CPU store
                 // and no clipping only (train::holds_buckets_for_local_norm is false)
};

class DataParallelStepper {
 public:
  struct Options {
    double clip_norm = 0.0;  // <= 0: no clipping (the norm is still measured)
    NormScope norm_scope = NormScope::kAggregate;
    bool split_tied_embedding = false;  // see above; needs a model with a tied embedding
    // Runs the step's count of targets (Note [Token-weighted micro-batches]); needed by a
    // model whose counts vary, unused otherwise. Must outlive the stepper.
    comm::CommQueue* control = nullptr;
  };

  DataParallelStepper(Model& model, ParamStore& store, optim::Optimizer& optimizer,
                      const optim::LrSchedule& schedule, comm::WfbpScheduler& scheduler,
                      Options options, TraceRecorder* trace = nullptr);

  // Runs step `step` over the given micro-batches (at least one).
  StepResult step(std::int64_t step, std::span<const Batch> micro_batches);

 private:
  // Scales the lookup's rows like every reported range and submits their exchange.
  void submit_tied_rows(float scale);
  // Waits for the step's buckets (and tail) and takes their statistics into r.
  void finish_communication(StepResult& r);
  // A CUDA store whose bucket queue gated the compute stream: clip, update and zeroing are
  // enqueued without a host wait, the update guarded on the device against a non-finite norm.
  void guarded_optimizer_step(std::int64_t step, StepResult& r);
  void* compute_stream() const;  // the store's CUDA compute stream (nullptr on the CPU)
  // Note [Token-weighted micro-batches]: target_scales_ for the step's micro-batches. Returns
  // the bytes its count moved.
  comm::ByteCounters weigh_micro_batches(std::int64_t step, std::span<const Batch> micro_batches);

  Model& model_;
  ParamStore& store_;
  optim::Optimizer& optimizer_;
  const optim::LrSchedule& schedule_;
  comm::WfbpScheduler& scheduler_;
  Options options_;
  TraceRecorder* trace_;
  // Local clipping: the last micro-batch's ranges held back, in readiness order (a member, so
  // its capacity is reused and the step allocates nothing once warmed up).
  std::vector<ParamRange> held_;
  comm::SparseRowExchange tied_rows_;  // the split tied embedding's exchange (tail task)
  ParamRange tied_range_;             // the tied table in the flat layout
  // s_ri per micro-batch (Note [Token-weighted micro-batches]); empty: equal weights.
  std::vector<double> target_scales_;
  std::vector<std::int64_t> target_counts_;  // this rank's c_ri, for the step's loss
};

}  // namespace sparq::train
