// MachineProfile: what the step simulator (sim/, docs/simulate.md) knows about a machine:
// how long compute takes, how fast each compressor encodes and decodes, and the links.
// Profiles are YAML files under profiles/: measured on this machine (`sim_profile`, which
// times the real model, the real compressors and a ping-pong on the link) or written by hand
// for hardware that is not here, with the source of every figure in the file.
//
//   name: h100-node
//   source: "free text: where the figures come from"
//   compute:
//     measured:                       # per-layer times of ONE model shape, measured
//       model: "gpt2-tiny vocab_size=256 n_ctx=64"   # a model spec (models/config.h)
//       micro_batch: 8
//       seq_len: 128                  # 0 for VGG
//       forward_ms: 480.0             # one micro-batch's forward, loss included
//       optimizer_ns_per_param: 0.6   # the optimizer step, per parameter
//       layers:                       # Model::layers() order; backward_ms of layer i: the time
//         - {name: wte, backward_ms: 1.2}   # from the previous readiness report to layer i's
//     flops:                          # or a FLOP model (hardware that is not here)
//       matmul_tflops: 600            # sustained dense matmul rate, fp32-equivalent work
//       memory_gbps: 2500             # sustained bandwidth for elementwise / norm layers
//       optimizer_ns_per_param: 0.01
//   codecs:                           # GB/s of f32 input (4 bytes per float), per compressor
//     lbs: {encode_gbps: 1.2, decode_gbps: 3.0}
//   networks:
//     - {name: 10gbit, alpha_us: 15, gbps: 10, source: "..."}
//
// Errors name the file and the key ("h100.yaml: networks[1].gbps: must be positive").
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"

namespace sparq::sim {

struct LayerTime {
  std::string name;  // a Model::layers() name
  double backward_ms = 0;
};

struct MeasuredCompute {
  std::string model;  // model spec
  std::int64_t micro_batch = 0;
  std::int64_t seq_len = 0;
  double forward_ms = 0;
  double optimizer_ns_per_param = 0;
  std::vector<LayerTime> layers;  // forward order
};

struct FlopCompute {
  double matmul_tflops = 0;
  double memory_gbps = 0;
  double optimizer_ns_per_param = 0;
};

struct CodecRate {
  double encode_gbps = 0;  // f32 input bytes per second / 1e9
  double decode_gbps = 0;  // one message into a bucket of the same floats
};

struct NetworkLink {
  std::string name;
  double alpha_us = 0;  // per-message latency
  double gbps = 0;      // link bandwidth, 1e9 bits per second
  std::string source;
  double beta_s_per_byte() const { return 8.0 / (gbps * 1e9); }
  double alpha_s() const { return alpha_us * 1e-6; }
};

struct MachineProfile {
  std::string name;
  std::string source;
  std::optional<MeasuredCompute> measured;
  std::optional<FlopCompute> flops;
  std::map<std::string, CodecRate> codecs;  // by compressor name ("none" included)
  std::vector<NetworkLink> networks;

  // The link named `name`, or an error listing the profile's links.
  Result<NetworkLink> network(const std::string& name) const;
};

Result<MachineProfile> parse_profile(const std::string& yaml_text, const std::string& origin);
Result<MachineProfile> load_profile(const std::string& path);
// YAML that parse_profile() reads back to the same profile; with `significant_digits` > 0
// every number is written with that many significant digits (measured timings are noisy
// medians: sim_profile keeps 4), names and free text as they are.
std::string profile_yaml(const MachineProfile& profile, int significant_digits = 0);

}  // namespace sparq::sim
