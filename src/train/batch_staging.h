// BatchStager: the device twin of host batches (train.device: cuda). Every field of a Batch
// (tokens, targets, masks, images, labels) is copied into pinned host memory and from there
// to device memory with cudaMemcpyAsync on the compute stream, so the copy is ordered before
// the forward that reads it and the host does not wait for it. Buffers are per slot (one per
// accumulation micro-batch, plus one for evaluation), allocated at the first batch and grown
// only when a larger one arrives, so steady-state steps allocate nothing.
//
// The staged batch also carries the host batch's count of counted targets (Batch::
// counted_targets), so a model that weighs micro-batches by them reads no targets back.
//
// Reuse: a slot's pinned buffers are rewritten at that slot's next stage(). An event recorded
// after the slot's copies is waited on first, so the host never overwrites pinned memory a
// copy is still reading. The step that read the slot has normally ended by then (the trainer
// reads the loss back, which waits for the stream) and the wait returns at once; the event
// keeps the rule from depending on that.
#pragma once

#include <array>
#include <memory>
#include <vector>

#include "core/buffer.h"
#include "core/exec_context.h"
#include "models/model.h"

namespace sparq::train {

class BatchStager {
 public:
  BatchStager(const ExecContext& context, int slots);
  ~BatchStager();

  // The device view of `host` in slot `slot`; valid until that slot is staged again.
  Batch stage(const Batch& host, int slot);

 private:
  static constexpr int kFields = 7;  // the Tensor fields of Batch
  struct Field {
    Buffer pinned, device;
  };
  struct CopiesDone;  // a CUDA event per slot (the .cpp), so this header stays CUDA-free
  Tensor stage_field(const Tensor& host, Field& field);

  const ExecContext& context_;
  std::vector<std::array<Field, kFields>> slots_;
  std::vector<std::unique_ptr<CopiesDone>> copies_done_;  // per slot; null until first staged
};

}  // namespace sparq::train
