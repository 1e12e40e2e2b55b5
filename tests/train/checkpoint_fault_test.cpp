// The checkpoint write path under faults, in one process: chunked atomic writes, stale
// temporary files, a size-limited file (RLIMIT_FSIZE: write() fails with EFBIG), re-saving a
// complete step, and train.keep_checkpoints retention. The kill-during-save trials and the
// full disk under mpirun are in checkpoint_fault_app_test.cpp.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <thread>

#include "common/file_size_limit.h"
#include "common/fresh_dir.h"
#include "common/temp_files.h"
#include "core/file_io.h"
#include "train/checkpoint.h"
#include "train/train_config.h"

namespace sparq::train {
namespace {

using sparq::testing::temporaries_beside;
using sparq::testing::under_file_size_limit;

namespace fs = std::filesystem;

using sparq::testing::fresh_dir;

AtomicWrite in_chunks_of(std::size_t bytes) {
  AtomicWrite how;
  how.chunk_bytes = bytes;
  return how;
}

std::string pattern(std::size_t n) {
  std::string s(n, '\0');
  for (std::size_t i = 0; i < n; ++i) s[i] = static_cast<char>(i * 131 + 7);
  return s;
}

TEST(AtomicWrite, ChunkedWriteIsExact) {
  const std::string path = fresh_dir("chunks") + "/big.bin";
  const std::string bytes = pattern((std::size_t{7} << 19) + 3);  // 3.5 MiB + 3
  ASSERT_TRUE(write_file_atomic(path, bytes, in_chunks_of(1 << 20)).is_ok());
  EXPECT_EQ(*read_file(path), bytes);
  ASSERT_TRUE(write_file_atomic(path, "", in_chunks_of(1 << 20)).is_ok());
  EXPECT_EQ(*read_file(path), "");
}

// Note [Atomic writes without a shared temporary name] (core/file_io.h). Found in review
// (2026-12-06): with one shared path + ".tmp", a writer unlinked the other's file part-way,
// and one renamed the other's half-written file into place while reporting success.
TEST(AtomicWrite, TwoWritersOfOnePathNeverLeaveAPartialFile) {
  const std::string dir = fresh_dir("two_writers");
  const std::string path = dir + "/shared.bin";
  const std::string a(1 << 16, 'a'), b(1 << 16, 'b');
  std::atomic<int> partial{0}, failed{0};
  const auto writer = [&](const std::string& bytes) {
    for (int i = 0; i < 200; ++i) {
      if (!write_file_atomic(path, bytes, in_chunks_of(4096)).is_ok()) {
        ++failed;
        continue;
      }
      auto now = read_file(path);
      if (!now.is_ok() || (*now != a && *now != b)) ++partial;
    }
  };
  std::thread first(writer, a), second(writer, b);
  first.join();
  second.join();
  EXPECT_EQ(failed.load(), 0);
  EXPECT_EQ(partial.load(), 0);
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 1)
      << "no temporary file is left";
}

// The path for filesystems without unnamed files (NFS): a private name from the start. Two
// processes writing one path 100 times each leave a complete file of one of them after every
// write that reports success, and no temporary file; a file of another writer's private name
// is never touched (found in review, 2026-12-06: a pid-and-count name collided across
// containers, and the file there was unlinked before use).
TEST(AtomicWrite, WithoutUnnamedFilesTwoProcessesStillNeverMeet) {
  const std::string dir = fresh_dir("named_path");
  const std::string path = dir + "/shared.bin";
  const std::string others = path + ".tmp.0000000000000001";
  { std::ofstream(others) << "another writer's file"; }
  const std::string a(1 << 16, 'a'), b(1 << 16, 'b');
  AtomicWrite named = in_chunks_of(4096);
  named.unnamed_file = false;
  const auto writer = [&](const std::string& bytes) {
    int bad = 0;
    for (int i = 0; i < 100; ++i) {
      if (!write_file_atomic(path, bytes, named).is_ok()) {
        ++bad;
        continue;
      }
      auto now = read_file(path);
      if (!now.is_ok() || (*now != a && *now != b)) ++bad;
    }
    return bad;
  };
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) _exit(writer(b) == 0 ? 0 : 1);
  EXPECT_EQ(writer(a), 0);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the child saw a bad write";
  EXPECT_EQ(*read_file(others), "another writer's file");
  fs::remove(others);
  EXPECT_TRUE(temporaries_beside(path).empty());
  // A failed write on this path removes its own file too.
  const Status s =
      under_file_size_limit(4096, [&] { return write_file_atomic(path, pattern(1 << 16), named); });
  EXPECT_FALSE(s.is_ok());
  EXPECT_TRUE(temporaries_beside(path).empty());
}

TEST(AtomicWrite, StaleTemporaryFileIsReplacedNotReused) {
  const std::string dir = fresh_dir("stale");
  const std::string path = dir + "/x.ckpt";
  // A killed earlier save left a longer, read-only tmp that is a hard link to another file.
  {
    std::ofstream(dir + "/other") << std::string(10000, 'o');
  }
  fs::create_hard_link(dir + "/other", path + ".tmp");
  fs::permissions(path + ".tmp", fs::perms::owner_read);
  ASSERT_TRUE(write_file_atomic(path, "new").is_ok());
  EXPECT_EQ(*read_file(path), "new");
  // The writer never uses '<path>.tmp' (private names), so a file by that name is someone
  // else's and stays (review, 2026-12-06: simulate --csv out.csv deleted out.csv.tmp).
  EXPECT_TRUE(fs::exists(path + ".tmp"));
  EXPECT_EQ(read_file(dir + "/other")->size(), 10000u) << "the linked file must stay intact";
}

// RLIMIT_FSIZE with SIGXFSZ ignored: write() returns EFBIG, as on a filesystem that refuses a
// file this large. The limit is lowered for this process only and restored at once.
TEST(AtomicWrite, FileTooLargeNamesPathBytesAndOsErrorAndKeepsTheOldFile) {
  const std::string path = fresh_dir("efbig") + "/rank-00000.ckpt";
  ASSERT_TRUE(write_file_atomic(path, "old").is_ok());
  const Status s = under_file_size_limit(
      1 << 20, [&] { return write_file_atomic(path, pattern(3 << 20), in_chunks_of(1 << 20)); });
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("'" + path + "' (its new contents, not yet in place)"),
            std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("after 1048576 of 3145728 bytes"), std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("File too large"), std::string::npos) << s.message();
  EXPECT_EQ(s.message().find('\n'), std::string::npos) << "one line: " << s.message();
  EXPECT_EQ(*read_file(path), "old");
  EXPECT_TRUE(temporaries_beside(path).empty());
}

TEST(AtomicWrite, SyncDirectoryNamesAMissingDirectory) {
  EXPECT_TRUE(sync_directory(fresh_dir("sync")).is_ok());
  const Status s = sync_directory("/nonexistent/sparq_dir");
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("/nonexistent/sparq_dir"), std::string::npos) << s.message();
}

TEST(CheckpointMarkers, ClearCompleteUndoesMarkComplete) {
  const std::string dir = checkpoint_dir(fresh_dir("clear"), 8);
  fs::create_directories(dir);
  EXPECT_TRUE(clear_complete(dir).is_ok()) << "no marker is fine";
  ASSERT_TRUE(mark_complete(dir).is_ok());
  ASSERT_TRUE(is_complete(dir));
  EXPECT_EQ(*read_file(dir + "/COMPLETE"), "step 8\n");
  ASSERT_TRUE(clear_complete(dir).is_ok());
  EXPECT_FALSE(is_complete(dir));
}

TEST(CheckpointMarkers, MarkCompleteRecordsTheWorldAndRemovesFilesBeyondIt) {
  const std::string dir = checkpoint_dir(fresh_dir("world"), 8);
  fs::create_directories(dir);
  for (int r = 0; r < 3; ++r) {
    ASSERT_TRUE(write_file_atomic(checkpoint_rank_file(dir, r), "x").is_ok());
  }
  ASSERT_TRUE(write_file_atomic(dir + "/rank-notes.txt", "kept").is_ok());
  ASSERT_TRUE(mark_complete(dir, 2).is_ok());
  EXPECT_EQ(*read_file(dir + "/COMPLETE"), "step 8\nworld_size 2\n");
  EXPECT_TRUE(fs::exists(checkpoint_rank_file(dir, 1)));
  EXPECT_FALSE(fs::exists(checkpoint_rank_file(dir, 2))) << "a bigger world's file survived";
  EXPECT_TRUE(fs::exists(dir + "/rank-notes.txt"));
  EXPECT_EQ(complete_world_size(dir).value(), 2);

  ASSERT_TRUE(mark_complete(dir).is_ok());  // a marker from before world sizes were recorded
  EXPECT_EQ(complete_world_size(dir).value(), 0);
  ASSERT_TRUE(write_file_atomic(dir + "/COMPLETE", "step 8\nworld_size x\n").is_ok());
  const auto bad = complete_world_size(dir);
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("bad world_size"), std::string::npos);
}

// Makes `root`/step-<step>, complete or not, with a rank file in it.
void make_step(const std::string& root, std::int64_t step, bool complete) {
  const std::string dir = checkpoint_dir(root, step);
  fs::create_directories(dir);
  ASSERT_TRUE(write_file_atomic(checkpoint_rank_file(dir, 0), "x").is_ok());
  if (complete) {
    ASSERT_TRUE(mark_complete(dir).is_ok());
  }
}

std::vector<std::int64_t> steps_left(const std::string& root) {
  std::vector<std::int64_t> steps;
  for (const auto& e : fs::directory_iterator(root)) {
    if (auto s = parse_step(e.path().string()); s.is_ok()) {
      steps.push_back(*s);
    }
  }
  std::sort(steps.begin(), steps.end());
  return steps;
}

TEST(KeepCheckpoints, KeepsTheNewestCompleteAndRemovesStaleIncompleteOnes) {
  const std::string root = fresh_dir("keep");
  for (const std::int64_t s : {4, 8, 12, 16}) make_step(root, s, true);
  make_step(root, 6, false);   // interrupted, older than the newest complete: garbage
  make_step(root, 20, false);  // interrupted but newer: left alone
  fs::create_directories(root + "/other");
  EXPECT_TRUE(prune_checkpoints(root, 0, checkpoint_dir(root, 16)).empty());
  EXPECT_EQ(steps_left(root), (std::vector<std::int64_t>{4, 6, 8, 12, 16, 20})) << "0: keep all";

  EXPECT_TRUE(prune_checkpoints(root, 2, checkpoint_dir(root, 16)).empty());
  EXPECT_EQ(steps_left(root), (std::vector<std::int64_t>{12, 16, 20}));
  EXPECT_TRUE(fs::exists(root + "/other"));
  auto latest = latest_checkpoint(root);
  ASSERT_TRUE(latest.is_ok());
  EXPECT_EQ(*parse_step(*latest), 16);
}

TEST(KeepCheckpoints, NeverRemovesTheOneJustWritten) {
  // A run resumed from step 4 re-saved step 4 while newer complete steps exist.
  const std::string root = fresh_dir("keep_new");
  for (const std::int64_t s : {4, 8, 12}) make_step(root, s, true);
  EXPECT_TRUE(prune_checkpoints(root, 1, checkpoint_dir(root, 4) + "/").empty());
  EXPECT_EQ(steps_left(root), (std::vector<std::int64_t>{4, 12}));
}

TEST(KeepCheckpoints, AFailedListingIsAWarningNotAnError) {
  const auto warnings = prune_checkpoints("/nonexistent/sparq_ckpt", 2, "");
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("/nonexistent/sparq_ckpt"), std::string::npos) << warnings[0];
}

TEST(KeepCheckpoints, ConfigKeyIsValidated) {
  const std::string path = fresh_dir("config") + "/c.yaml";
  ASSERT_TRUE(write_file_atomic(path, "train:\n  keep_checkpoints: 5\n").is_ok());
  auto ok = load_train_config(path, {});
  ASSERT_TRUE(ok.is_ok()) << ok.status().message();
  EXPECT_EQ(ok->train.keep_checkpoints, 5);
  auto overridden = load_train_config(path, {"train.keep_checkpoints=0"});
  ASSERT_TRUE(overridden.is_ok()) << overridden.status().message();
  EXPECT_EQ(overridden->train.keep_checkpoints, 0);
  EXPECT_EQ(TrainConfig{}.train.keep_checkpoints, 3) << "the documented default";
  const auto bad = load_train_config(path, {"train.keep_checkpoints=-1"});
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("train.keep_checkpoints"), std::string::npos)
      << bad.status().message();
}

}  // namespace
}  // namespace sparq::train
