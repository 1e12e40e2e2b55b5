// apps/train end to end, the overlap of communication with backward: a Chrome trace of a real
// run shows the first bucket handed to the engine before backward ends (the overlap WFBP exists
// for), and the local norm summed range by range as backward reports them (so that buckets need
// not wait for it) is the norm of the whole gradient measured at once.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <tuple>
#include <utility>

#include "common/subprocess.h"
#include "train_app_util.h"

namespace {

namespace fs = std::filesystem;

using sparq::testing::events;
using sparq::testing::field;
using sparq::testing::ProcessResult;
using sparq::testing::read_lines;
using sparq::testing::run_train;
using sparq::testing::small_default_run;

// Per (rank, step) of a traced run: whether the first bucket was submitted before the last
// layer's backward ended (before the backward of the whole model: overlap possible).
std::map<std::pair<int, int>, bool> first_bucket_before_backward_ends(const fs::path& dir,
                                                                      const std::string& name,
                                                                      const std::string& extra) {
  const fs::path trace = dir / ("not_yet_" + name) / "trace.json";  // its folder is made
  const ProcessResult r =
      run_train(2, small_default_run(dir, name) + " --set log.trace=" + trace.string() +
                       " --set log.trace_start=4 --set log.trace_steps=2" + extra);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  std::ifstream in(trace);
  const std::string json((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_FALSE(json.empty());
  // (rank, step) -> the end of its last layer's backward span, the first-bucket submission.
  std::map<std::pair<int, int>, double> layers_end, enqueue0;
  std::set<std::pair<int, int>> backward;
  const std::regex event(
      R"re(\{"name":"([^"]*)","cat":"([^"]*)","ph":"X","ts":([0-9]+),"dur":([0-9]+),"pid":([0-9]+),"tid":[0-9]+,"args":\{"step":([0-9]+))re");
  for (auto it = std::sregex_iterator(json.begin(), json.end(), event);
       it != std::sregex_iterator(); ++it) {
    const std::smatch& m = *it;
    const double start = std::stod(m[3]), end = start + std::stod(m[4]);
    const auto key = std::make_pair(std::stoi(m[5]), std::stoi(m[6]));
    if (m[1] == "backward 0") backward.insert(key);
    if (m[1] == "enqueue bucket 0") enqueue0[key] = start;
    if (m[2] == "backward.layer") layers_end[key] = std::max(layers_end[key], end);
  }
  EXPECT_EQ(backward.size(), 4u) << "2 ranks x 2 traced steps";
  // Steps numbered as the log and the metrics number them (from 1).
  EXPECT_NE(r.output.find("wrote trace of steps 5..6"), std::string::npos) << r.output;
  std::map<std::pair<int, int>, bool> before;
  for (const auto& key : backward) {
    EXPECT_TRUE(key.second == 5 || key.second == 6) << "trace step " << key.second;
    EXPECT_TRUE(enqueue0.count(key) && layers_end.count(key))
        << "rank " << key.first << " step " << key.second;
    before[key] = enqueue0[key] < layers_end[key];
  }
  return before;
}

// The Chrome trace of a real run: per rank, the first bucket was handed to the engine before
// that step's backward ended (the overlap WFBP exists for), and the layer and exchange spans
// are present. optim.communicate: update without clipping overlaps too (it held every bucket
// until backward ended, only to log the local norm: review, 2026-12-07); with local clipping
// the buckets wait for the whole local gradient's norm.
TEST(TrainApp, TraceShowsCommunicationOverlappingBackward) {
  const fs::path dir = sparq::testing::scratch_dir("train_app_overlap", "trace");
  const std::string update = " --set optim.communicate=update --set optim.clip_norm=";
  for (const auto& [name, extra, overlaps] :
       {std::tuple{"gradient", std::string(), true}, std::tuple{"update", update + "0", true},
        std::tuple{"update_clipped", update + "1", false}}) {
    for (const auto& [key, before] : first_bucket_before_backward_ends(dir, name, extra)) {
      EXPECT_EQ(before, overlaps) << name << ": rank " << key.first << " step " << key.second;
    }
  }
  fs::remove_all(dir);
}

// Without clipping the local norm is summed range by range as backward reports them
// (holds_buckets_for_local_norm); it must be the norm the held path measures over the whole
// gradient at once, and the training the same: clip_norm 1e30 holds and clips by exactly 1.
TEST(TrainApp, TheLocalNormByRangeIsTheHeldPathsNorm) {
  const fs::path dir = sparq::testing::scratch_dir("train_app_overlap", "local_norm");
  const std::string update =
      " --set optim.communicate=update --set train.accumulation=2 --set optim.clip_norm=";
  for (const char* clip : {"0", "1e30"}) {
    const ProcessResult r =
        run_train(2, small_default_run(dir, std::string("clip") + clip) + update + clip);
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
  const auto by_range = events(read_lines(dir / "clip0.jsonl"), "step");
  const auto held = events(read_lines(dir / "clip1e30.jsonl"), "step");
  ASSERT_EQ(by_range.size(), 10u);
  ASSERT_EQ(held.size(), 10u);
  for (std::size_t i = 0; i < held.size(); ++i) {
    ASSERT_FALSE(field(held[i], "grad_norm").empty());
    // Summed in another order: equal to float rounding, not bit for bit.
    EXPECT_NEAR(std::stod(field(by_range[i], "grad_norm")), std::stod(field(held[i], "grad_norm")),
                1e-6 * std::stod(field(held[i], "grad_norm")))
        << "step " << i + 1;
  }
  EXPECT_EQ(field(events(read_lines(dir / "clip0.jsonl"), "end").back(), "param_checksum"),
            field(events(read_lines(dir / "clip1e30.jsonl"), "end").back(), "param_checksum"));
  fs::remove_all(dir);
}

}  // namespace
