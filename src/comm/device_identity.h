// DeviceIdentity: which physical GPU a rank has opened, so that two ranks of one host on the
// same GPU are refused before NCCL starts. NCCL refuses them too, but inside its init and with
// a message that names neither the ranks nor the cause; it happens when a launcher binds the
// same device to two processes or CUDA_VISIBLE_DEVICES is set wrongly per rank (each process
// then counts its devices from 0, so the ordinals say nothing: the device's UUID does).
// Every rank gathers every rank's identity (make_nccl_communicator, over the host bootstrap
// communicator) and reaches the same verdict, so no rank enters NCCL's init alone.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <utility>

namespace sparq::comm {

struct DeviceIdentity {
  std::int64_t host = 0;                     // a hash of the host name
  std::int64_t uuid_high = 0, uuid_low = 0;  // the device's 16-byte UUID
};

// A pair of ranks (a < b) on the same host and the same device, if any: the one with the
// lowest b, then the lowest a, so that every rank names the same pair.
inline std::optional<std::pair<int, int>> first_shared_device(
    std::span<const DeviceIdentity> ranks) {
  for (std::size_t b = 1; b < ranks.size(); ++b) {
    for (std::size_t a = 0; a < b; ++a) {
      if (ranks[a].host == ranks[b].host && ranks[a].uuid_high == ranks[b].uuid_high &&
          ranks[a].uuid_low == ranks[b].uuid_low) {
        return std::pair{static_cast<int>(a), static_cast<int>(b)};
      }
    }
  }
  return std::nullopt;
}

}  // namespace sparq::comm
