// log.metrics' file: a record that cannot be written is counted, not fatal, and a resumed
// run drops the incomplete last record an interrupted run left before appending its own, and
// sets aside the records past the step it resumes.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <csignal>
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

// A disk that fills mid-record and frees space later: the fragment written before the error
// is cut off, so the next record is a line of its own (it was glued to the fragment, which
// made both unreadable: review, 2026-12-06). A file-size limit stands in for the full disk.
TEST(MetricsFile, APartlyWrittenRecordIsCutOffBeforeTheNext) {
  const std::string path = metrics_scratch("partial.jsonl");
  JsonlWriter writer;
  ASSERT_TRUE(writer.open(path, /*append=*/false).is_ok());
  writer.write("{\"step\":1}");
  struct rlimit old_limit {};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old_limit), 0);
  const auto old_handler = std::signal(SIGXFSZ, SIG_IGN);  // EFBIG instead of the signal
  struct rlimit limit = old_limit;
  limit.rlim_cur = std::filesystem::file_size(path) + 10;  // 10 bytes of the next record fit
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &limit), 0);
  writer.write("{\"step\":2,\"loss\":1.5,\"lr\":0.001}");
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &old_limit), 0);
  std::signal(SIGXFSZ, old_handler);
  EXPECT_EQ(writer.lost_records(), 1);
  writer.write("{\"step\":3}");
  EXPECT_EQ(whole_file(path), "{\"step\":1}\n{\"step\":3}\n");
}

// log.metrics=/dev/stdout with standard output in a file (here /dev/fd/N onto a file opened
// for appending): written through that descriptor, never truncated. Opened anew with O_TRUNC
// it emptied what `>>` had kept, and with an offset of its own the stream's later output
// overwrote records (self-review, 2026-12-06).
TEST(MetricsFile, AStreamDescriptorIsWrittenThroughNotTruncated) {
  const std::string path = metrics_scratch("stream.log");
  put_file(path, "an earlier line\n");
  const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND);
  ASSERT_GE(fd, 0);
  {
    JsonlWriter writer;
    ASSERT_TRUE(writer.open("/dev/fd/" + std::to_string(fd), /*append=*/false).is_ok());
    writer.write("{\"step\":1}");
    ASSERT_EQ(::write(fd, "a log line\n", 11), 11);  // the stream's own output, after it
    writer.write("{\"step\":2}");
  }
  ::close(fd);
  EXPECT_EQ(whole_file(path), "an earlier line\n{\"step\":1}\na log line\n{\"step\":2}\n");
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

// A resume at step S: records past S (steps redone, or an abandoned history) leave the file
// for "<file>.past-<S>"; study.py read the abandoned history's last evaluation as the run's
// (review, 2026-12-07).
TEST(MetricsFile, AResumeSetsAsideTheRecordsPastItsStep) {
  const std::string path = metrics_scratch("branch.jsonl");
  std::filesystem::remove(path + ".past-2");
  const std::string upto2 =
      "{\"event\":\"step\",\"step\":1}\n{\"event\":\"step\",\"step\":2}\n"
      "{\"event\":\"eval\",\"step\":2}\n";
  const std::string past =
      "{\"event\":\"step\",\"step\":3}\n{\"event\":\"eval\",\"step\":4}\n"
      "{\"event\":\"end\",\"step\":4}\n";
  put_file(path, upto2 + past + "{\"event\":\"step\",\"st");  // and a cut-off record
  const auto said = set_aside_records_past(path, 2);
  ASSERT_EQ(said.size(), 1u);
  EXPECT_NE(said[0].find("held 3 records past step 2"), std::string::npos) << said[0];
  EXPECT_EQ(whole_file(path), upto2);
  EXPECT_EQ(whole_file(path + ".past-2"), past);
  // Nothing past the step: nothing done, no file.
  EXPECT_TRUE(set_aside_records_past(path, 2).empty());
  EXPECT_TRUE(set_aside_records_past(path, 7).empty());
  EXPECT_FALSE(std::filesystem::exists(path + ".past-2.2"));
  // A second set-aside at the same step takes the next free name.
  put_file(path, upto2 + past);
  ASSERT_EQ(set_aside_records_past(path, 2).size(), 1u);
  EXPECT_EQ(whole_file(path + ".past-2.2"), past);
  EXPECT_TRUE(set_aside_records_past(metrics_scratch("missing.jsonl"), 1).empty());
  EXPECT_TRUE(set_aside_records_past("/dev/stdout", 1).empty());
}

}  // namespace
}  // namespace sparq::train
