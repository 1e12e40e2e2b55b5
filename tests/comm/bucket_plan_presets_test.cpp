// Bucket plans for the real model presets (gpt2-124M, bert-base, vgg16, gpt2-tiny), not a
// synthetic stack: a model's own declaration order, names, sizes and layers, laid out the way
// the trainer lays them out, with the default caps, per-layer cutting and dense routing.
// Checked for every plan: the ranges tile [0, flat_numel) exactly; launch order walks the
// layout downwards, compressed region first; caps hold (a tensor is split only when it alone
// exceeds the cap); every tensor's elements are in exactly one bucket; dense buckets hold
// exactly the dense-routed tensors; building again gives the identical plan.
//
// Only declare() and allocate() run (no initialisation, no forward): the plan depends on the
// layout alone. Still, gpt2-124M needs ~1 GB for parameters and gradients, and zeroing that
// is most of this test's time, so each preset is laid out only twice: once plain (for the
// default and per-layer configs) and once with the dense routing placed last.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "comm/bucket_plan.h"
#include "models/model.h"

namespace sparq::comm {
namespace {

constexpr double kFloatsPerMiB = 1024.0 * 1024.0 / 4.0;

// A model's parameters laid out as the trainer does: dense-routed tensors placed last.
struct Declared {
  ParamStore store;
  std::vector<LayerParams> layers;
};

Declared declare(const std::string& preset, const BucketPlanConfig& config) {
  auto mc = parse_model_spec(preset);
  SPARQ_CHECK(mc.is_ok(), "{}", mc.status().message());
  // The smallest run shape: activations are irrelevant to the plan.
  auto model = make_model(*mc, {1, mc->is_language_model() ? 1 : 0});
  SPARQ_CHECK(model.is_ok(), "{}", model.status().message());
  Declared d;
  (*model)->declare(d.store);
  d.store.allocate(ExecContext::cpu(), [&](const ParamSpec& spec) { return config.is_dense(spec); });
  for (const auto& l : (*model)->layers()) d.layers.push_back({l.name, l.tensors});
  return d;
}

void expect_same_plan(const BucketPlan& a, const BucketPlan& b) {
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    const Bucket &x = a.buckets()[i], &y = b.buckets()[i];
    EXPECT_EQ(x.index, y.index);
    EXPECT_EQ(x.range, y.range) << "bucket " << i;
    EXPECT_EQ(x.ready_count, y.ready_count) << "bucket " << i;
    EXPECT_EQ(x.tensors, y.tensors) << "bucket " << i;
    EXPECT_EQ(x.dense, y.dense) << "bucket " << i;
  }
}

void expect_valid_plan(const BucketPlan& plan, const Declared& d, const BucketPlanConfig& config) {
  const ParamStore& store = d.store;
  const auto& buckets = plan.buckets();
  ASSERT_FALSE(buckets.empty());

  // Launch order: compressed buckets first, and each region walks down the layout with every
  // bucket ending exactly where the one launched before it begins. With the region bounds
  // ([0, place_last_offset) and [place_last_offset, flat_numel)) that is an exact tiling.
  const std::int64_t dense_start = store.place_last_offset();
  std::int64_t ready_total = 0;
  for (std::size_t i = 0; i < buckets.size(); ++i) {
    const Bucket& b = buckets[i];
    EXPECT_EQ(b.index, static_cast<int>(i));
    EXPECT_GE(b.range.count, b.ready_count) << "bucket " << i;
    EXPECT_GT(b.ready_count, 0) << "bucket " << i;
    const bool opens_region = i == 0 || buckets[i - 1].dense != b.dense;
    const bool closes_region = i + 1 == buckets.size() || buckets[i + 1].dense != b.dense;
    if (opens_region) {
      EXPECT_TRUE(i == 0 || b.dense) << "compressed bucket " << i << " after a dense one";
      EXPECT_EQ(b.range.end(), b.dense ? store.flat_numel() : dense_start) << "bucket " << i;
    } else {
      EXPECT_EQ(b.range.end(), buckets[i - 1].range.offset) << "bucket " << i;
    }
    if (closes_region) {
      EXPECT_EQ(b.range.offset, b.dense ? dense_start : 0) << "bucket " << i;
    }
    ready_total += b.ready_count;
  }
  EXPECT_EQ(ready_total, store.param_count());

  // Every tensor's elements lie in buckets that name it, exactly once in all.
  std::map<std::string, int> buckets_naming;
  std::set<std::string> in_first_bucket(buckets[0].tensors.begin(), buckets[0].tensors.end());
  for (const auto& b : buckets) {
    for (const auto& t : b.tensors) ++buckets_naming[t];
  }
  for (const auto& e : store.entries()) {
    std::int64_t covered = 0;
    for (auto [index, count] : plan.overlaps(e.range())) {
      const auto& names = buckets[index].tensors;
      EXPECT_NE(std::find(names.begin(), names.end(), e.spec.name), names.end())
          << e.spec.name << " has elements in bucket " << index << " which does not name it";
      EXPECT_EQ(buckets[index].dense, config.is_dense(e.spec)) << e.spec.name;
      covered += count;
    }
    EXPECT_EQ(covered, e.numel) << e.spec.name;
    EXPECT_EQ(buckets_naming[e.spec.name], static_cast<int>(plan.overlaps(e.range()).size()))
        << e.spec.name;
  }

  if (config.bucket_mb == 0.0) {
    // One bucket per layer and region: a bucket holds one layer, and no layer is cut.
    std::map<std::string, int> layer_of;
    for (std::size_t l = 0; l < d.layers.size(); ++l) {
      for (const auto& t : d.layers[l].tensors) layer_of[t] = static_cast<int>(l);
    }
    std::set<std::pair<bool, int>> seen;
    for (const auto& b : buckets) {
      const int layer = layer_of.at(b.tensors.front());
      for (const auto& t : b.tensors) EXPECT_EQ(layer_of.at(t), layer) << "bucket " << b.index;
      EXPECT_TRUE(seen.insert({b.dense, layer}).second)
          << d.layers[layer].name << " is cut into several buckets";
    }
    return;
  }
  // Caps, in elements. The first compressed bucket has the small first cap; every other bucket
  // (dense ones included) the ordinary one. Only a lone tensor above its cap may be split, and
  // then each chunk is within the cap.
  const auto cap = static_cast<std::int64_t>(config.bucket_mb * kFloatsPerMiB);
  const auto first_cap = static_cast<std::int64_t>(config.first_bucket_mb * kFloatsPerMiB);
  for (const auto& b : buckets) {
    const std::int64_t limit = (b.index == 0 && !b.dense) ? first_cap : cap;
    EXPECT_LE(b.ready_count, limit) << "bucket " << b.index << " (" << b.tensors.front() << ")";
    if (b.tensors.size() > 1) {
      for (const auto& t : b.tensors) {
        EXPECT_EQ(buckets_naming[t], 1) << t << " is split but shares bucket " << b.index;
      }
    }
  }
  for (const auto& [name, count] : buckets_naming) {
    const std::int64_t split_cap = in_first_bucket.count(name) ? first_cap : cap;
    if (count > 1) {
      EXPECT_GT(store.entry(name).numel, split_cap) << name << " split needlessly";
    }
  }
  // The first bucket holds the compressed tensor highest in the layout: backward's first.
  const ParamEntry* top = nullptr;
  for (const auto& e : store.entries()) {
    if (!config.is_dense(e.spec) && (!top || e.offset > top->offset)) top = &e;
  }
  ASSERT_NE(top, nullptr);
  EXPECT_FALSE(buckets.front().dense);
  EXPECT_EQ(buckets.front().tensors.front(), top->spec.name);
}

// Builds and checks the plan for `config` on `d` (laid out with config.is_dense), twice.
void check_plan(const std::string& preset, const Declared& d, const BucketPlanConfig& config) {
  SCOPED_TRACE(
      fmt::format("{} first_bucket_mb={} bucket_mb={} dense_patterns={} "
                  "min_compress_numel={}",
                  preset, config.first_bucket_mb, config.bucket_mb, config.dense_patterns.size(),
                  config.min_compress_numel));
  auto plan = BucketPlan::build(d.store, d.layers, config);
  ASSERT_TRUE(plan.is_ok()) << plan.status().message();
  expect_valid_plan(*plan, d, config);
  auto again = BucketPlan::build(d.store, d.layers, config);
  ASSERT_TRUE(again.is_ok());
  expect_same_plan(*plan, *again);
  EXPECT_NE(plan->describe().find(std::to_string(plan->size()) + " buckets"), std::string::npos);
  if (!config.dense_patterns.empty()) {
    EXPECT_TRUE(plan->buckets().back().dense) << "no tensor was routed dense";
  }
}

// The defaults (first bucket 1 MiB, then 25 MiB) and per-layer buckets, each without and with
// dense routing of biases, norms and small tensors.
void check_all_configs(const std::string& preset) {
  BucketPlanConfig plain;
  {
    const Declared d = declare(preset, plain);
    check_plan(preset, d, plain);
    plain.bucket_mb = 0;
    check_plan(preset, d, plain);
  }
  BucketPlanConfig dense;
  dense.dense_patterns = {"*.bias", "*ln*", "*norm*", "*.bn.*"};
  dense.min_compress_numel = 4096;
  const Declared d = declare(preset, dense);
  check_plan(preset, d, dense);
  dense.bucket_mb = 0;
  check_plan(preset, d, dense);
}

TEST(BucketPlanPresets, Gpt2_124M) { check_all_configs("gpt2-124M"); }
TEST(BucketPlanPresets, BertBase) { check_all_configs("bert-base"); }
TEST(BucketPlanPresets, Vgg16) { check_all_configs("vgg16"); }
TEST(BucketPlanPresets, Gpt2Tiny) { check_all_configs("gpt2-tiny"); }

}  // namespace
}  // namespace sparq::comm
