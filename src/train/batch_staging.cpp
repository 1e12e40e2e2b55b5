#include "train/batch_staging.h"

#include <cstring>

#include "core/check.h"

#if SPARQ_HAS_CUDA
#include "core/cuda/cuda_check.h"
#include "core/cuda/cuda_handles.h"
#include "core/cuda/device_resources.h"
#endif

namespace sparq::train {

#if SPARQ_HAS_CUDA
struct BatchStager::CopiesDone {
  cuda::Event event;
};
#else
struct BatchStager::CopiesDone {};
#endif

BatchStager::BatchStager(const ExecContext& context, int slots)
    : context_(context),
      slots_(static_cast<std::size_t>(slots)),
      copies_done_(static_cast<std::size_t>(slots)) {
  SPARQ_CHECK(context.is_cuda(), "BatchStager stages batches for a CUDA context only");
}

BatchStager::~BatchStager() = default;

Tensor BatchStager::stage_field(const Tensor& host, Field& field) {
  if (host.empty()) return {};
  SPARQ_CHECK(host.is_cpu(), "staging a batch field that is already on {}",
              device_name(host.device()));
  const std::size_t bytes = host.nbytes();
  if (field.device.size() < bytes) {
    // The old buffers may still be read: the device one by kernels of earlier steps, the
    // pinned one by its copy (the slot's event covers the copy only). Drain the stream before
    // freeing them, as every growing scratch does (static review, 2026-12-06; the trainer's
    // per-step read-backs drain it today).
#if SPARQ_HAS_CUDA
    CUDA_CHECK(cudaStreamSynchronize(context_.cuda().stream.get()));
#endif
    field.pinned = Buffer::pinned(bytes);
    field.device = Buffer::device(bytes);
  }
#if SPARQ_HAS_CUDA
  if (bytes > 0) {
    std::memcpy(field.pinned.data(), host.raw(), bytes);
    CUDA_CHECK(cudaMemcpyAsync(field.device.data(), field.pinned.data(), bytes,
                               cudaMemcpyHostToDevice, context_.cuda().stream.get()));
  }
#endif
  return Tensor(field.device.data(), host.dtype(), host.shape(), Device::kCUDA);
}

Batch BatchStager::stage(const Batch& host, int slot) {
  SPARQ_CHECK(slot >= 0 && slot < static_cast<int>(slots_.size()), "batch slot {} of {}", slot,
              slots_.size());
  std::array<Field, kFields>& f = slots_[static_cast<std::size_t>(slot)];
#if SPARQ_HAS_CUDA
  std::unique_ptr<CopiesDone>& done = copies_done_[static_cast<std::size_t>(slot)];
  if (done != nullptr) done->event.synchronize();  // the slot's last copies have read its memory
#endif
  Batch d;
  d.tokens = stage_field(host.tokens, f[0]);
  d.targets = stage_field(host.targets, f[1]);
  d.attention_mask = stage_field(host.attention_mask, f[2]);
  d.token_types = stage_field(host.token_types, f[3]);
  d.nsp_labels = stage_field(host.nsp_labels, f[4]);
  d.images = stage_field(host.images, f[5]);
  d.labels = stage_field(host.labels, f[6]);
  // Counted here, on the host, so the step's weighing (Note [Token-weighted micro-batches],
  // data_parallel.h) does not read the device targets back: B x T ints, a pass the copy
  // into pinned memory has just made anyway.
  d.counted_targets = host.counted_targets;
  if (d.counted_targets < 0 && !host.targets.empty() && host.targets.dtype() == DType::kI32) {
    d.counted_targets = count_counted_targets(host.targets);
  }
#if SPARQ_HAS_CUDA
  if (done == nullptr) done = std::make_unique<CopiesDone>();
  done->event.record(context_.cuda().stream.get());
#endif
  return d;
}

}  // namespace sparq::train
