// GradientExchange's checkpointed state (gradient_exchange.h): each compressed bucket's
// compressor and aggregator state as named byte tensors, in plan order, and the merges an
// elastic resume applies to them. A GPU twin that keeps the compressor's state on the device
// (DeviceCodec::has_state, DeviceLowRank's factors) saves and loads it in the CPU
// compressor's format.
#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>

#include "comm/gather.h"
#include "compress/byte_io.h"
#include "compress/gradient_exchange.h"
#include "compress/two_phase_aggregator.h"

namespace sparq::compress {
namespace {

// Whether a saved state fits bucket `bucket` as rank `rank` of `world` holds it. The owners'
// merge hooks (state_merge.h) are what knows each state's shape (one float per bucket
// position, one per position of the rank's region, opaque), and merging a rank's own state
// into the same bucket of the same world checks exactly that: its result is discarded. Without
// this, a state saved for another bucket (another comm.bucket_mb, another world size) was
// taken as it came: dgc applied one tensor's momentum to another and zero-filled the rest,
// two_phase aborted at the first exchange.
Status check_fits(StateMerge& merge, const comm::Bucket& bucket, int rank, int world,
                  std::span<const std::uint8_t> bytes) {
  const Status fits = merge.add(rank, static_cast<std::size_t>(bucket.range.offset),
                                static_cast<std::size_t>(bucket.range.count), bytes);
  if (fits.is_ok()) return fits;
  return Status::error(
      "the saved state does not fit bucket {} ({} floats at offset {}, rank {} of {}): {} "
      "(saved with another bucket plan, comm.bucket_mb or comm.first_bucket_mb, or another "
      "world size?)",
      bucket.index, bucket.range.count, bucket.range.offset, rank, world, fits.message());
}

bool two_phase(const auto& slot) {
  return slot.aggregator && slot.aggregator->name() == aggregation_name(Aggregation::kTwoPhase);
}

}  // namespace

std::vector<StateTensor> GradientExchange::save_state() {
  saved_.resize(2 * buckets_.size());
  std::vector<StateTensor> out;
  for (std::size_t b = 0; b < buckets_.size(); ++b) {
    const PerBucket& slot = buckets_[b];
    if (!slot.compressor) continue;
    Message& compressor = saved_[2 * b];
    Message& aggregator = saved_[2 * b + 1];
    // A twin that keeps the compressor's state on the device saves it in the same format.
    if (slot.device_low_rank) {
      slot.device_low_rank->save_state(compressor);  // the factors, from the device
    } else if (slot.device_codec && slot.device_codec->has_state()) {
      slot.device_codec->save_state(compressor);
    } else {
      slot.compressor->save_state(compressor);
    }
    if (slot.device_codec && device_two_phase_ &&
        slot.aggregator->name() == aggregation_name(Aggregation::kTwoPhase)) {
      device_two_phase_->save_state(b, aggregator);  // the device's server residual
    } else {
      slot.aggregator->save_state(aggregator);
    }
    for (auto [part, bytes] : {std::pair{"compressor", &compressor}, {"aggregator", &aggregator}}) {
      const auto n = static_cast<std::int64_t>(bytes->size());
      out.push_back({fmt::format("bucket{}.{}", b, part), Tensor(bytes->data(), DType::kU8, {n})});
    }
  }
  return out;
}

Status GradientExchange::load_state(const std::vector<StateTensor>& state, int rank, int world,
                                    const std::vector<std::string>& saved_aggregations) {
  unapplied_server_.assign(buckets_.size(), {});
  std::size_t next = 0;
  for (std::size_t b = 0; b < buckets_.size(); ++b) {
    PerBucket& slot = buckets_[b];
    if (!slot.compressor) continue;
    const comm::Bucket& bucket = plan_.buckets()[b];
    const MergeShape shape{static_cast<std::size_t>(bucket.range.offset),
                           static_cast<std::size_t>(bucket.range.count), world, world, rank};
    for (const char* part : {"compressor", "aggregator"}) {
      const std::string want = fmt::format("bucket{}.{}", b, part);
      if (next >= state.size() || state[next].name != want) {
        // The checkpoint compressed other buckets (or none): a resume checks the buckets'
        // kinds first where the checkpoint records them (check_bucket_kinds); this is the
        // guard for older ones, said in the user's terms rather than as a name mismatch.
        return Status::error(
            "compression state: bucket {} is compressed here, but the saved state has {} "
            "in its place (saved with another comm.plan choice, bucket plan or compressor?)",
            b, next < state.size() ? "'" + state[next].name + "'" : std::string("nothing"));
      }
      const Tensor& t = state[next].tensor;
      const std::span<const std::uint8_t> bytes(t.data<std::uint8_t>(), t.nbytes());
      const bool compressor = std::string_view(part) == "compressor";
      // State of another strategy means nothing to this one (two_phase's server residual to
      // the tree): name both, rather than the loader's "unexpected saved state".
      if (!compressor && !bytes.empty() && b < saved_aggregations.size() &&
          saved_aggregations[b] != slot.aggregator->name()) {
        return Status::error(
            "{}: {} bytes of state saved by the {} aggregation, which this run's {} "
            "cannot take (resume with the strategy it was saved with: compress.aggregation, "
            "or comm.plan as it was)",
            want, bytes.size(), saved_aggregations[b], slot.aggregator->name());
      }
      const std::unique_ptr<StateMerge> merge =
          compressor ? slot.compressor->state_merge(shape) : slot.aggregator->state_merge(shape);
      SPARQ_RETURN_IF_ERROR(check_fits(*merge, bucket, rank, world, bytes).with_context(want));
      Status loaded;
      if (compressor) {
        if (slot.device_low_rank) {
          loaded = slot.device_low_rank->load_state(bytes);
        } else {
          loaded = slot.device_codec && slot.device_codec->has_state()
                       ? slot.device_codec->load_state(bytes)
                       : slot.compressor->load_state(bytes);
        }
      } else if (two_phase(slot) && !config_.aggregator.server_compression) {
        // Note [A server residual no server sends]: held for fold_loaded_server_residual().
        loaded = load_floats(bytes, unapplied_server_[b], "two_phase server residual");
      } else {
        loaded = slot.device_codec && device_two_phase_ && two_phase(slot)
                     ? device_two_phase_->load_state(b, bytes)
                     : slot.aggregator->load_state(bytes);
      }
      SPARQ_RETURN_IF_ERROR(loaded.with_context(want));
      ++next;
    }
  }
  if (next != state.size()) {
    return Status::error(
        "compression state: {} unexpected entries from '{}' on (was the "
        "checkpoint written with another bucket plan or compressor?)",
        state.size() - next, state[next].name);
  }
  return Status::ok();
}

std::vector<NamedStateMerge> GradientExchange::state_merges(int old_world, int new_rank,
                                                            int new_world) const {
  std::vector<NamedStateMerge> out;
  for (const comm::Bucket& bucket : plan_.buckets()) {
    const PerBucket& slot = buckets_[bucket.index];
    if (!slot.compressor) continue;
    const MergeShape shape{static_cast<std::size_t>(bucket.range.offset),
                           static_cast<std::size_t>(bucket.range.count), old_world, new_world,
                           new_rank};
    out.push_back({fmt::format("bucket{}.compressor", bucket.index), "compressor",
                   fmt::format("{} compressor state", slot.compressor->name()), shape,
                   slot.compressor->state_merge(shape)});
    out.push_back({fmt::format("bucket{}.aggregator", bucket.index), "aggregator",
                   fmt::format("{} aggregator state", slot.aggregator->name()), shape,
                   slot.aggregator->state_merge(shape)});
  }
  return out;
}

bool GradientExchange::holds_loaded_server_residual() const {
  for (const std::vector<float>& region : unapplied_server_) {
    for (float s : region) {
      if (s != 0.0f) return true;
    }
  }
  return false;
}

Result<GradientExchange::ServerResidualFold> GradientExchange::fold_loaded_server_residual(
    comm::Communicator& comm) {
  ServerResidualFold out;
  if (config_.aggregator.server_compression) return out;
  const std::size_t p = static_cast<std::size_t>(comm.size());
  const std::span<float> residual = this->residual();
  std::vector<std::uint8_t> recv;
  std::vector<std::size_t> counts, displs;
  for (std::size_t b = 0; b < buckets_.size(); ++b) {
    const PerBucket& slot = buckets_[b];
    if (!slot.compressor || !two_phase(slot)) continue;
    // Every rank takes part for every two_phase bucket, whatever it loaded (Note
    // [Rank-identical collective order], communicator.h): an empty region sends nothing.
    const std::vector<float> mine =
        b < unapplied_server_.size() ? std::move(unapplied_server_[b]) : std::vector<float>();
    const comm::Bucket& bucket = plan_.buckets()[b];
    const auto n = static_cast<std::size_t>(bucket.range.count);
    // A sanity bound, the whole bucket: a region's exact size is checked below, as a Status
    // (a checkpoint's residual for another region size is an error, not a fault).
    comm::allgather_bytes(comm,
                          {reinterpret_cast<const std::uint8_t*>(mine.data()), 4 * mine.size()},
                          std::nullopt, 4 * n, recv, counts, displs);
    const auto offset = static_cast<std::size_t>(bucket.range.offset);
    const bool folds = has_error_feedback(b) && !residual.empty();
    double mass = 0;
    for (std::size_t j = 0; j < p; ++j) {
      if (counts[j] == 0) continue;  // nothing saved (before the first exchange): zeros
      const std::size_t begin = two_phase_region_begin(n, p, j);
      const std::size_t len = two_phase_region_begin(n, p, j + 1) - begin;
      if (counts[j] != 4 * len) {
        return Status::error(
            "bucket {}: rank {} loaded a two_phase server residual of {} bytes "
            "for its region of {} floats",
            b, j, counts[j], len);
      }
      for (std::size_t i = 0; i < len; ++i) {
        float s;
        std::memcpy(&s, recv.data() + displs[j] + 4 * i, 4);
        mass += std::fabs(static_cast<double>(s));
        if (folds) residual[offset + begin + i] += s;
      }
    }
    if (mass == 0) continue;
    (folds ? out.folded : out.dropped).push_back(b);
    (folds ? out.folded_mass : out.dropped_mass) += mass;
  }
  unapplied_server_.clear();
  return out;
}

}  // namespace sparq::compress
