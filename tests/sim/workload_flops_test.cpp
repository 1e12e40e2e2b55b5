// The FLOP model of the simulator's workload (sim/workload.h, compute_times from
// profile.compute.flops): the vocabulary head of both transformers.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sim/workload.h"

namespace sparq::sim {
namespace {

const char* kFlopProfile = R"(name: t
source: "the test"
compute:
  flops: {matmul_tflops: 100, memory_gbps: 1000, optimizer_ns_per_param: 0.1}
networks:
  - {name: 1gbit, alpha_us: 50, gbps: 1}
)";

struct Timed {
  ComputeTimes times;
  int head_layer = -1;
  std::vector<std::string> layer_names;
};

Timed flop_times_of(const std::string& model_yaml, std::int64_t vocab) {
  auto config = train::parse_train_config(model_yaml, "t.yaml",
                                          {"model.vocab_size=" + std::to_string(vocab)});
  EXPECT_TRUE(config.is_ok()) << config.status().message();
  auto layout = build_layout(*config);
  EXPECT_TRUE(layout.is_ok()) << layout.status().message();
  auto profile = parse_profile(kFlopProfile, "t.yaml");
  EXPECT_TRUE(profile.is_ok()) << profile.status().message();
  auto t = compute_times(**layout, *profile, 4, 32);
  EXPECT_TRUE(t.is_ok()) << t.status().message();
  Timed out{*t, (*layout)->head_layer, {}};
  for (const auto& l : (*layout)->layers) out.layer_names.push_back(l.name);
  return out;
}

// The embedding tables and the decoder's bias are priced by memory traffic, independent of
// the vocabulary, so a larger vocabulary adds exactly the head's matmuls: 2 V C tokens FLOPs
// forward, twice that in the backward interval of the layer reported after the head. BERT's
// MLM decoder, tied to embeddings.word but not a table the trainer splits, was left out
// (found in review: bert-base on the H100 profile lacked 0.43 ms forward, 0.86 ms backward).
void expect_head_priced(const std::string& model_yaml, const std::string& head_layer_name) {
  constexpr std::int64_t kSmall = 1024, kLarge = 3072, kEmbd = 128, kTokens = 4 * 32;
  const Timed small = flop_times_of(model_yaml, kSmall);
  const Timed large = flop_times_of(model_yaml, kLarge);
  ASSERT_GE(large.head_layer, 0);
  EXPECT_EQ(large.layer_names[static_cast<std::size_t>(large.head_layer)], head_layer_name);
  const double head_s = 2.0 * (kLarge - kSmall) * kEmbd * kTokens / 100e12;
  EXPECT_NEAR(large.times.forward_s - small.times.forward_s, head_s, head_s * 1e-9);
  ASSERT_EQ(small.times.backward_s.size(), large.times.backward_s.size());
  for (std::size_t i = 0; i < large.times.backward_s.size(); ++i) {
    const double added = large.times.backward_s[i] - small.times.backward_s[i];
    const double want = static_cast<int>(i) == large.head_layer ? 2.0 * head_s : 0.0;
    EXPECT_NEAR(added, want, head_s * 1e-9) << "layer " << large.layer_names[i];
  }
}

TEST(WorkloadFlops, Gpt2LmHeadInLnFsInterval) {
  expect_head_priced("model:\n  preset: gpt2-tiny\n", "ln_f");
}

TEST(WorkloadFlops, BertMlmDecoderIsPriced) {
  expect_head_priced("model:\n  preset: bert-tiny\n", "mlm.decoder");
}

// With nsp the pooler and classifier follow the decoder in forward order, but are reported
// before it (Bert::backward_layers): the head's backward stays in the decoder's interval.
TEST(WorkloadFlops, BertMlmDecoderBeforeNsp) {
  const std::string yaml = "model:\n  preset: bert-tiny\n  nsp: true\n";
  const Timed t = flop_times_of(yaml, 1024);
  EXPECT_EQ(t.layer_names.back(), "nsp");
  expect_head_priced(yaml, "mlm.decoder");
}

}  // namespace
}  // namespace sparq::sim
