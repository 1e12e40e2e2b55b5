// DeviceTree: the tree strategy (gtopk_aggregator.h: gTop-k) for a compressed bucket of a store
// on a CUDA device, through the codec's fixed-capacity messages (topk's f32 lists, or lbs's
// 4-bit ones), with no host round trip:
//   1. a = g + e formed in the residual (a copy of g without error feedback); the rank's
//      local top-k list, encoded from a (read only);
//   2. binomial-tree rounds to rank 0 (NCCL send/recv of capacity-sized messages, k the same
//      on every rank): a receiver decodes its list and the peer's into a dense scratch (their
//      values summed on common indices) and re-encodes its top-k, the merge and re-selection
//      of the CPU;
//   3. rank 0's list is broadcast; every rank decodes it, which yields the global index set G
//      (cuda::sparse_decoded);
//   4. a[G] is allreduced (k floats); the bucket is 0 off G and the sum / P on G;
//   5. error feedback: a[G] = 0 in the residual (applied in full), the rest stays.
// The contexts, selections and sums are the CPU's, so the result is the CPU's bytes and
// floats, with two exceptions, stated. Step 4's allreduce sums in NCCL's order, which from 3
// ranks on may round differently from MPI's (as in every NCCL allreduce; with 2 ranks both
// add the same two values). The re-selection over the dense scratch is the CPU's too (Note
// [The tree re-selects from the dense sum], gtopk_aggregator.h). A world of one on a host
// communicator skips the collectives (Note [A world of one on NCCL]).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "comm/communicator.h"
#include "compress/compressor.h"
#include "compress/device_codec.h"
#include "core/buffer.h"
#include "core/exec_context.h"
#include "core/status.h"

namespace sparq::compress {

class DeviceTree {
 public:
  // Replaces the device bucket by the average of every rank's a on the global set G.
  // `density`: the compressor's (Compressor::density), for k; `invalid` and `own_decoded` as
  // DeviceAllgather::run's (own_decoded: a on G, this rank's applied contribution).
  // `merges_by_encode`: the compressor's capability (lbs): listed zeros are marked in each
  // merge (Note [Listed zeros], compress/quant_math.h).
  Status run(std::span<float> bucket, DeviceCodec& codec, double density, bool merges_by_encode,
             float* residual, comm::Communicator& comm, const EncodeContext& ctx,
             const ExecContext& exec, std::uint32_t* invalid, float* own_decoded = nullptr);
  // Bytes this rank sent in the last run: its list (once, if it sent one in the tree) and
  // its k values of the allreduce.
  std::size_t last_payload_bytes() const { return payload_bytes_; }

 private:
  Buffer message_, peer_, dense_, local_, values_, scratch_;
  std::size_t payload_bytes_ = 0;
};

}  // namespace sparq::compress
