#include <gtest/gtest.h>

#include "train/yaml_reader.h"

namespace sparq::train {
namespace {

const char* kConfig = R"(
model:
  preset: gpt2-tiny
  n_layer: 4
optim:
  lr: 6.0e-4
  betas: [0.9, 0.95]
  nesterov: false
compress:
  name: lbs
  density: 0.01
)";

TEST(YamlReader, ReadsTypedValuesAndKeepsDefaults) {
  auto r = YamlReader::from_string(kConfig, "test.yaml");
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  std::string preset, missing = "default";
  int layers = 0;
  double lr = 0;
  bool nesterov = true;
  std::vector<std::string> betas;
  ASSERT_TRUE(r->get("model.preset", &preset).is_ok());
  ASSERT_TRUE(r->get("model.n_layer", &layers, {.min = 1}).is_ok());
  ASSERT_TRUE(r->get("optim.lr", &lr, {.min = 0.0}).is_ok());
  ASSERT_TRUE(r->get("optim.nesterov", &nesterov).is_ok());
  ASSERT_TRUE(r->get("optim.betas", &betas).is_ok());
  ASSERT_TRUE(r->get("model.missing", &missing).is_ok());
  EXPECT_EQ(preset, "gpt2-tiny");
  EXPECT_EQ(layers, 4);
  EXPECT_DOUBLE_EQ(lr, 6e-4);
  EXPECT_FALSE(nesterov);
  EXPECT_EQ(betas, (std::vector<std::string>{"0.9", "0.95"}));
  EXPECT_EQ(missing, "default");
  // The compress section has not been read yet: its keys are unknown so far.
  EXPECT_EQ(r->unknown_keys(), (std::vector<std::string>{"compress.name", "compress.density"}));
  std::vector<std::pair<std::string, std::string>> section;
  ASSERT_TRUE(r->take_section("compress", &section).is_ok());
  EXPECT_EQ(section.size(), 2u);
  EXPECT_EQ(section[1].first, "density");
  EXPECT_EQ(section[1].second, "0.01");
  EXPECT_TRUE(r->check_no_unknown_keys().is_ok());
}

TEST(YamlReader, ErrorsNameFileAndKey) {
  auto r = YamlReader::from_string("optim:\n  lr: fast\n  steps: -3\n  typo_key: 1\n", "x.yaml");
  ASSERT_TRUE(r.is_ok());
  double lr = 0;
  std::int64_t steps = 0;
  EXPECT_EQ(r->get("optim.lr", &lr).message(), "x.yaml: optim.lr: expected a number, got 'fast'");
  EXPECT_EQ(r->get("optim.steps", &steps, {.min = 1}).message(),
            "x.yaml: optim.steps: must be >= 1, got -3");
  EXPECT_EQ(r->check_no_unknown_keys().message(), "x.yaml: unknown key optim.typo_key");
  std::string kind = "adamw";
  auto r2 = YamlReader::from_string("optim:\n  name: lamb\n", "y.yaml");
  EXPECT_EQ(r2->get_choice("optim.name", &kind, {"sgd", "adam", "adamw"}).message(),
            "y.yaml: optim.name: 'lamb' is not one of sgd, adam, adamw");
  EXPECT_FALSE(YamlReader::from_string("a: [1, 2\n", "bad.yaml").is_ok());
  EXPECT_FALSE(YamlReader::from_string("- 1\n- 2\n", "list.yaml").is_ok());
  auto missing = YamlReader::from_file("/nonexistent/config.yaml");
  EXPECT_EQ(missing.status().message(), "/nonexistent/config.yaml: cannot open config file");
  // A directory is a Status naming it (it used to throw out of yaml-cpp's LoadFile).
  const std::string dir = ::testing::TempDir();
  auto directory = YamlReader::from_file(dir);
  ASSERT_FALSE(directory.is_ok());
  EXPECT_NE(directory.status().message().find("it is a directory, not a file"), std::string::npos)
      << directory.status().message();
}

TEST(YamlReader, ARepeatedKeyIsAnErrorNamingItsLine) {
  // yaml-cpp keeps both and a lookup finds the first: the later value would be ignored.
  auto twice = YamlReader::from_string("train:\n  steps: 5\noptim:\n  lr: 1\ntrain:\n  steps: 7\n",
                                       "twice.yaml");
  ASSERT_FALSE(twice.is_ok());
  EXPECT_EQ(twice.status().message(),
            "twice.yaml: train: set twice (again at line 5); give each key once");
  auto inner = YamlReader::from_string("optim:\n  lr: 1\n  lr: 2\n", "inner.yaml");
  ASSERT_FALSE(inner.is_ok());
  EXPECT_EQ(inner.status().message(),
            "inner.yaml: optim.lr: set twice (again at line 3); give each key once");
  EXPECT_TRUE(YamlReader::from_string("a: {x: 1}\nb: {x: 1}\n", "ok.yaml").is_ok());
}

TEST(YamlReader, OverridesReplaceAndAddLeaves) {
  auto r = YamlReader::from_string(kConfig, "test.yaml");
  ASSERT_TRUE(r->set_override("optim.lr=0.1").is_ok());
  ASSERT_TRUE(r->set_override("train.steps=300").is_ok());
  EXPECT_FALSE(r->set_override("nonsense").is_ok());
  EXPECT_FALSE(r->set_override("model.preset.x=1").is_ok());  // preset is a leaf, not a section
  double lr = 0;
  std::int64_t steps = 0;
  ASSERT_TRUE(r->get("optim.lr", &lr).is_ok());
  ASSERT_TRUE(r->get("train.steps", &steps).is_ok());
  EXPECT_DOUBLE_EQ(lr, 0.1);
  EXPECT_EQ(steps, 300);
  EXPECT_NE(r->dump().find("steps: 300"), std::string::npos);
}

}  // namespace
}  // namespace sparq::train
