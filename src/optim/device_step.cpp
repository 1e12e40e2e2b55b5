#include "optim/device_step.h"

#include <cmath>

#include "core/check.h"
#include "core/tensor_copy.h"

#if SPARQ_HAS_CUDA
#include <cuda_runtime.h>

#include "core/cuda/cuda_check.h"
#include "core/cuda/device_resources.h"
#include "optim/cuda/global_norm_cuda.h"
#include "optim/cuda/optimizer_cuda.h"
#include "optim/update_math.h"
#endif

namespace sparq::optim {

std::vector<std::uint8_t> decay_chunk_table(const ParamStore& store) {
  constexpr std::int64_t kChunk = ParamStore::kAlignFloats;
  SPARQ_CHECK(store.allocated() && store.flat_numel() % kChunk == 0,
              "the decay table needs an allocated store whose layout is whole chunks of {} floats",
              kChunk);
  std::vector<std::uint8_t> table(static_cast<std::size_t>(store.flat_numel() / kChunk), 0);
  for (const ParamEntry& e : store.entries()) {
    SPARQ_CHECK(e.offset % kChunk == 0, "tensor '{}' starts at {}, not on a {}-float boundary",
                e.spec.name, e.offset, kChunk);
    const std::int64_t end_chunk = (e.offset + e.numel + kChunk - 1) / kChunk;
    for (std::int64_t c = e.offset / kChunk; c < end_chunk; ++c) {
      table[static_cast<std::size_t>(c)] = e.spec.weight_decay ? 1 : 0;
    }
  }
  return table;
}

#if SPARQ_HAS_CUDA

static_assert(cuda::kDecayChunkFloats == ParamStore::kAlignFloats,
              "the kernels' decay chunk is the store's alignment");

namespace {
cudaStream_t compute_stream(const ParamStore& store) {
  return store.context().cuda().stream.get();
}
}  // namespace

DeviceStep::DeviceStep(const ParamStore& store)
    : store_(store),
      partials_(Buffer::device(sizeof(double) * cuda::kNormBlocks)),
      result_(Buffer::device(2 * sizeof(double))),
      norm_host_(Buffer::pinned(sizeof(double), true)) {
  SPARQ_CHECK(store.allocated() && store.device() == Device::kCUDA,
              "DeviceStep needs an allocated CUDA ParamStore");
  const std::vector<std::uint8_t> table = decay_chunk_table(store);
  decay_table_ = Buffer::device(table.size());
  if (!table.empty()) {
    CUDA_CHECK(cudaMemcpyAsync(decay_table_.data(), table.data(), table.size(),
                               cudaMemcpyHostToDevice, compute_stream(store)));
  }
  // Also covers copies the store made on the legacy stream, which a non-blocking compute
  // stream does not wait for; and `table` may go out of scope after this.
  CUDA_CHECK(cudaDeviceSynchronize());
}

DeviceStep::~DeviceStep() = default;

Buffer DeviceStep::zeroed_state(std::int64_t floats) const {
  const auto bytes = static_cast<std::size_t>(floats) * sizeof(float);
  Buffer buffer = Buffer::device(bytes);
  if (bytes > 0) {
    CUDA_CHECK(cudaMemsetAsync(buffer.data(), 0, bytes, compute_stream(store_)));
  }
  return buffer;
}

double DeviceStep::clip_grad_norm(double max_norm) {
  cudaStream_t stream = compute_stream(store_);
  double* norm = result_.as<double>();
  float* scale = reinterpret_cast<float*>(norm + 1);
  cuda::global_norm(store_.grads(), store_.flat_numel(), max_norm, partials_.as<double>(), norm,
                    scale, stream);
  CUDA_CHECK(cudaMemcpyAsync(norm_host_.data(), norm, sizeof(double), cudaMemcpyDeviceToHost,
                             stream));
  CUDA_CHECK(cudaStreamSynchronize(stream));
  const double value = *norm_host_.as<double>();
  // No scale to fold in when it is 1 (max_norm <= 0), nor after a non-finite norm: the caller
  // skips that step, and the scale (0) must not reach a later step() without a clip of its
  // own (optimizer.h: such a step uses the gradient as it is).
  scale_pending_ = max_norm > 0.0 && std::isfinite(value);
  return value;
}

double DeviceStep::clip_in_place(double max_norm) {
  // Measured only (max_norm 0): the scale is applied here, from the host, not by step().
  cuda::global_norm(store_.grads(), store_.flat_numel(), 0.0, partials_.as<double>(),
                    result_.as<double>(), reinterpret_cast<float*>(result_.as<double>() + 1),
                    compute_stream(store_));
  const double norm = read_norm();
  // The CPU's rule and rounding (optim/clip.cpp): a scale of 1 is skipped, and the product is
  // the f32 x * scale that ops::scale stores.
  const float scale = clip_scale(norm, max_norm);
  if (scale != 1.0f) {
    scale_in_place(store_.grad_range({0, store_.flat_numel()}), scale, store_.context());
  }
  return norm;
}

const float* DeviceStep::take_grad_scale() {
  if (!scale_pending_) return nullptr;
  scale_pending_ = false;
  return reinterpret_cast<const float*>(result_.as<double>() + 1);
}

void DeviceStep::clip_grad_norm_on_device(double max_norm) {
  double* norm = result_.as<double>();
  cuda::global_norm(store_.grads(), store_.flat_numel(), max_norm, partials_.as<double>(), norm,
                    reinterpret_cast<float*>(norm + 1), compute_stream(store_));
  scale_pending_ = max_norm > 0.0;
  guard_pending_ = true;
}

const double* DeviceStep::take_guard() {
  if (!guard_pending_) return nullptr;
  guard_pending_ = false;
  return result_.as<double>();
}

double DeviceStep::read_norm() {
  cudaStream_t stream = compute_stream(store_);
  CUDA_CHECK(cudaMemcpyAsync(norm_host_.data(), result_.data(), sizeof(double),
                             cudaMemcpyDeviceToHost, stream));
  CUDA_CHECK(cudaStreamSynchronize(stream));
  return *norm_host_.as<double>();
}

#else  // A CUDA store cannot exist without CUDA: these are never reached.

DeviceStep::DeviceStep(const ParamStore& store) : store_(store) {
  SPARQ_FATAL("DeviceStep needs sparq built with CUDA");
}
DeviceStep::~DeviceStep() = default;
Buffer DeviceStep::zeroed_state(std::int64_t) const { SPARQ_FATAL("built without CUDA"); }
double DeviceStep::clip_grad_norm(double) { SPARQ_FATAL("built without CUDA"); }
const float* DeviceStep::take_grad_scale() { return nullptr; }
void DeviceStep::clip_grad_norm_on_device(double) { SPARQ_FATAL("built without CUDA"); }
double DeviceStep::clip_in_place(double) { SPARQ_FATAL("built without CUDA"); }
const double* DeviceStep::take_guard() { return nullptr; }
double DeviceStep::read_norm() { SPARQ_FATAL("built without CUDA"); }

#endif

}  // namespace sparq::optim
