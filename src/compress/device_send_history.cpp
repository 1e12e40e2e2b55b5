#include "compress/device_send_history.h"

#include "core/check.h"

#if SPARQ_HAS_CUDA
#include <cuda_runtime_api.h>

#include <vector>

#include "compress/cuda/send_history_cuda.h"
#include "compress/send_window.h"
#include "core/cuda/cuda_check.h"
#include "core/cuda/cuda_handles.h"
#endif

namespace sparq::compress {

#if SPARQ_HAS_CUDA
struct DeviceSendHistory::Events {
  std::vector<cuda::Event> copied;
};

DeviceSendHistory::DeviceSendHistory(std::size_t flat_numel, std::size_t buckets,
                                     std::size_t max_bucket_floats)
    : last_sent_(Buffer::device(flat_numel * sizeof(std::uint32_t) + 4, /*zeroed=*/true)),
      scratch_(Buffer::device(max_bucket_floats * sizeof(float) + 4)),
      device_counts_(Buffer::device(buckets * sizeof(unsigned long long) + 8, true)),
      host_counts_(Buffer::pinned(buckets * sizeof(unsigned long long) + 8, true)),
      events_(std::make_unique<Events>()) {
  events_->copied.resize(buckets);
}

DeviceSendHistory::~DeviceSendHistory() = default;

void DeviceSendHistory::record(std::size_t bucket, std::size_t offset, std::size_t n,
                               std::uint32_t stamp, std::uint32_t window, void* stream) {
  const auto s = static_cast<cudaStream_t>(stream);
  std::uint32_t* last = last_sent_.as<std::uint32_t>() + offset;
  unsigned long long* count = device_counts_.as<unsigned long long>() + bucket;
  cuda::stamp_sent(last, decoded_scratch(), n, stamp, s);
  cuda::count_unsent(last, n, window_cutoff(stamp, window), count, s);
  CUDA_CHECK(cudaMemcpyAsync(host_counts_.as<unsigned long long>() + bucket, count, sizeof(*count),
                             cudaMemcpyDeviceToHost, s));
  events_->copied[bucket].record(s);
}

std::size_t DeviceSendHistory::read(std::size_t bucket) const {
  events_->copied[bucket].synchronize();
  return static_cast<std::size_t>(host_counts_.as<unsigned long long>()[bucket]);
}
#else
// Without CUDA no store lives on a device, so none of this is reached.
struct DeviceSendHistory::Events {};
DeviceSendHistory::DeviceSendHistory(std::size_t, std::size_t, std::size_t) {
  SPARQ_FATAL("built without CUDA");
}
DeviceSendHistory::~DeviceSendHistory() = default;
void DeviceSendHistory::record(std::size_t, std::size_t, std::size_t, std::uint32_t, std::uint32_t,
                               void*) {}
std::size_t DeviceSendHistory::read(std::size_t) const { return 0; }
#endif

}  // namespace sparq::compress
