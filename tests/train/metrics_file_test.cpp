// log.metrics' file: a record that cannot be written is counted, not fatal, and a resumed
// run drops the incomplete last record an interrupted run left before appending its own.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "train/metrics.h"

namespace sparq::train {
namespace {

std::string metrics_scratch(const std::string& name) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("sparq_metrics_file_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return (dir / name).string();
}

std::string whole_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void put_file(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

TEST(MetricsFile, AFailedWriteIsCountedAndTheRunGoesOn) {
  if (!std::filesystem::exists("/dev/full")) GTEST_SKIP() << "no /dev/full on this system";
  JsonlWriter writer;
  ASSERT_TRUE(writer.open("/dev/full", /*append=*/false).is_ok());
  writer.write("{\"event\":\"step\",\"step\":1}");
  writer.write("{\"event\":\"step\",\"step\":2}");
  EXPECT_EQ(writer.lost_records(), 2);
}

TEST(MetricsFile, WrittenRecordsAreNotCountedAsLost) {
  const std::string path = metrics_scratch("ok.jsonl");
  JsonlWriter writer;
  ASSERT_TRUE(writer.open(path, /*append=*/false).is_ok());
  writer.write("{\"a\":1}");
  EXPECT_EQ(writer.lost_records(), 0);
  EXPECT_EQ(whole_file(path), "{\"a\":1}\n");
}

TEST(MetricsFile, AppendingDropsAnIncompleteLastRecord) {
  const std::string path = metrics_scratch("resumed.jsonl");
  put_file(path, "{\"step\":1}\n{\"step\":2}\n{\"step\":3,\"lo");
  {
    JsonlWriter writer;
    ASSERT_TRUE(writer.open(path, /*append=*/true).is_ok());
    writer.write("{\"step\":3}");
  }
  EXPECT_EQ(whole_file(path), "{\"step\":1}\n{\"step\":2}\n{\"step\":3}\n");
  // A complete file is appended to as it is.
  {
    JsonlWriter writer;
    ASSERT_TRUE(writer.open(path, /*append=*/true).is_ok());
    writer.write("{\"step\":4}");
  }
  EXPECT_EQ(whole_file(path), "{\"step\":1}\n{\"step\":2}\n{\"step\":3}\n{\"step\":4}\n");
}

TEST(MetricsFile, AnIncompleteRecordLongerThanOneReadIsDroppedWhole) {
  // The partial line spans more than the 64 KiB read backwards at a time.
  const std::string path = metrics_scratch("long.jsonl");
  put_file(path, "{\"step\":1}\n" + std::string(200000, 'x'));
  {
    JsonlWriter writer;
    ASSERT_TRUE(writer.open(path, /*append=*/true).is_ok());
    writer.write("{\"step\":2}");
  }
  EXPECT_EQ(whole_file(path), "{\"step\":1}\n{\"step\":2}\n");
  // A file that is one incomplete line is emptied.
  put_file(path, std::string(70000, 'y'));
  {
    JsonlWriter writer;
    ASSERT_TRUE(writer.open(path, /*append=*/true).is_ok());
    writer.write("{\"step\":1}");
  }
  EXPECT_EQ(whole_file(path), "{\"step\":1}\n");
}

}  // namespace
}  // namespace sparq::train
