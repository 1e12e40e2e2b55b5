#include "compress/device_nonfinite.h"

#include "core/check.h"

#if SPARQ_HAS_CUDA
#include <cuda_runtime_api.h>

#include "compress/cuda/nonfinite_cuda.h"
#include "core/cuda/cuda_check.h"
#include "core/cuda/cuda_handles.h"
#endif

namespace sparq::compress {

#if SPARQ_HAS_CUDA
namespace {
cudaStream_t as_stream(void* stream) { return static_cast<cudaStream_t>(stream); }
}  // namespace

struct DeviceNonfiniteGuard::Events {
  cuda::Event copied;
};

DeviceNonfiniteGuard::DeviceNonfiniteGuard(std::size_t buckets)
    : buckets_(buckets),
      device_(Buffer::device(4 * buckets + 4, /*zeroed=*/true)),
      host_(Buffer::pinned(4 * buckets + 4, /*zeroed=*/true)),
      events_(std::make_unique<Events>()) {}

DeviceNonfiniteGuard::~DeviceNonfiniteGuard() = default;

void DeviceNonfiniteGuard::begin_step(std::int64_t step, void* stream) {
  step_ = step;
  CUDA_CHECK(cudaMemsetAsync(device_.data(), 0, device_.size(), as_stream(stream)));
}

void DeviceNonfiniteGuard::check(std::size_t bucket, float* g, std::size_t n,
                                 const SpanStats* input, void* stream) {
  std::uint32_t* word = device_.as<std::uint32_t>() + bucket;
  if (input != nullptr) {
    cuda::flag_nonfinite_sum(input, word, as_stream(stream));
  } else {
    cuda::flag_nonfinite(g, n, word, as_stream(stream));
  }
  cuda::zero_if_flagged(g, n, word, as_stream(stream));
}

void DeviceNonfiniteGuard::agree(comm::Communicator& comm, bool collective,
                                 std::span<float> last_bucket, void* stream) {
  const auto s = as_stream(stream);
  auto* count = reinterpret_cast<std::int32_t*>(device_.as<std::uint32_t>() + buckets_);
  cuda::count_flags(device_.as<std::uint32_t>(), buckets_, count, s);
  CUDA_CHECK(cudaMemcpyAsync(host_.data(), device_.data(), 4 * buckets_, cudaMemcpyDeviceToHost,
                             s));  // this rank's own words, before the sum replaces the count
  if (collective) comm.allreduce(count, count, 1, DType::kI32, comm::ReduceOp::kSum);
  cuda::poison_if_counted(last_bucket.data(), last_bucket.size(), count, s);
  CUDA_CHECK(
      cudaMemcpyAsync(host_.as<std::uint32_t>() + buckets_, count, 4, cudaMemcpyDeviceToHost, s));
  events_->copied.record(s);
  rank_ = comm.rank();
  pending_ = true;
}

DeviceNonfiniteGuard::Verdict DeviceNonfiniteGuard::read() {
  Verdict v;
  if (!pending_) return v;
  pending_ = false;
  events_->copied.synchronize();
  const std::uint32_t* words = host_.as<std::uint32_t>();
  for (std::size_t b = 0; b < buckets_; ++b) {
    if (words[b] != 0) v.buckets.push_back(static_cast<int>(b));
  }
  v.all_ranks = static_cast<int>(words[buckets_]);
  v.step = step_;
  v.rank = rank_;
  return v;
}
#else
// Without CUDA no store lives on a device, so none of this is reached.
struct DeviceNonfiniteGuard::Events {};
DeviceNonfiniteGuard::DeviceNonfiniteGuard(std::size_t) { SPARQ_FATAL("built without CUDA"); }
DeviceNonfiniteGuard::~DeviceNonfiniteGuard() = default;
void DeviceNonfiniteGuard::begin_step(std::int64_t, void*) {}
void DeviceNonfiniteGuard::check(std::size_t, float*, std::size_t, const SpanStats*, void*) {}
void DeviceNonfiniteGuard::agree(comm::Communicator&, bool, std::span<float>, void*) {}
DeviceNonfiniteGuard::Verdict DeviceNonfiniteGuard::read() { return {}; }
#endif

}  // namespace sparq::compress
