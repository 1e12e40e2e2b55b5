// LmHeadSlot: the part of a language model's tied head that depends on the device, held once
// for GPT-2 and BERT (Note [Head slot]).
//
// Note [Head slot]
// ~~~~~~~~~~~~~~~~
// A language model keeps one [B*T, width] arena slot for its head from forward to backward,
// and which one depends on the device the head runs on:
//   * the fused head (model key fused_head, layers/tied_head_loss.h) runs on the CPU only. It
//     keeps no logits; the slot holds the head's input gradient (width n_embd), computed by
//     the training forward (Note [Eager head gradient], model.h), plus the head's own chunk
//     workspace;
//   * otherwise (fused_head=0, or any CUDA store) the head is materialised: the slot holds
//     the logits, then their gradient (width padded_vocab), for CrossEntropy.
// The store's device is known only at bind, so the slot is reserved then (and a CUDA bind
// drops the fused head, whose host workspace would go unused). Before bind, and in a dry run
// whose model is bound to the host for a CUDA run, activation_bytes() plans the slot of the
// device it accounts for (Model::activation_device()), which bytes_on() computes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "core/exec_context.h"
#include "layers/tied_head_loss.h"
#include "models/model.h"

namespace sparq {

class LmHeadSlot {
 public:
  // `fused`: the model key fused_head. The fused head is built now (its parameters are the
  // tied table's, so nothing is declared), and kept or dropped at bind.
  LmHeadSlot(std::string name, bool fused, const TiedHeadLoss::Config& config);

  // Whether the head runs fused on `device`.
  bool fused_on(Device device) const { return fused_ && device == Device::kCPU; }

  // Reserves the slot the context's device needs in `arena` (before arena.allocate, which a
  // model does once: Model::bind) and binds the fused head to the context, or drops it.
  // Returns fused_on(the context's device).
  bool bind(ActivationArena& arena, const ExecContext& ctx);

  // What the head adds to a model's activation memory on `device`, with the arena's other
  // slots: arena.bytes() with only `device`'s slot reserved, plus the fused head's workspace.
  std::size_t bytes_on(const ActivationArena& arena, Device device) const;

  // The fused head, after a CPU bind (null otherwise).
  TiedHeadLoss* fused_head() const { return head_.get(); }
  int dhead() const { return dhead_; }    // fused: the head's input gradient [rows, n_embd]
  int logits() const { return logits_; }  // materialised: logits [rows, padded_vocab]

 private:
  std::int64_t slot_numel(bool fused) const { return rows_ * (fused ? dim_ : padded_vocab_); }

  bool fused_;
  std::int64_t rows_, dim_, padded_vocab_;
  std::unique_ptr<TiedHeadLoss> head_;
  int dhead_ = -1, logits_ = -1;
};

}  // namespace sparq
