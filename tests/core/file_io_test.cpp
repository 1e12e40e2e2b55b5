// read_file on files whose stat size is not their content's (core/file_io.cpp): procfs says 0
// bytes (read as an empty file before 2026-12-06) and sysfs a page (a "short read" error).
// write_file_atomic leaves path + ".tmp" alone and keeps a replaced file's permission bits.
// check_output_file_can_be_written looks where write_output_file will write.
#include "core/file_io.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/fresh_dir.h"
#include "core/output_file.h"

namespace sparq {
namespace {

TEST(ReadFile, ProcfsFilesAreReadWhole) {
  if (!std::filesystem::exists("/proc/self/status")) GTEST_SKIP() << "no /proc";
  auto status = read_file("/proc/self/status");
  ASSERT_TRUE(status.is_ok()) << status.status().message();
  EXPECT_NE(status->find("Name:"), std::string::npos) << *status;
}

TEST(ReadFile, SysfsFilesAreReadWhole) {
  const std::string path = "/sys/kernel/mm/transparent_hugepage/enabled";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "no " << path;
  auto text = read_file(path);
  ASSERT_TRUE(text.is_ok()) << text.status().message();
  EXPECT_NE(text->find('['), std::string::npos) << *text;  // "always [madvise] never"
}

namespace fs = std::filesystem;

// Both ways the new file is made: unnamed, then linked (the default), and named from the start.
std::vector<AtomicWrite> both_ways() {
  AtomicWrite named;
  named.unnamed_file = false;
  return {AtomicWrite{}, named};
}

// path + ".tmp" is not a temporary of write_file_atomic (Note [Atomic writes without a shared
// temporary name]): here it stands for another writer's file, as the shard writer's
// in-progress shard is (data/shard.h); it used to be removed (review, 2026-12-06).
TEST(AtomicWrite, LeavesAnotherFileNamedPathTmpAlone) {
  const std::string dir = testing::fresh_dir("tmp_kept");
  const std::string path = dir + "/out.csv";
  for (const AtomicWrite& how : both_ways()) {
    std::ofstream(path + ".tmp") << "another writer's";
    ASSERT_TRUE(write_file_atomic(path, "new", how).is_ok());
    EXPECT_EQ(*read_file(path), "new");
    ASSERT_TRUE(fs::exists(path + ".tmp"));
    EXPECT_EQ(*read_file(path + ".tmp"), "another writer's");
  }
}

// The pieces form writes the concatenation, empty pieces and chunks that span several pieces
// included, both ways, the same bytes as one buffer (the checkpoint writer streams its
// sections so: review, 2026-12-07).
TEST(AtomicWrite, PiecesAreWrittenAsTheirConcatenation) {
  const std::string dir = testing::fresh_dir("pieces");
  const std::string path = dir + "/out.bin";
  const std::string big(5000, 'x');
  const std::vector<std::string_view> pieces = {"", "head", "", big, "-", "", "tail"};
  const std::string whole = "head" + big + "-tail";
  for (AtomicWrite how : both_ways()) {
    for (const std::size_t chunk :
         {std::size_t{1}, std::size_t{3}, std::size_t{4096}, std::size_t{1} << 20}) {
      how.chunk_bytes = chunk;
      ASSERT_TRUE(write_file_atomic(path, std::span<const std::string_view>(pieces), how).is_ok());
      EXPECT_EQ(*read_file(path), whole) << chunk;
    }
  }
  const std::vector<std::string_view> none = {"", ""};
  ASSERT_TRUE(write_file_atomic(path, std::span<const std::string_view>(none)).is_ok());
  EXPECT_EQ(*read_file(path), "");
}

mode_t written_mode(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

// A shared file's 0664 (or a private 0600) is kept, not reset to 0644 & ~umask (review,
// 2026-12-06); set-id bits are not copied to the writer's new file.
TEST(AtomicWrite, ReplacedFileKeepsItsPermissionBits) {
  const std::string dir = testing::fresh_dir("mode_kept");
  const std::string path = dir + "/out.csv";
  for (const AtomicWrite& how : both_ways()) {
    for (const mode_t mode : {mode_t{0664}, mode_t{0600}, mode_t{0444}, mode_t{0755}}) {
      fs::remove(path);
      std::ofstream(path) << "old";
      ASSERT_EQ(::chmod(path.c_str(), mode), 0);
      ASSERT_TRUE(write_file_atomic(path, "new", how).is_ok());
      EXPECT_EQ(*read_file(path), "new");
      EXPECT_EQ(written_mode(path), mode) << std::oct << "want " << mode;
    }
    fs::remove(path);
    std::ofstream(path) << "old";
    ASSERT_EQ(::chmod(path.c_str(), 04755), 0);
    ASSERT_TRUE(write_file_atomic(path, "new", how).is_ok());
    EXPECT_EQ(written_mode(path), mode_t{0755});
  }
  // A new path gets the default, whatever an earlier file elsewhere had.
  const mode_t mask = ::umask(0022);
  ::umask(mask);
  const std::string fresh = dir + "/fresh.csv";
  ASSERT_TRUE(write_file_atomic(fresh, "new").is_ok());
  EXPECT_EQ(written_mode(fresh), mode_t{0644} & ~mask);
}

// The check followed no link, where the writer does: a link into a folder that does not exist
// passed, to fail after the run; a device was asked for write access to its folder (/dev),
// refused for users other than root (review, 2026-12-07).
TEST(CheckOutputFile, LooksWhereTheWriterWrites) {
  const std::string dir = testing::fresh_dir("output_check");
  const std::string link = dir + "/link.safetensors";
  fs::create_symlink(dir + "/no_such_folder/x.safetensors", link);
  const Status refused = check_output_file_can_be_written(link, "--export");
  ASSERT_FALSE(refused.is_ok());
  EXPECT_EQ(refused.message(), "--export '" + link + "', a link to '" + dir +
                                   "/no_such_folder/x.safetensors': the folder '" + dir +
                                   "/no_such_folder' does not exist");
  fs::create_directory(dir + "/no_such_folder");
  EXPECT_TRUE(check_output_file_can_be_written(link, "--export").is_ok());
  EXPECT_TRUE(check_output_file_can_be_written("/dev/null", "--export").is_ok());
  EXPECT_TRUE(check_output_file_can_be_written(dir + "/plain.safetensors", "--export").is_ok());
  EXPECT_FALSE(check_output_file_can_be_written(dir + "/none/plain", "--export").is_ok());
  EXPECT_FALSE(check_output_file_can_be_written(dir, "--export").is_ok());
  // A link loop, and a descriptor that is not open for writing: they failed at the write.
  fs::create_symlink("loop", dir + "/loop");
  const Status loop = check_output_file_can_be_written(dir + "/loop", "--export");
  ASSERT_FALSE(loop.is_ok());
  EXPECT_NE(loop.message().find("too many levels"), std::string::npos) << loop.message();
  const Status unopened = check_output_file_can_be_written("/dev/fd/987", "--export");
  ASSERT_FALSE(unopened.is_ok());
  EXPECT_EQ(unopened.message(), "--export '/dev/fd/987': descriptor 987 is not open for writing");
  int pipe_ends[2] = {-1, -1};  // read end: open, but not for writing
  ASSERT_EQ(::pipe(pipe_ends), 0);
  EXPECT_FALSE(
      check_output_file_can_be_written(fmt::format("/dev/fd/{}", pipe_ends[0]), "x").is_ok());
  EXPECT_TRUE(
      check_output_file_can_be_written(fmt::format("/dev/fd/{}", pipe_ends[1]), "x").is_ok());
  ::close(pipe_ends[0]);
  ::close(pipe_ends[1]);
}

}  // namespace
}  // namespace sparq
