// The model surface the WFBP scheduler relies on: parameter counts equal PyTorch's for
// every preset, layers() covers every tensor once in forward order, and backward reports
// each layer exactly once, in reverse order, with final gradients and ranges that tile the
// gradient buffer.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "core/ops.h"
#include "models/model.h"
#include "models/model_test_util.h"

namespace sparq {
namespace {

TEST(ModelLayers, ParameterCountsMatchPyTorchForEveryPreset) {
  const std::string path = std::string(SPARQ_SOURCE_DIR) + "/tests/reference/models/param_counts.txt";
  std::ifstream in(path);
  ASSERT_TRUE(in) << "cannot open " << path;
  std::set<std::string> presets_seen;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::int64_t expected = 0;
    words >> expected;
    std::string spec;
    std::getline(words >> std::ws, spec);
    auto config = parse_model_spec(spec);
    ASSERT_TRUE(config.is_ok()) << config.status().message();
    ParamStore store;
    // Shape {1, 1} keeps the activations of the large presets trivial; counts do not depend on it.
    make_model(config.value(), {1, 1}).value()->declare(store);
    EXPECT_EQ(store.param_count(), expected) << spec;
    presets_seen.insert(config->preset);
  }
  for (const auto& name : model_preset_names()) {
    EXPECT_TRUE(presets_seen.count(name)) << name << " has no reference count";
  }
}

// The specs and shapes the readiness tests run on: tiny but with every kind of layer.
struct Case {
  const char* spec;
  RunShape shape;
};
const Case kCases[] = {
    {"gpt2-tiny n_layer=2", {2, 16}},
    {"bert-tiny nsp=1", {3, 12}},
    {"bert-tiny", {2, 8}},
    {"vgg-tiny", {2, 0}},
};

TEST(ModelLayers, LayersCoverEveryTensorOnceInForwardOrder) {
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.spec);
    ParamStore store;
    auto model = testing::bound_model(c.spec, c.shape, store);
    std::map<std::string, int> position;
    for (std::size_t i = 0; i < store.entries().size(); ++i) position[store.entries()[i].spec.name] = i;
    std::set<std::string> seen;
    int last = -1;
    for (const LayerParams& layer : model->layers()) {
      for (const std::string& name : layer.tensors) {
        ASSERT_TRUE(position.count(name)) << layer.name << " lists unknown tensor " << name;
        EXPECT_TRUE(seen.insert(name).second) << name << " listed twice";
        EXPECT_GT(position[name], last) << name << " of " << layer.name << " is out of forward order";
        last = position[name];
      }
    }
    EXPECT_EQ(seen.size(), store.entries().size());
  }
}

struct Report {
  int index;
  std::vector<ParamRange> ranges;
  std::vector<float> grads;  // the layer's gradients at the moment it was reported
};

std::vector<Report> run_backward(Model& model, const ParamStore& store, const Batch& batch) {
  std::vector<Report> reports;
  model.forward(batch);
  model.backward([&](const GradReady& ready) {
    Report r{ready.index, *ready.ranges, {}};
    for (const ParamRange& range : r.ranges) {
      const float* g = store.grads() + range.offset;
      r.grads.insert(r.grads.end(), g, g + range.count);
    }
    reports.push_back(std::move(r));
  });
  return reports;
}

void check_reports(const Model& model, const ParamStore& store, const std::vector<Report>& reports,
                   bool contiguous_layout) {
  const auto& layers = model.layers();
  ASSERT_EQ(reports.size(), layers.size()) << "one report per layer";
  std::vector<ParamRange> all;
  for (std::size_t k = 0; k < reports.size(); ++k) {
    const Report& r = reports[k];
    EXPECT_EQ(r.index, static_cast<int>(layers.size() - 1 - k)) << "report " << k;
    ASSERT_EQ(r.ranges.size(), layers[r.index].tensors.size());
    for (std::size_t i = 0; i < r.ranges.size(); ++i) {
      EXPECT_EQ(r.ranges[i], store.entry(layers[r.index].tensors[i]).range())
          << layers[r.index].tensors[i];
      all.push_back(r.ranges[i]);
    }
    if (contiguous_layout && k > 0) {  // walking the layout from its end to its start
      EXPECT_LT(r.ranges.front().offset, reports[k - 1].ranges.front().offset);
    }
    // What the layer reported is final: later layers' backward never touched it again.
    std::size_t at = 0;
    for (const ParamRange& range : r.ranges) {
      for (std::int64_t j = 0; j < range.count; ++j, ++at) {
        ASSERT_EQ(r.grads[at], store.grads()[range.offset + j])
            << layers[r.index].name << " changed after it was reported";
      }
    }
  }
  // The ranges tile the gradient buffer: disjoint, every tensor once, the only gaps being
  // the alignment padding, from offset 0 to the end of the flat layout.
  std::sort(all.begin(), all.end(), [](auto& a, auto& b) { return a.offset < b.offset; });
  std::int64_t cursor = 0, covered = 0;
  for (const ParamRange& range : all) {
    EXPECT_GE(range.offset, cursor) << "overlapping ranges";
    EXPECT_LT(range.offset - cursor, ParamStore::kAlignFloats) << "uncovered gap at " << cursor;
    cursor = range.end();
    covered += range.count;
  }
  EXPECT_EQ(all.size(), store.entries().size());
  EXPECT_EQ(covered, store.param_count());
  EXPECT_EQ(all.front().offset, 0);
  EXPECT_LT(store.flat_numel() - cursor, ParamStore::kAlignFloats);
}

TEST(ModelLayers, BackwardReportsEachLayerOnceInReverseWithFinalGradients) {
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.spec);
    ParamStore store;
    auto model = testing::bound_model(c.spec, c.shape, store);
    testing::RandomBatch data(model->config(), c.shape.micro_batch, c.shape.seq_len, 3);
    check_reports(*model, store, run_backward(*model, store, data.batch), true);
    // Gradient accumulation: a second micro-batch reports the same ranges again.
    check_reports(*model, store, run_backward(*model, store, data.batch), true);
  }
}

TEST(ModelLayers, RangesTileWithDenseTensorsPlacedLast) {
  // Biases and norms (no weight decay) at the end of the layout, as the dense bucket wants.
  const auto dense_last = [](const ParamSpec& spec) { return !spec.weight_decay; };
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.spec);
    ParamStore store;
    auto model = testing::bound_model(c.spec, c.shape, store, 1, dense_last);
    ASSERT_LT(store.place_last_offset(), store.flat_numel());
    testing::RandomBatch data(model->config(), c.shape.micro_batch, c.shape.seq_len, 4);
    check_reports(*model, store, run_backward(*model, store, data.batch), false);
  }
}

TEST(ModelLayers, BackwardWithoutForwardOrBindIsRefused) {
  auto model = make_model(parse_model_spec("gpt2-tiny n_layer=1").value(), {1, 4}).value();
  EXPECT_DEATH(model->backward(), "backward\\(\\) before bind\\(\\)");
  ParamStore store;
  model->declare(store);
  store.allocate();
  model->bind(store);
  EXPECT_DEATH(model->backward(), "without a forward");
}

}  // namespace
}  // namespace sparq
