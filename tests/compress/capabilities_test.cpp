// Compressor capabilities (compressor.h): what each built-in declares, and the registry's
// strategies accepting or refusing a compressor by those declarations alone, an external
// compressor's included (DESIGN.md, "Capabilities, not names").
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "compress/aggregation.h"
#include "compress/device_codec.h"
#include "compress/error_feedback.h"
#include "compress/gradient_exchange.h"
#include "compress/registry.h"
#include "core/ops.h"
#include "test_util.h"

namespace sparq::compress {
namespace {

using testing::contains;

std::string describe(const CompressorCapabilities& c) {
  std::string out;
  for (auto [name, on] : {std::pair{"summable", c.summable},
                          {"self_contained", c.self_contained},
                          {"sparse_f32", c.sparse_f32},
                          {"reselectable", c.reselectable},
                          {"needs_matrix_layout", c.needs_matrix_layout},
                          {"sends_every_entry", c.sends_every_entry},
                          {"own_density_warmup", c.own_density_warmup},
                          {"position_state", c.position_state},
                          {"device_twin", c.device_twin},
                          {"merges_by_encode", c.merges_by_encode},
                          {"count_varies", c.count_varies}}) {
    if (!on) continue;
    if (!out.empty()) out += ' ';
    out += name;
  }
  return out;
}

// testing::make with the keys named as in their own section (compress.<name>.*).
std::unique_ptr<Compressor> make_in_section(const std::string& name,
                                            std::map<std::string, std::string> params = {}) {
  auto made = make_compressor({name, std::move(params), "compress." + name});
  EXPECT_TRUE(made.is_ok()) << made.status().message();
  return std::move(made).value();
}

// The built-in strategies that accept `c`, in registry order.
std::string accepted_by(const Compressor& c) {
  std::string out;
  for (Aggregation kind : kAggregations) {
    const std::string name(aggregation_name(kind));
    if (!make_aggregator(name, c, {}, "compress.aggregation").is_ok()) continue;
    if (!out.empty()) out += ' ';
    out += name;
  }
  return out;
}

TEST(Capabilities, EachBuiltinDeclaresItsOwnAndGetsItsStrategies) {
  struct Want {
    std::string name, capabilities, strategies;
  };
  const std::string messages = "self_contained";
  const std::string anywhere = "allgather two_phase";
  const std::vector<Want> wants = {
      {"none", "summable self_contained sends_every_entry", "allreduce " + anywhere},
      {"fp16", "summable self_contained sends_every_entry device_twin", "allreduce " + anywhere},
      {"bf16", "summable self_contained sends_every_entry device_twin", "allreduce " + anywhere},
      {"topk", "self_contained sparse_f32 reselectable device_twin", anywhere + " tree"},
      {"topk_sampled", "self_contained sparse_f32 reselectable device_twin count_varies",
       anywhere + " tree"},
      {"gtopk", "self_contained sparse_f32 reselectable device_twin", anywhere + " tree"},
      {"randomk", messages + " device_twin", anywhere},
      {"threshold", "self_contained sparse_f32 device_twin count_varies", anywhere},
      {"qsgd", messages + " device_twin", anywhere},
      {"terngrad", messages + " device_twin", anywhere},
      {"signsgd", messages + " device_twin", anywhere},
      {"onebit", messages + " device_twin", anywhere},
      {"blockquant", messages + " device_twin", anywhere},
      {"dgc", "self_contained sparse_f32 position_state device_twin", "allgather"},
      {"lbs", messages + " device_twin merges_by_encode", anywhere + " tree"},
      {"powersgd", "needs_matrix_layout device_twin", "low_rank"},
  };
  for (const Want& want : wants) {
    auto c = make_in_section(want.name);
    EXPECT_EQ(describe(c->capabilities()), want.capabilities) << want.name;
    EXPECT_EQ(accepted_by(*c), want.strategies) << want.name;
    // Its own strategy always accepts it.
    EXPECT_TRUE(contains(want.strategies, std::string(aggregation_name(c->aggregation()))))
        << want.name;
  }
  // dgc declares its own sparsity warm-up only when it has one.
  EXPECT_TRUE(make_in_section("dgc", {{"warmup_steps", "3"}})->capabilities().own_density_warmup);
  // lbs's sampled selection has a twin too; its count varies.
  auto sampled = make_in_section("lbs", {{"selection", "sampled"}});
  EXPECT_TRUE(sampled->capabilities().device_twin);
  EXPECT_TRUE(sampled->capabilities().count_varies);
  EXPECT_FALSE(accepted_by(*sampled).ends_with("tree")) << "its k varies: no tree";
  const auto refused = make_aggregator("tree", *sampled, {}, "compress.aggregation");
  ASSERT_FALSE(refused.is_ok());
  EXPECT_NE(refused.status().message().find("compress.lbs.selection: exact"), std::string::npos)
      << refused.status().message();
#if SPARQ_HAS_CUDA
  EXPECT_NE(sampled->device_codec(), nullptr);
#endif
}

TEST(Capabilities, DeviceTwinsExistExactlyInACudaBuild) {
  for (const char* name : {"lbs", "blockquant", "topk", "randomk", "qsgd", "terngrad", "signsgd",
                           "onebit", "fp16", "bf16", "dgc", "topk_sampled", "threshold"}) {
    auto c = make_in_section(name);
#if SPARQ_HAS_CUDA
    EXPECT_NE(c->device_codec(), nullptr) << name;
#else
    EXPECT_EQ(c->device_codec(), nullptr) << name << ": no CUDA, no twin";
#endif
  }
  // powersgd's twin is its whole exchange (device_low_rank.h), not a message codec.
  for (const char* name : {"none", "powersgd"}) {
    EXPECT_EQ(make_in_section(name)->device_codec(), nullptr) << name;
  }
}

// The device exchange's strategies (device_exchange.h, device_two_phase.h): allgather and
// two_phase for every twin, tree for reselectable sparse lists and lists that merge by encode
// (lbs with exact selection), allreduce only where messages
// sum, low_rank for powersgd; nothing for a compressor without a twin.
TEST(Capabilities, DeviceStrategiesFollowTheCapabilities) {
  const auto built = [](const char* name, Aggregation a) {
    return device_strategy_built(aggregation_name(a), make_in_section(name)->capabilities());
  };
  EXPECT_TRUE(built("lbs", Aggregation::kAllgather));
  EXPECT_TRUE(built("lbs", Aggregation::kTwoPhase));
  EXPECT_TRUE(built("bf16", Aggregation::kAllreduce));
  EXPECT_TRUE(built("fp16", Aggregation::kAllgather));
  EXPECT_FALSE(built("qsgd", Aggregation::kAllreduce));  // not summable
  EXPECT_TRUE(built("onebit", Aggregation::kAllgather));
  EXPECT_TRUE(built("onebit", Aggregation::kTwoPhase));  // its own strategy
  EXPECT_TRUE(built("dgc", Aggregation::kAllgather));
  EXPECT_TRUE(built("powersgd", Aggregation::kLowRank));     // its exchange on the device
  EXPECT_FALSE(built("powersgd", Aggregation::kAllgather));  // factors only sum in low_rank
  EXPECT_TRUE(built("gtopk", Aggregation::kTree));
  EXPECT_TRUE(built("topk", Aggregation::kTree));
  EXPECT_TRUE(built("lbs", Aggregation::kTree));  // merged by encode, k fixed
  // Sampled lbs: its count varies, so neither tree takes it.
  const CompressorCapabilities sampled_lbs =
      make_in_section("lbs", {{"selection", "sampled"}})->capabilities();
  EXPECT_FALSE(sampled_lbs.merges_by_encode);
  EXPECT_FALSE(device_strategy_built(aggregation_name(Aggregation::kTree), sampled_lbs));
  // Counts chosen on the device: allgathered and by two_phase, not merged by the tree.
  EXPECT_TRUE(built("topk_sampled", Aggregation::kAllgather));
  EXPECT_TRUE(built("threshold", Aggregation::kTwoPhase));
  EXPECT_FALSE(built("topk_sampled", Aggregation::kTree));
}

// Found in review: two_phase's server pass re-encoded each region's average through dgc's
// accumulate(), which put the already momentum-corrected average into the owner's momentum
// (and masked it at the server's picks). A compressor with position_state is refused there
// while server compression is on, and accepted without it.
TEST(Capabilities, PositionStateIsRefusedByTwoPhaseServerCompression) {
  auto dgc = make_in_section("dgc");
  auto server = make_aggregator("two_phase", *dgc, {.server_compression = true}, "compress");
  ASSERT_FALSE(server.is_ok());
  EXPECT_EQ(server.status().message(),
            "compress: dgc cannot aggregate by two_phase with server compression: each region "
            "owner re-encodes the region's average with it, which would apply its per-position "
            "state (momentum) to the average a second time; set compress.server_compression: "
            "false, or use allgather");
  EXPECT_TRUE(
      make_aggregator("two_phase", *dgc, {.server_compression = false}, "compress").is_ok());
  // Compressors without such state keep server compression.
  EXPECT_TRUE(make_aggregator("two_phase", *make_in_section("topk"), {}, "compress").is_ok());
}

// Found in review: dgc's local clipping scales the span it is given by that span's norm, and
// two_phase encodes one region at a time, so each region was clipped on its own (a small
// region kept 31x the norm allgather left it). Refused with clip_norm > 0, either server
// setting; accepted without clipping.
TEST(Capabilities, SpanNormScalingIsRefusedByTwoPhase) {
  auto clipped = make_in_section("dgc", {{"clip_norm", "1"}});
  for (bool server : {false, true}) {
    auto made = make_aggregator("two_phase", *clipped, {.server_compression = server}, "compress");
    ASSERT_FALSE(made.is_ok());
    EXPECT_EQ(made.status().message(),
              "compress: dgc cannot aggregate by two_phase with its local clipping: two_phase "
              "encodes a bucket one region at a time, so each region would be clipped by its "
              "own norm (to clip_norm / sqrt(P) each, turning the bucket's gradient); set "
              "compress.dgc.clip_norm: 0, or use allgather");
  }
  EXPECT_TRUE(make_aggregator("allgather", *clipped, {}, "compress").is_ok());
  EXPECT_TRUE(make_aggregator("two_phase", *make_in_section("dgc"), {.server_compression = false},
                              "compress")
                  .is_ok());
}

TEST(Capabilities, PowerSgdIsRefusedByAllreduceAndNamesLowRank) {
  auto psgd = make_in_section("powersgd");
  EXPECT_EQ(psgd->aggregation(), Aggregation::kLowRank);
  auto automatic = make_aggregator("auto", *psgd, {}, "compress.aggregation");
  ASSERT_TRUE(automatic.is_ok()) << automatic.status().message();
  EXPECT_EQ((*automatic)->name(), "low_rank");
  auto allreduce = make_aggregator("allreduce", *psgd, {}, "compress.aggregation");
  ASSERT_FALSE(allreduce.is_ok());
  EXPECT_EQ(allreduce.status().message(),
            "compress.aggregation: powersgd cannot aggregate by allreduce (its messages do not "
            "sum; its own strategy is low_rank)");
  auto topk = make_in_section("topk");
  auto low_rank = make_aggregator("low_rank", *topk, {}, "compress.aggregation");
  ASSERT_FALSE(low_rank.is_ok());
  EXPECT_TRUE(contains(low_rank.status().message(),
                       "compress.aggregation: topk cannot aggregate by low_rank"))
      << low_rank.status().message();
}

// A dense f32 compressor (message = the floats) that declares whatever it is told: enough for
// the strategies' accepts() and the exchange's checks, which look at declarations only.
class Declared final : public Compressor {
 public:
  Declared(Aggregation own, std::optional<CompressorCapabilities> caps,
           std::optional<double> rho = std::nullopt, DType wire = DType::kF32)
      : own_(own), caps_(caps), rho_(rho), wire_(wire) {}
  std::string_view name() const override { return "test_declared"; }
  Aggregation aggregation() const override { return own_; }
  CompressorCapabilities capabilities() const override {
    return caps_ ? *caps_ : Compressor::capabilities();
  }
  void encode(std::span<const float> a, const EncodeContext&, Message& msg) override {
    msg.resize(a.size_bytes() - short_by_);
    std::memcpy(msg.data(), a.data(), msg.size());
  }
  // Messages this many bytes shorter than fixed_message_bytes() promises: a compressor bug.
  void break_size_promise(std::size_t bytes) { short_by_ = bytes; }
  Status check_message(std::span<const std::uint8_t> msg, std::size_t n,
                       const EncodeContext&) const override {
    return check_message_size(*this, msg, n, 4 * n);
  }
  void decode(std::span<const std::uint8_t> msg, std::span<float> out, float alpha,
              DecodeMode mode, const EncodeContext&) const override {
    std::vector<float> v(out.size());
    std::memcpy(v.data(), msg.data(), msg.size());
    if (mode == DecodeMode::kSet) ops::fill(out.data(), out.size(), 0.0f);
    ops::axpy(alpha, v.data(), out.data(), out.size());
  }
  std::optional<std::size_t> fixed_message_bytes(std::size_t n) const override { return 4 * n; }
  std::optional<double> density() const override { return rho_; }
  DType wire_dtype() const override { return wire_; }
  double contraction_delta(std::size_t) const override { return 1.0; }

 private:
  Aggregation own_;
  std::optional<CompressorCapabilities> caps_;
  std::optional<double> rho_;
  DType wire_;
  std::size_t short_by_ = 0;
};

// Registered like any external compressor: `caps` is what it declares.
std::unique_ptr<Compressor> make_external(const std::string& name, Aggregation own,
                                          std::optional<CompressorCapabilities> caps) {
  if (!find_compressor(name).is_ok()) {  // once per process (--gtest_repeat)
    const Status s = register_compressor(
        {name, "declares capabilities, for the test", {},
         [own, caps](ConfigReader&) -> Result<std::unique_ptr<Compressor>> {
           return std::unique_ptr<Compressor>(std::make_unique<Declared>(own, caps));
         }});
    EXPECT_TRUE(s.is_ok()) << s.message();
  }
  return make_in_section(name);
}

TEST(Capabilities, ExternalCompressorsAreJudgedByWhatTheyDeclare) {
  // Sparse, re-selectable lists: the tree takes it although its own strategy is allgather.
  auto sparse = make_external("test_caps_sparse", Aggregation::kAllgather,
                              CompressorCapabilities{.sparse_f32 = true, .reselectable = true});
  EXPECT_EQ(accepted_by(*sparse), "allgather two_phase tree");
  // Summable messages although its own strategy is allgather: allreduce takes it.
  auto summable = make_external("test_caps_summable", Aggregation::kAllgather,
                                CompressorCapabilities{.summable = true});
  EXPECT_EQ(accepted_by(*summable), "allreduce allgather two_phase");
  // Messages that are not self-contained: allgather and two_phase refuse it, naming why.
  auto joint = make_external("test_caps_joint", Aggregation::kAllreduce,
                             CompressorCapabilities{.summable = true, .self_contained = false});
  EXPECT_EQ(accepted_by(*joint), "allreduce");
  auto gather = make_aggregator("allgather", *joint, {}, "compress.aggregation");
  ASSERT_FALSE(gather.is_ok());
  EXPECT_EQ(gather.status().message(),
            "compress.aggregation: test_declared cannot aggregate by allgather (its messages "
            "mean something only summed over the ranks; its own strategy is allreduce)");
  // Summable messages whose wire type is bytes (Compressor's default wire_dtype()): the
  // allreduce summed its f32 values byte by byte (review, 2026-12-07).
  for (const DType wire : {DType::kU8, DType::kU16}) {
    const Declared bytes(Aggregation::kAllreduce, CompressorCapabilities{.summable = true},
                         std::nullopt, wire);
    auto reduce = make_aggregator("auto", bytes, {}, "compress.aggregation");
    ASSERT_FALSE(reduce.is_ok());
    EXPECT_TRUE(contains(reduce.status().message(),
                         fmt::format("its wire_dtype() is {}, whose sum wraps", dtype_name(wire))))
        << reduce.status().message();
  }
  // A sparse list the tree may not re-select.
  auto fixed = make_external("test_caps_fixed", Aggregation::kAllgather,
                             CompressorCapabilities{.sparse_f32 = true});
  auto tree = make_aggregator("tree", *fixed, {}, "compress.aggregation");
  ASSERT_FALSE(tree.is_ok());
  EXPECT_TRUE(contains(tree.status().message(), "its sparse lists cannot be re-selected"))
      << tree.status().message();
  // low_rank is powersgd's factor exchange: declaring a matrix layout does not make another
  // compressor powersgd.
  Declared layout(Aggregation::kAllgather, CompressorCapabilities{.needs_matrix_layout = true});
  EXPECT_FALSE(make_aggregator("low_rank", layout, {}, "compress.aggregation").is_ok());
}

// A rank's own message of another size than fixed_message_bytes() promised is named with the
// bucket before error feedback decodes it (an embedder's compressor was decoded into the
// residual unchecked, out of bounds: review, 2026-12-07), with error feedback or without.
TEST(CapabilitiesDeathTest, AMessageOfAnotherSizeThanPromisedIsNamedBeforeAnyDecode) {
  Declared liar(Aggregation::kAllgather, std::nullopt);
  liar.break_size_promise(4);
  std::vector<float> g(10, 1.0f), residual(10, 0.0f);
  ErrorFeedback ef(residual);
  Message msg;
  EncodeContext ctx;
  ctx.bucket_id = 3;
  const char* why =
      "bucket 3 \\(test_declared\\): a message of 36 bytes, but "
      "test_declared::fixed_message_bytes\\(10\\) promised 40";
  EXPECT_DEATH(encode_maybe_ef(liar, &ef, g, 0, ctx, msg), why);
  EXPECT_DEATH(encode_maybe_ef(liar, nullptr, g, 0, ctx, msg), why);
}

// A compressor written before capabilities existed keeps the strategies the registry gave it
// then: allreduce when its own strategy is allreduce, allgather and two_phase always.
TEST(Capabilities, TheDefaultsFollowTheOwnStrategy) {
  const Declared reducing(Aggregation::kAllreduce, std::nullopt);
  EXPECT_EQ(describe(reducing.capabilities()), "summable self_contained");
  EXPECT_EQ(accepted_by(reducing), "allreduce allgather two_phase");
  const Declared gathering(Aggregation::kAllgather, std::nullopt);
  EXPECT_EQ(describe(gathering.capabilities()), "self_contained");
  EXPECT_EQ(accepted_by(gathering), "allgather two_phase");
}

TEST(Capabilities, SetLayoutDefaultsToIgnoringALayoutNobodyNeeds) {
  Declared plain(Aggregation::kAllgather, std::nullopt);
  EXPECT_TRUE(plain.set_layout(100, {{"w", 0, 10, 10}}).is_ok());
  Declared needy(Aggregation::kAllgather, CompressorCapabilities{.needs_matrix_layout = true});
  const Status s = needy.set_layout(100, {{"w", 0, 10, 10}});
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.message(),
            "test_declared: declares needs_matrix_layout but does not override set_layout");
  // powersgd's own set_layout, reached through the base class.
  auto psgd = make_in_section("powersgd", {{"rank", "2"}, {"min_compress_numel", "16"}});
  EXPECT_TRUE(psgd->set_layout(100, {{"w", 0, 10, 10}}).is_ok());
  EXPECT_EQ(psgd->fixed_message_bytes(100), 4u * (10 * 2 + 10 * 2));
}

TEST(Capabilities, TheDensityWarmUpAsksTheCapabilities) {
  const std::string key = "compress.density_warmup_steps";
  // Every entry sent: nothing to warm up, accepted without a density.
  const Declared dense(Aggregation::kAllreduce,
                       CompressorCapabilities{.summable = true, .sends_every_entry = true});
  EXPECT_TRUE(check_density_warmup(dense, 10, key).is_ok());
  // No density and not dense: refused, naming the key.
  const Declared plain(Aggregation::kAllgather, std::nullopt);
  const Status none = check_density_warmup(plain, 10, key);
  ASSERT_FALSE(none.is_ok());
  EXPECT_TRUE(contains(none.message(), key + ": test_declared has no density")) << none.message();
  // A density: accepted, unless the compressor warms its own sparsity up.
  EXPECT_TRUE(check_density_warmup(Declared(Aggregation::kAllgather, std::nullopt, 0.01), 10, key)
                  .is_ok());
  const Declared own(Aggregation::kAllgather, CompressorCapabilities{.own_density_warmup = true},
                     0.01);
  const Status both = check_density_warmup(own, 10, key);
  ASSERT_FALSE(both.is_ok());
  EXPECT_TRUE(contains(both.message(), "test_declared's own sparsity warm-up")) << both.message();
  EXPECT_TRUE(check_density_warmup(own, 0, key).is_ok());  // no warm-up asked
}

}  // namespace
}  // namespace sparq::compress
