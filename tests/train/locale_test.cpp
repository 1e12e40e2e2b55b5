// Note [Locale-free numbers] (core/decimal_text.h): a host program in a comma-decimal locale
// reads sparq's configs as any other. The test makes a de_DE locale of its own with localedef
// (LOCPATH), and skips where the system has neither localedef nor its locale sources.
#include <gtest/gtest.h>

#include <clocale>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "models/config.h"
#include "train/train_config.h"

namespace sparq::train {
namespace {

TEST(Locale, NumbersReadTheSameInACommaDecimalLocale) {
  const std::string dir = ::testing::TempDir() + "/sparq_locale";
  std::filesystem::create_directories(dir);
  const std::string made = "localedef -i de_DE -f UTF-8 " + dir + "/de_DE.UTF-8 >/dev/null 2>&1";
  if (std::system(made.c_str()) != 0) {
    GTEST_SKIP() << "localedef cannot make de_DE.UTF-8 here (no locale sources): skipped";
  }
  ASSERT_EQ(::setenv("LOCPATH", dir.c_str(), 1), 0);
  const std::string before = std::setlocale(LC_NUMERIC, nullptr);
  if (std::setlocale(LC_NUMERIC, "de_DE.UTF-8") == nullptr) {
    ::unsetenv("LOCPATH");
    GTEST_SKIP() << "setlocale refused the de_DE.UTF-8 made in " << dir << ": skipped";
  }
  ASSERT_EQ(std::string(std::localeconv()->decimal_point), ",") << "not a comma-decimal locale";
  auto config = parse_train_config(
      "model: {preset: gpt2-tiny, dropout: 0.25}\n"
      "compress: {name: lbs, lbs: {density: 0.01}}\n",
      "locale.yaml", {"optim.lr=0.5e-3"});
  auto model = make_model_config("gpt2-tiny", {{"attn_dropout", "0.125"}});
  std::setlocale(LC_NUMERIC, before.c_str());
  ::unsetenv("LOCPATH");
  ASSERT_TRUE(config.is_ok()) << config.status().message();
  EXPECT_EQ(config->model.dropout, 0.25f);
  EXPECT_EQ(config->schedule.lr, 0.5e-3);
  ASSERT_TRUE(model.is_ok()) << model.status().message();
  EXPECT_EQ(model->attn_dropout, 0.125f);
}

}  // namespace
}  // namespace sparq::train
