// BatchStager: the device twin of host batches (train.device: cuda). Every field of a Batch
// (tokens, targets, masks, images, labels) is copied into pinned host memory and from there
// to device memory with cudaMemcpyAsync on the compute stream, so the copy is ordered before
// the forward that reads it and the host does not wait for it. Buffers are per slot (one per
// accumulation micro-batch, plus one for evaluation), allocated at the first batch and grown
// only when a larger one arrives, so steady-state steps allocate nothing.
//
// Reuse: a slot's pinned buffer is rewritten at that slot's next stage(); by then the step
// that read it has ended (the trainer reads the loss back, which waits for the stream).
#pragma once

#include <array>
#include <vector>

#include "core/buffer.h"
#include "core/exec_context.h"
#include "models/model.h"

namespace sparq::train {

class BatchStager {
 public:
  BatchStager(const ExecContext& context, int slots);

  // The device view of `host` in slot `slot`; valid until that slot is staged again.
  Batch stage(const Batch& host, int slot);

 private:
  static constexpr int kFields = 7;  // the Tensor fields of Batch
  struct Field {
    Buffer pinned, device;
  };
  Tensor stage_field(const Tensor& host, Field& field);

  const ExecContext& context_;
  std::vector<std::array<Field, kFields>> slots_;
};

}  // namespace sparq::train
