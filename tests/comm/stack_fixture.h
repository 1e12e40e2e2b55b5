// A GPT-2-shaped parameter stack (embedding, blocks of ln/qkv/proj/ln/fc/proj, final ln) for
// bucket-plan and scheduler tests, laid out with the plan's dense predicate.
#pragma once

#include <fmt/format.h>

#include <string>
#include <utility>
#include <vector>

#include "comm/bucket_plan.h"

namespace sparq::comm::testing {

// A GPT-2-shaped stack: per block ln, qkv, proj, ln, fc, proj (weights and biases).
struct Stack {
  ParamStore store;
  std::vector<LayerParams> layers;
};

inline Stack make_stack(int blocks, int c, const BucketPlanConfig& config) {
  Stack s;
  auto layer = [&](const std::string& name, std::vector<std::pair<std::string, Shape>> tensors) {
    LayerParams lp{name, {}};
    for (auto& [suffix, shape] : tensors) {
      s.store.add({name + "." + suffix, shape, Init::zeros(), shape.ndim() > 1});
      lp.tensors.push_back(name + "." + suffix);
    }
    s.layers.push_back(lp);
  };
  layer("wte", {{"weight", {512, c}}});
  for (int b = 0; b < blocks; ++b) {
    const std::string p = fmt::format("h.{}", b);
    layer(p + ".ln_1", {{"weight", {c}}, {"bias", {c}}});
    layer(p + ".attn.qkv", {{"weight", {3 * c, c}}, {"bias", {3 * c}}});
    layer(p + ".attn.proj", {{"weight", {c, c}}, {"bias", {c}}});
    layer(p + ".ln_2", {{"weight", {c}}, {"bias", {c}}});
    layer(p + ".mlp.fc", {{"weight", {4 * c, c}}, {"bias", {4 * c}}});
    layer(p + ".mlp.proj", {{"weight", {c, 4 * c}}, {"bias", {c}}});
  }
  layer("ln_f", {{"weight", {c}}, {"bias", {c}}});
  s.store.allocate(ExecContext::cpu(), [&](const ParamSpec& spec) { return config.is_dense(spec); });
  return s;
}

}  // namespace sparq::comm::testing
