// Measurements that fill a MachineProfile (sim/profile.h) from this machine: the real model's
// forward and per-layer backward, the real AdamW step, the real compressors, and a ping-pong
// on a real link. apps/sim_profile.cpp runs them; docs/simulate.md, "Machine profiles", says
// how and what was measured here.
//
// What is timed, and why that way:
//   compute  the model is built as the trainer builds it (make_model, declare, allocate on
//            the CPU, initialize, bind) and runs forward_for_backward + backward(on_ready) on
//            a synthetic batch of the right shape (the step time does not depend on the token
//            values). A layer's backward_ms is the time from the previous readiness report
//            (the first: from the start of backward) to its own, which is what the WFBP
//            scheduler sees: a bucket can start once its last layer has been reported. The
//            tied table is NOT split (Note [Tied embedding split], models/model.h): wte is
//            reported last and its time is the lookup's backward; a simulator of the split
//            reports it right after the head instead (its gradient is already complete then).
//            Each figure is the median over `repeats` runs after one warm-up.
//   codecs   encode and decode rates of each compressor in its default config (the registry's
//            defaults: what the simulator's cells run) on n random floats, as GB/s of f32
//            input. decode is one message added into a bucket of the same n floats.
//   link     a ping-pong of one message between ranks 0 and 1; the one-way time of n bytes is
//            half the median round trip. fit_link() turns the samples into alpha and
//            bandwidth: the bandwidth from the large sizes, alpha from the small ones.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/status.h"
#include "sim/profile.h"

namespace sparq::comm {
class Communicator;
}

namespace sparq::sim {

// Receives one line of progress ("forward 3/5: 512.3 ms"); may be empty.
using ProgressFn = std::function<void(const std::string&)>;

// One run of the model spec at (micro_batch, seq_len) per repeat, after one warm-up.
// seq_len is ignored by VGG (pass 0). repeats >= 1.
Result<MeasuredCompute> measure_compute(const std::string& model_spec, std::int64_t micro_batch,
                                        std::int64_t seq_len, int repeats,
                                        const ProgressFn& progress = {});

// Encode/decode rates of each named compressor on n floats; the median of `repeats` timings
// after one warm-up. An unknown name is an error listing the registered ones.
Result<std::map<std::string, CodecRate>> measure_codecs(const std::vector<std::string>& names,
                                                        std::size_t n, int repeats = 5,
                                                        const ProgressFn& progress = {});

// One-way time of a message of `bytes` bytes.
struct LinkSample {
  std::size_t bytes = 0;
  double seconds = 0;
};

// Least squares on t = alpha + bytes / bandwidth: the slope (and so the bandwidth) from the
// samples with bytes >= large_from, then alpha = mean of t - bytes / bandwidth over the samples
// with bytes <= small_upto. Latency dominates small messages and the rate large ones, while
// in between TCP's windows bend the line; fitting both ends apart keeps each figure where it
// is measured. small_upto is 8 B, the smallest message alone, because a shaped link's token
// bucket (tbf, 16 KiB burst on the emulated cluster) passes a few KiB at the wire's own speed,
// not at the rate: measured at 100mbit, 8 B and 64 B both took 11-13 us one way, and subtracting
// 64 B / rate (5 us) from the second would pull alpha 3 us low.
// Errors: fewer than two distinct large sizes, no small size, a slope <= 0.
Result<NetworkLink> fit_link(const std::vector<LinkSample>& samples, const std::string& name,
                             std::size_t small_upto = 8, std::size_t large_from = 1 << 20);

// Message sizes of the ping-pong: 8 B, x8 up to 64 MiB, and 64 MiB itself.
std::vector<std::size_t> default_link_sizes();

struct LinkMeasurement {
  std::vector<LinkSample> samples;  // one per size, in the order given
  NetworkLink link;                 // fit_link(samples) with the given name
};

// Ping-pong between ranks 0 and 1 of `comm` (size >= 2; other ranks only take part in the
// final broadcast). Every rank returns rank 0's samples and fit. The number of round trips per
// size falls with the size (at least 3), so 64 MiB at 100 Mbit/s still ends in seconds.
Result<LinkMeasurement> measure_link(comm::Communicator& comm, const std::vector<std::size_t>& sizes,
                                     const std::string& name, const ProgressFn& progress = {});

}  // namespace sparq::sim
