// Machine profiles (sim/profile.h): they read back to themselves, and every mistake names the
// file and the key.
#include <gtest/gtest.h>

#include "sim/profile.h"

namespace sparq::sim {
namespace {

const char* kProfile = R"(name: test-node
source: "written for the test"
compute:
  measured:
    model: "gpt2-tiny vocab_size=256 n_ctx=64"
    micro_batch: 8
    seq_len: 128
    forward_ms: 480
    optimizer_ns_per_param: 0.6
    layers:
      - {name: wte, backward_ms: 1.5}
      - {name: h.0.attn, backward_ms: 20}
  flops: {matmul_tflops: 600, memory_gbps: 2500, optimizer_ns_per_param: 0.01}
codecs:
  lbs: {encode_gbps: 1.2, decode_gbps: 3}
networks:
  - {name: 10gbit, alpha_us: 15, gbps: 10, source: "a guess"}
  - {name: 100mbit, alpha_us: 100, gbps: 0.1}
)";

TEST(MachineProfile, ReadsBackToItself) {
  auto p = parse_profile(kProfile, "t.yaml");
  ASSERT_TRUE(p.is_ok()) << p.status().message();
  ASSERT_TRUE(p->measured && p->flops);
  EXPECT_EQ(p->measured->layers.size(), 2u);
  EXPECT_DOUBLE_EQ(p->measured->layers[1].backward_ms, 20);
  EXPECT_DOUBLE_EQ(p->codecs.at("lbs").decode_gbps, 3);
  auto link = p->network("100mbit");
  ASSERT_TRUE(link.is_ok());
  EXPECT_DOUBLE_EQ(link->beta_s_per_byte(), 8.0 / 1e8);
  EXPECT_DOUBLE_EQ(link->alpha_s(), 1e-4);
  auto again = parse_profile(profile_yaml(*p), "again.yaml");
  ASSERT_TRUE(again.is_ok()) << again.status().message() << "\n" << profile_yaml(*p);
  EXPECT_EQ(profile_yaml(*again), profile_yaml(*p));
}

TEST(MachineProfile, ErrorsNameTheKey) {
  const auto error = [](std::string text, const std::string& from, const std::string& to) {
    text.replace(text.find(from), from.size(), to);
    auto p = parse_profile(text, "t.yaml");
    return p.is_ok() ? std::string("accepted") : p.status().message();
  };
  EXPECT_EQ(error(kProfile, "gbps: 10,", "gbps: 0,"), "t.yaml: networks[0].gbps: must be positive, got 0");
  EXPECT_EQ(error(kProfile, "backward_ms: 20", "backward_ms: fast"),
            "t.yaml: compute.measured.layers[1].backward_ms: expected a number");
  EXPECT_EQ(error(kProfile, "memory_gbps", "memory_gb"), "t.yaml: compute.flops.memory_gbps: missing");
  EXPECT_EQ(error(kProfile, "{name: 100mbit,", "{name: 10gbit,"),
            "t.yaml: networks[1].name: '10gbit' appears twice");
  EXPECT_EQ(error(kProfile, "source: \"a guess\"", "sauce: 1"), "t.yaml: networks[0].sauce: unknown key");
  // Cast to int64 from a double past its range was undefined (review).
  EXPECT_EQ(error(kProfile, "micro_batch: 8", "micro_batch: 1e19"),
            "t.yaml: compute.measured.micro_batch: 1e+19 is too large (at most 2^40)");
  // A complex key threw YAML::TypedBadConversion through parse_profile: simulate exited 134
  // (review, 2026-12-07).
  EXPECT_EQ(error(kProfile, "codecs:\n", "codecs:\n  ? [a, b]\n  : 3\n"),
            "t.yaml: codecs: a key that is not text (line 15)");
  EXPECT_EQ(error(kProfile, "codecs:\n", "? [a, b]\n: 3\ncodecs:\n"),
            "t.yaml: top level: a key that is not text (line 14)");
  EXPECT_EQ(error(kProfile, "    micro_batch: 8\n", "    micro_batch: 8\n    ? {x: 1}\n    : 3\n"),
            "t.yaml: compute.measured: a key that is not text (line 7)");
  // A key given twice, and a second document, were read as the first alone without a word
  // (review, 2026-12-07).
  EXPECT_EQ(error(kProfile, "    forward_ms: 480\n", "    forward_ms: 480\n    forward_ms: 1\n"),
            "t.yaml: compute.measured.forward_ms: set twice (again at line 9); give each key once");
  EXPECT_EQ(error(kProfile, "  lbs:", "  lbs: {encode_gbps: 1, decode_gbps: 1}\n  lbs:"),
            "t.yaml: codecs.lbs: set twice (again at line 16); give each key once");
  EXPECT_EQ(error(kProfile, "networks:", "---\nname: other\nnetworks:"),
            "t.yaml: holds more than one YAML document (the second one's content begins at line "
            "17); a machine profile is one document");
  // A misspelt codec and an empty name loaded (review, 2026-12-08).
  EXPECT_EQ(error(kProfile, "  lbs:", "  lbz:").substr(0, 45),
            "t.yaml: codecs.lbz: unknown compressor 'lbz' ");
  EXPECT_EQ(error(kProfile, "{name: 10gbit,", "{name: \"\","), "t.yaml: networks[0].name: empty");
  EXPECT_EQ(error(kProfile, "name: test-node", "name: \"\""), "t.yaml: name: empty");
  auto p = parse_profile(kProfile, "t.yaml");
  ASSERT_TRUE(p.is_ok());
  EXPECT_EQ(p->network("1gbit").status().message(),
            "profile test-node: no network '1gbit' (it has: 10gbit, 100mbit)");
}

}  // namespace
}  // namespace sparq::sim
