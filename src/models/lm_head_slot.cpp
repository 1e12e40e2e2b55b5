#include "models/lm_head_slot.h"

#include <utility>

namespace sparq {

LmHeadSlot::LmHeadSlot(std::string name, bool fused, const TiedHeadLoss::Config& config)
    : fused_(fused), rows_(config.max_rows), dim_(config.dim), padded_vocab_(config.vocab) {
  if (fused_) head_ = std::make_unique<TiedHeadLoss>(std::move(name), config);
}

bool LmHeadSlot::bind(ActivationArena& arena, const ExecContext& ctx) {
  const bool fused = fused_on(ctx.device());
  int& slot = fused ? dhead_ : logits_;
  if (slot < 0) slot = arena.reserve(slot_numel(fused));
  if (fused) {
    head_->bind_context(ctx);
  } else {
    head_.reset();  // Note [Head slot]: a CUDA store has no use for the host workspace
  }
  return fused;
}

std::size_t LmHeadSlot::bytes_on(const ActivationArena& arena, Device device) const {
  const bool fused = fused_on(device);
  // Note [Head slot]: a fused head dropped by a CUDA bind never plans for the CPU again, as
  // the model's activation_device() is CUDA from then on.
  return arena.bytes() - arena.slot_bytes(dhead_) - arena.slot_bytes(logits_) +
         ActivationArena::bytes_for(slot_numel(fused)) +
         (fused && head_ ? head_->workspace_bytes() : 0);
}

}  // namespace sparq
