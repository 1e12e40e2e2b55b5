#include "data/shard.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "core/file_io.h"
#include "core/rng.h"

namespace sparq::data {
namespace {

std::string temp_path(const std::string& name) { return ::testing::TempDir() + "/" + name; }

std::vector<std::uint32_t> random_tokens(std::size_t n, std::uint32_t vocab, std::uint64_t seed) {
  Rng rng(seed, 1);
  std::vector<std::uint32_t> t(n);
  for (auto& x : t) x = static_cast<std::uint32_t>(rng.below(vocab));
  return t;
}

std::vector<std::uint8_t> file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<std::uint8_t>(std::istreambuf_iterator<char>(in), {});
}

void flip_byte(const std::string& path, std::size_t offset) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(static_cast<std::streamoff>(offset));
  char c;
  f.read(&c, 1);
  c = static_cast<char>(c ^ 0x5A);
  f.seekp(static_cast<std::streamoff>(offset));
  f.write(&c, 1);
}

TEST(Shard, RoundTripsU16AndU32Widths) {
  for (const std::uint32_t vocab : {50257u, 65536u, 65537u, 1u << 20}) {
    const auto tokens = random_tokens(1001, vocab, vocab);
    const std::string path = temp_path("rt_" + std::to_string(vocab) + ".bin");
    ASSERT_TRUE(write_shard(path, "gpt2", vocab, tokens, 7).is_ok());
    auto reader = ShardReader::open(path);
    ASSERT_TRUE(reader.is_ok()) << reader.status().message();
    EXPECT_EQ(reader->header().token_width, vocab <= 65536 ? 2u : 4u);
    EXPECT_EQ(reader->header().vocab_size, vocab);
    EXPECT_EQ(reader->header().document_count, 7u);
    EXPECT_EQ(reader->header().tokenizer, "gpt2");
    ASSERT_EQ(reader->size(), tokens.size());
    std::vector<std::uint32_t> back(tokens.size());
    reader->read(0, tokens.size(), back.data());
    EXPECT_EQ(back, tokens);
    EXPECT_EQ(reader->token(500), tokens[500]);
    EXPECT_EQ(std::filesystem::file_size(path),
              kShardHeaderBytes + tokens.size() * reader->header().token_width);
  }
}

TEST(Shard, StreamingWriterEqualsOneShotWriter) {
  const auto tokens = random_tokens(777, 1000, 3);
  ASSERT_TRUE(write_shard(temp_path("one.bin"), "x", 1000, tokens, 1).is_ok());
  auto writer = ShardWriter::create(temp_path("stream.bin"), "x", 1000);
  ASSERT_TRUE(writer.is_ok());
  // Odd chunk sizes exercise the checksum's carry of partial 8-byte words.
  for (std::size_t begin = 0, step = 1; begin < tokens.size(); begin += step, step = step * 2 + 1) {
    const std::size_t n = std::min(step, tokens.size() - begin);
    ASSERT_TRUE(writer->append(std::span(tokens).subspan(begin, n)).is_ok());
  }
  ASSERT_TRUE(writer->add_documents(1).is_ok());
  ASSERT_TRUE(writer->finish().is_ok());
  EXPECT_EQ(*read_file(temp_path("one.bin")), *read_file(temp_path("stream.bin")));
}

TEST(Shard, DocumentCountPastThe32BitHeaderFieldIsAnError) {
  auto writer = ShardWriter::create(temp_path("docs.bin"), "x", 10);
  ASSERT_TRUE(writer.is_ok());
  ASSERT_TRUE(writer->add_documents(0xFFFFFFFEu).is_ok());
  ASSERT_TRUE(writer->add_documents(1).is_ok());
  const Status st = writer->add_documents(1);  // used to wrap around to 0
  ASSERT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("shard '" + temp_path("docs.bin") + "': more than 4294967295"),
            std::string::npos)
      << st.message();
  ASSERT_TRUE(writer->finish().is_ok());
  EXPECT_EQ(ShardReader::open(temp_path("docs.bin"))->header().document_count, 0xFFFFFFFFu);
}

// The temporary files of shard writers left in `dir` (none once every writer is done).
std::vector<std::string> temporaries(const std::string& dir) {
  std::vector<std::string> found;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name.find(".tmp") != std::string::npos) found.push_back(name);
  }
  return found;
}

std::string fresh_dir(const std::string& name) {
  const std::string dir = temp_path(name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// A path + ".tmp" (an earlier version's leftover, a killed run's, the user's) is neither
// written through nor removed: the writer's own temporary file has a private name.
TEST(Shard, APathDotTmpIsNeverTouched) {
  const std::string dir = fresh_dir("stale_tmp");
  const std::string victim = dir + "/victim.txt", path = dir + "/stale.bin";
  ASSERT_TRUE(write_file_atomic(victim, "keep me").is_ok());
  std::filesystem::create_symlink(victim, path + ".tmp");  // as a killed run might leave
  ASSERT_TRUE(write_shard(path, "x", 10, std::vector<std::uint32_t>{1, 2, 3}, 1).is_ok());
  EXPECT_EQ(*read_file(victim), "keep me");
  EXPECT_EQ(ShardReader::open(path)->size(), 3u);
  EXPECT_TRUE(std::filesystem::is_symlink(path + ".tmp"));
}

TEST(Shard, CloseLeavesTheShardUnderItsTemporaryNameUntilCommit) {
  const std::string dir = fresh_dir("closed");
  const std::string path = dir + "/closed.bin";
  {
    auto writer = ShardWriter::create(path, "x", 10);
    ASSERT_TRUE(writer->close().is_ok());
    EXPECT_TRUE(writer->temporary_path().starts_with(path + ".tmp."));
    EXPECT_TRUE(std::filesystem::exists(writer->temporary_path()));
    EXPECT_FALSE(std::filesystem::exists(path));
  }  // never committed: the destructor removes it
  EXPECT_EQ(temporaries(dir), std::vector<std::string>{});
  auto writer = ShardWriter::create(path, "x", 10);
  ASSERT_TRUE(writer->close().is_ok());
  ASSERT_TRUE(writer->commit().is_ok());
  EXPECT_TRUE(ShardReader::open(path).is_ok());
  EXPECT_EQ(temporaries(dir), std::vector<std::string>{});
}

// Two writers of one path (two prepare_data runs given one --out): each writes its own file,
// the last to finish wins with its complete shard, and one that gives up removes only its own.
// With the shared path + ".tmp" of before, the second writer unlinked the first's file, the
// first then renamed the second's half-written file into place while reporting success, and
// the second failed (review, 2026-12-07).
TEST(Shard, TwoWritersOfOnePathNeverTouchEachOthersFile) {
  const std::string dir = fresh_dir("two_writers");
  const std::string path = dir + "/train.bin";
  const std::vector<std::uint32_t> a_tokens = random_tokens(5000, 50, 1),
                                   b_tokens = random_tokens(3000, 50, 2);
  auto a = ShardWriter::create(path, "a", 50);
  ASSERT_TRUE(a.is_ok()) << a.status().message();
  ASSERT_TRUE(a->append(std::span(a_tokens).first(2500)).is_ok());
  auto b = ShardWriter::create(path, "b", 50);
  ASSERT_TRUE(b.is_ok()) << b.status().message();
  EXPECT_NE(a->temporary_path(), b->temporary_path());
  ASSERT_TRUE(b->append(std::span(b_tokens).first(1000)).is_ok());
  ASSERT_TRUE(a->append(std::span(a_tokens).subspan(2500)).is_ok());
  ASSERT_TRUE(a->add_documents(1).is_ok());
  ASSERT_TRUE(a->finish().is_ok());
  auto done = ShardReader::open(path);
  ASSERT_TRUE(done.is_ok()) << done.status().message();
  EXPECT_EQ(done->header().tokenizer, "a");
  EXPECT_EQ(done->size(), a_tokens.size());
  ASSERT_TRUE(b->append(std::span(b_tokens).subspan(1000)).is_ok());
  ASSERT_TRUE(b->add_documents(1).is_ok());
  ASSERT_TRUE(b->finish().is_ok());
  auto last = ShardReader::open(path);
  ASSERT_TRUE(last.is_ok()) << last.status().message();
  EXPECT_EQ(last->header().tokenizer, "b");
  EXPECT_EQ(last->size(), b_tokens.size());
  // One that gives up (destroyed before its commit) leaves the other's shard as it was.
  {
    auto c = ShardWriter::create(path, "c", 50);
    ASSERT_TRUE(c->append(a_tokens).is_ok());
  }
  EXPECT_EQ(ShardReader::open(path)->header().tokenizer, "b");
  EXPECT_EQ(temporaries(dir), std::vector<std::string>{});
}

// Train and validation shards in a folder of their own, from an "earlier run".
class ShardPair : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = temp_path(std::string("pair_") +
                     ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    ASSERT_TRUE(
        write_shard(dir_ + "/train.bin", "old", 10, std::vector<std::uint32_t>{1}, 1).is_ok());
    ASSERT_TRUE(
        write_shard(dir_ + "/val.bin", "old", 10, std::vector<std::uint32_t>{2}, 1).is_ok());
  }
  // A new pair, finished together.
  Status write_new_pair() {
    auto train = ShardWriter::create(dir_ + "/train.bin", "new", 10);
    auto val = ShardWriter::create(dir_ + "/val.bin", "new", 10);
    EXPECT_TRUE(train.is_ok() && val.is_ok());
    ShardWriter* writers[] = {&*train, &*val};
    return finish_together(writers);
  }
  std::string tokenizer(const std::string& file) {
    auto r = ShardReader::open(dir_ + "/" + file);
    return r.is_ok() ? r->header().tokenizer : r.status().message();
  }
  std::string dir_;
};

TEST_F(ShardPair, FinishTogetherReplacesBoth) {
  ASSERT_TRUE(write_new_pair().is_ok());
  EXPECT_EQ(tokenizer("train.bin"), "new");
  EXPECT_EQ(tokenizer("val.bin"), "new");
  EXPECT_EQ(temporaries(dir_), std::vector<std::string>{});
}

TEST_F(ShardPair, OldCompanionThatCannotBeRemovedLeavesBothOldFiles) {
  // A non-empty directory where val.bin goes: it cannot be removed, nor renamed over.
  std::filesystem::remove(dir_ + "/val.bin");
  std::filesystem::create_directories(dir_ + "/val.bin/x");
  const Status st = write_new_pair();
  ASSERT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("cannot remove the old '" + dir_ + "/val.bin'"), std::string::npos)
      << st.message();
  EXPECT_NE(st.message().find("no file was replaced"), std::string::npos) << st.message();
  EXPECT_EQ(tokenizer("train.bin"), "old");
  EXPECT_EQ(temporaries(dir_), std::vector<std::string>{});
}

TEST(Shard, FromBytesReadsWhatOpenReads) {
  for (const std::uint32_t vocab : {50257u, 1u << 20}) {
    const auto tokens = random_tokens(333, vocab, vocab + 1);
    const std::string path = temp_path("mem_" + std::to_string(vocab) + ".bin");
    ASSERT_TRUE(write_shard(path, "gpt2", vocab, tokens, 3).is_ok());
    auto reader = ShardReader::from_bytes(file_bytes(path), "in memory");
    ASSERT_TRUE(reader.is_ok()) << reader.status().message();
    EXPECT_EQ(reader->path(), "in memory");
    EXPECT_EQ(reader->header().vocab_size, vocab);
    EXPECT_EQ(reader->header().document_count, 3u);
    EXPECT_EQ(reader->header().tokenizer, "gpt2");
    // Moved (the buffer moves with it), then read.
    ShardReader moved = std::move(*reader);
    std::vector<std::uint32_t> back(tokens.size());
    moved.read(0, tokens.size(), back.data());
    EXPECT_EQ(back, tokens);
    EXPECT_EQ(moved.token(332), tokens[332]);
  }
  // Shorter than a header: empty, not a shard, or truncated, as open() says.
  EXPECT_NE(ShardReader::from_bytes({}, "m").status().message().find("'m' is empty"),
            std::string::npos);
  EXPECT_NE(ShardReader::from_bytes({'t', 'e', 'x', 't'}, "m").status().message().find("bad magic"),
            std::string::npos);
  EXPECT_NE(ShardReader::from_bytes({'S', 'P', 'A', 'R'}, "m").status().message().find("truncated"),
            std::string::npos);
}

TEST(Shard, EmptyShardIsValid) {
  ASSERT_TRUE(write_shard(temp_path("empty.bin"), "gpt2", 10, {}, 0).is_ok());
  auto reader = ShardReader::open(temp_path("empty.bin"));
  ASSERT_TRUE(reader.is_ok());
  EXPECT_EQ(reader->size(), 0u);
}

class CorruptShard : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = temp_path("corrupt_" +
                      std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) +
                      ".bin");
    ASSERT_TRUE(write_shard(path_, "gpt2", 50257, random_tokens(4096, 50257, 5), 1).is_ok());
  }
  // open()'s error, which from_bytes() of the file's bytes must give word for word.
  std::string error() {
    auto r = ShardReader::open(path_);
    EXPECT_FALSE(r.is_ok());
    auto m = ShardReader::from_bytes(file_bytes(path_), path_);
    EXPECT_FALSE(m.is_ok());
    const std::string msg = r.is_ok() ? std::string() : r.status().message();
    EXPECT_EQ(m.is_ok() ? std::string() : m.status().message(), msg);
    return msg;
  }
  std::string path_;
};

TEST_F(CorruptShard, FlippedPayloadByte) {
  flip_byte(path_, kShardHeaderBytes + 1234);
  const std::string msg = error();
  EXPECT_NE(msg.find("payload checksum"), std::string::npos) << msg;
  EXPECT_NE(msg.find(path_), std::string::npos) << msg;
  // The header alone is still readable when payload verification is skipped.
  EXPECT_TRUE(ShardReader::open(path_, /*verify_payload=*/false).is_ok());
}

TEST_F(CorruptShard, FlippedHeaderByte) {
  flip_byte(path_, 20);  // inside the token count
  EXPECT_NE(error().find("header checksum"), std::string::npos);
}

TEST_F(CorruptShard, Truncated) {
  std::filesystem::resize_file(path_, kShardHeaderBytes + 1000);
  const std::string msg = error();
  EXPECT_NE(msg.find("truncated"), std::string::npos) << msg;
  std::filesystem::resize_file(path_, 40);
  EXPECT_NE(error().find("smaller than the 128-byte header"), std::string::npos);
}

TEST_F(CorruptShard, NotAShard) {
  ASSERT_TRUE(write_file_atomic(path_, std::string(200, 'x')).is_ok());
  EXPECT_NE(error().find("bad magic"), std::string::npos);
  // Shorter than a header: not a shard either, rather than a "truncated" one (review).
  ASSERT_TRUE(write_file_atomic(path_, "just some text, 26 bytes\n").is_ok());
  const std::string msg = error();
  EXPECT_NE(msg.find("bad magic"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("truncated"), std::string::npos) << msg;
  ASSERT_TRUE(write_file_atomic(path_, "").is_ok());
  EXPECT_NE(error().find("is empty"), std::string::npos) << error();
}

TEST_F(CorruptShard, FlippedVersionByteMayBeCorruption) {
  flip_byte(path_, 8);
  const std::string msg = error();
  EXPECT_NE(msg.find("format version"), std::string::npos) << msg;
  EXPECT_NE(msg.find("header checksum does not match"), std::string::npos) << msg;
}

TEST_F(CorruptShard, FutureVersionWithAnIntactHeader) {
  // A header of version 2 whose checksum is right: a newer format, said plainly.
  std::string bytes;
  {
    std::ifstream in(path_, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  bytes[8] = 2;
  const std::uint64_t sum = shard_checksum(bytes.data(), 120);
  std::memcpy(bytes.data() + 120, &sum, sizeof sum);
  ASSERT_TRUE(write_file_atomic(path_, bytes).is_ok());
  const std::string msg = error();
  EXPECT_NE(msg.find("format version 2; this build reads version 1"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("header is corrupt"), std::string::npos) << msg;
}

// Header fields whose checksum holds but that contradict the format: `prepare_data --verify`
// said "ok" of them (review, 2026-12-08). Each rewritten with the header checksum made anew.
TEST_F(CorruptShard, HeaderFieldsThatContradictTheFormat) {
  const std::vector<std::uint8_t> good = file_bytes(path_);
  const auto with = [&](std::size_t offset, const std::string& raw) {
    std::string bytes(good.begin(), good.end());
    bytes.replace(offset, raw.size(), raw);
    const std::uint64_t sum = shard_checksum(bytes.data(), kShardHeaderChecksumOffset);
    std::memcpy(bytes.data() + kShardHeaderChecksumOffset, &sum, sizeof sum);
    EXPECT_TRUE(write_file_atomic(path_, bytes).is_ok());
    return error();
  };
  const auto u32 = [](std::uint32_t v) { return std::string(reinterpret_cast<char*>(&v), 4); };
  EXPECT_NE(with(24, u32(0)).find("has a vocabulary of size 0"), std::string::npos);
  EXPECT_NE(with(24, u32(200000)).find("2-byte tokens but a vocabulary of 200000"),
            std::string::npos);
  EXPECT_NE(with(kShardNameOffset, std::string(kShardNameBytes, 'x'))
                .find("tokenizer name that is not NUL-terminated"),
            std::string::npos);
  EXPECT_NE(with(80, "\x01").find("reserved header byte 80 is not zero"), std::string::npos);
  // Untouched, it reads.
  ASSERT_TRUE(write_file_atomic(path_, std::string(good.begin(), good.end())).is_ok());
  EXPECT_TRUE(ShardReader::open(path_).is_ok());
}

TEST(Shard, MissingFileNamesThePath) {
  auto r = ShardReader::open("/nonexistent/dir/train.bin");
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("/nonexistent/dir/train.bin"), std::string::npos);
}

TEST(Shard, ChecksumSeesEveryByteAndOrder) {
  const std::string a = "abcdefghijklmnopqrstu", b = "abcdefghijklmnopqrstv",
                    c = "bacdefghijklmnopqrstu";
  EXPECT_NE(shard_checksum(a.data(), a.size()), shard_checksum(b.data(), b.size()));
  EXPECT_NE(shard_checksum(a.data(), a.size()), shard_checksum(c.data(), c.size()));
  EXPECT_NE(shard_checksum(a.data(), 20), shard_checksum(a.data(), 21));
}

}  // namespace
}  // namespace sparq::data
