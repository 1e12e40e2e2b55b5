// A model's state tensors (VGG's BatchNorm running statistics) travel with its parameters
// through --export-safetensors and train.init_from: an export kept the parameters only, and
// the imported VGG evaluated with its initial statistics (review, 2026-12-06: 16% top-1 where
// the run had reached 72%). Files without them (older exports) still load, with the names of
// what they lack; a file with some but not all is refused.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "core/tensor_copy.h"
#include "train/safetensors.h"
#include "train/trainer.h"

namespace sparq::train {
namespace {

const char kVgg[] = R"(model: {preset: vgg-tiny}
data: {source: synthetic_images, synthetic: {train_images: 64, eval_images: 8}}
optim: {name: sgd, lr: 0.01}
train: {steps: 3, micro_batch: 4, seed: 5}
log: {progress_interval: 0})";

std::vector<float> state_values(const std::vector<StateTensor>& state) {
  std::vector<float> all, staging;
  for (const StateTensor& s : state) {
    const float* host = host_floats(s.tensor, staging);
    all.insert(all.end(), host, host + s.tensor.numel());
  }
  return all;
}

Result<std::unique_ptr<Trainer>> create(comm::Communicator& comm, std::vector<std::string> sets) {
  auto config = parse_train_config(kVgg, "vgg", sets);
  SPARQ_CHECK(config.is_ok(), "{}", config.status().message());
  return Trainer::create(*config, comm);
}

std::unique_ptr<Trainer> make_trainer(comm::Communicator& comm, std::vector<std::string> sets) {
  auto trainer = create(comm, std::move(sets));
  SPARQ_CHECK(trainer.is_ok(), "{}", trainer.status().message());
  return std::move(trainer).value();
}

TEST(ModelStateExport, BatchNormStatisticsTravelThroughExportAndInitFrom) {
  auto comm = comm::make_self_communicator();
  const std::string dir = ::testing::TempDir() + "/model_state_export";
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/vgg.safetensors";
  auto trained = make_trainer(*comm, {});
  ASSERT_TRUE(trained->run().is_ok());
  const std::vector<StateTensor> state = trained->model_state();
  ASSERT_FALSE(state.empty());
  ASSERT_TRUE(export_safetensors(trained->host_params(), path, {}, state).is_ok());

  auto file = SafetensorsFile::read(path);
  ASSERT_TRUE(file.is_ok()) << file.status().message();
  ASSERT_NE(file->find(state.front().name), nullptr) << state.front().name;
  auto fresh = make_trainer(*comm, {});
  const std::vector<float> initial = state_values(fresh->model_state());
  ASSERT_NE(state_values(state), initial);  // training moved them
  auto imported = make_trainer(*comm, {"train.init_from=" + path});
  EXPECT_EQ(state_values(imported->model_state()), state_values(state));
  EXPECT_EQ(imported->param_checksum(), trained->param_checksum());

  // A parameters-only file (an export from before the state was exported) loads (with a
  // warning naming what it lacks); the statistics keep their initial values.
  const std::string params_only = dir + "/params_only.safetensors";
  ASSERT_TRUE(export_safetensors(trained->host_params(), params_only).is_ok());
  auto old_export = make_trainer(*comm, {"train.init_from=" + params_only});
  EXPECT_EQ(state_values(old_export->model_state()), initial);
  EXPECT_EQ(old_export->param_checksum(), trained->param_checksum());
  // Some of the state but not all: refused, naming what is missing.
  const std::vector<StateTensor> first_only(state.begin(), state.begin() + 1);
  const std::string partial = dir + "/partial.safetensors";
  ASSERT_TRUE(export_safetensors(trained->host_params(), partial, {}, first_only).is_ok());
  auto refused = create(*comm, {"train.init_from=" + partial});
  ASSERT_FALSE(refused.is_ok());
  const std::string& m = refused.status().message();
  EXPECT_NE(m.find("lacks " + std::to_string(state.size() - 1)), std::string::npos) << m;
  EXPECT_NE(m.find(state[1].name), std::string::npos) << m;
  // A state tensor named like a parameter cannot be exported.
  const std::vector<StateTensor> clash = {
      {trained->store().entries().front().spec.name, state[0].tensor}};
  EXPECT_FALSE(export_safetensors(trained->host_params(), partial, {}, clash).is_ok());
}

// An export through a symbolic link replaces the file the link names and keeps the link: the
// rename put a regular file in the link's place and left its file as it was (and, as root,
// replaced /dev/full or /dev/null by a regular file: review, 2026-12-06).
TEST(ModelStateExport, AnExportThroughALinkReplacesTheFileItNames) {
  auto comm = comm::make_self_communicator();
  const std::string dir = ::testing::TempDir() + "/export_link";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string target = dir + "/real.safetensors", link = dir + "/link.safetensors";
  { std::ofstream(target) << "old"; }
  std::filesystem::create_symlink(target, link);
  auto trainer = make_trainer(*comm, {"train.steps=1"});
  ASSERT_TRUE(export_safetensors(trainer->host_params(), link, {}, trainer->model_state()).is_ok());
  EXPECT_TRUE(std::filesystem::is_symlink(link));
  auto file = SafetensorsFile::read(target);
  ASSERT_TRUE(file.is_ok()) << file.status().message();
  EXPECT_NE(file->find(trainer->model_state().front().name), nullptr);
  // log.trace likewise (Trainer::write_trace kept its own rename: self-review, 2026-12-06).
  const std::string trace_target = dir + "/trace_real.json", trace_link = dir + "/trace.json";
  { std::ofstream(trace_target) << "old"; }
  std::filesystem::create_symlink(trace_target, trace_link);
  auto traced = make_trainer(*comm, {"train.steps=2", "log.trace=" + trace_link,
                                     "log.trace_start=0", "log.trace_steps=1"});
  ASSERT_TRUE(traced->run().is_ok());
  EXPECT_TRUE(std::filesystem::is_symlink(trace_link));
  std::ifstream in(trace_target);
  const std::string json((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(json.rfind("{\"displayTimeUnit\"", 0), 0u) << json.substr(0, 40);
}

}  // namespace
}  // namespace sparq::train
