// Damaged safetensors files (truncated, bad header, ranges out of order or overlapping,
// wrong dtype sizes, ...) are refused with the reason, and the writer refuses bad input.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "core/file_io.h"
#include "models/model_test_util.h"
#include "safetensors_test_util.h"
#include "train/safetensors.h"

namespace sparq::train {
namespace {

using testing_safetensors::contains;
using testing_safetensors::kHfSpec;
using testing_safetensors::temp;

TEST(Safetensors, DamagedFilesAreRefused) {
  ParamStore store;
  testing::bound_model(kHfSpec, {1, 8}, store);
  const std::string good = temp("damage_src.safetensors");
  ASSERT_TRUE(export_safetensors(store, good).is_ok());
  const std::string bytes = *read_file(good);
  const std::string path = temp("damaged.safetensors");

  // Truncated: the last tensor's range runs past the data. A dry run's check, which reads
  // only the header, sees it from the file's size.
  ASSERT_TRUE(write_file_atomic(path, bytes.substr(0, bytes.size() - 10)).is_ok());
  Status s = import_safetensors(store, path);
  ASSERT_FALSE(s.is_ok());
  EXPECT_TRUE(contains(s, path) && contains(s, "ln_f.bias") && contains(s, "outside"))
      << s.message();
  EXPECT_EQ(import_safetensors(store, path, {.check_only = true}).message(), s.message());

  // sparq's own files, whose magic read as a header length (review, 2026-12-08).
  ASSERT_TRUE(write_file_atomic(path, std::string("SPARQCKP") + std::string(120, '\0')).is_ok());
  s = import_safetensors(store, path);
  EXPECT_TRUE(contains(s, "is a sparq checkpoint rank file, not safetensors")) << s.message();
  ASSERT_TRUE(write_file_atomic(path, std::string("SPARQTOK") + std::string(120, '\0')).is_ok());
  s = import_safetensors(store, path);
  EXPECT_TRUE(contains(s, "is a sparq token shard")) << s.message();

  // A header length past the end of the file.
  std::string long_header = bytes;
  const std::uint64_t huge = bytes.size();
  std::memcpy(long_header.data(), &huge, 8);
  ASSERT_TRUE(write_file_atomic(path, long_header).is_ok());
  s = SafetensorsFile::read(path).status();
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(SafetensorsFile::read_header(path).status().message(), s.message());
  EXPECT_TRUE(contains(s, path) && contains(s, "past the end of the file")) << s.message();

  // A header longer than the reader accepts, inside the file, is said to be that.
  std::string big(8 + (101u << 20), ' ');
  const std::uint64_t big_len = 101u << 20;
  std::memcpy(big.data(), &big_len, 8);
  ASSERT_TRUE(write_file_atomic(path, big).is_ok());
  s = SafetensorsFile::read(path).status();
  EXPECT_TRUE(contains(s, "exceeds the 100 MiB this reader accepts")) << s.message();
  EXPECT_EQ(SafetensorsFile::read_header(path).status().message(), s.message());

  ASSERT_TRUE(write_file_atomic(path, "abc").is_ok());
  EXPECT_TRUE(contains(SafetensorsFile::read(path).status(), "truncated"));
  EXPECT_TRUE(contains(SafetensorsFile::read_header(path).status(), "truncated"));

  // Overlapping ranges, a size that disagrees with the shape, and broken JSON.
  const auto with_header = [&](std::string header, std::size_t data_bytes) {
    const std::uint64_t n = header.size();
    std::string file(reinterpret_cast<const char*>(&n), 8);
    file += header + std::string(data_bytes, '\0');
    EXPECT_TRUE(write_file_atomic(path, file).is_ok());
    const Status whole = SafetensorsFile::read(path).status();
    // The header-only read (a dry run's) validates exactly as the whole read.
    EXPECT_EQ(SafetensorsFile::read_header(path).status().message(), whole.message()) << header;
    return whole;
  };
  s = with_header(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                  R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                  12);
  EXPECT_TRUE(contains(s, "'a' and 'b' overlap")) << s.message();
  s = with_header(R"({"a":{"dtype":"F16","shape":[3],"data_offsets":[0,8]}})", 8);
  EXPECT_TRUE(contains(s, "tensor 'a'") && contains(s, "needs 6")) << s.message();
  s = with_header(R"({"a":{"dtype":"Q4","shape":[1],"data_offsets":[0,1]}})", 1);
  EXPECT_TRUE(contains(s, "unknown dtype 'Q4'")) << s.message();
  // The format's newer dtypes are read (and cannot be loaded): a file with one is not refused
  // whole. Sub-byte floats are packed, and must fill whole bytes.
  s = with_header(R"({"a":{"dtype":"F8_E8M0","shape":[3],"data_offsets":[0,3]},)"
                  R"("b":{"dtype":"C64","shape":[1],"data_offsets":[3,11]},)"
                  R"("c":{"dtype":"F4","shape":[6],"data_offsets":[11,14]},)"
                  R"("d":{"dtype":"F6_E2M3","shape":[4],"data_offsets":[14,17]}})",
                  17);
  EXPECT_TRUE(s.is_ok()) << s.message();
  s = with_header(R"({"a":{"dtype":"F4","shape":[3],"data_offsets":[0,2]}})", 2);
  EXPECT_TRUE(contains(s, "needs 12 bits, not whole bytes")) << s.message();
  // What the format's reference loader refuses is refused here too: a header that does not
  // open with '{', and integers with leading zeros.
  s = with_header(R"(  {"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 4);
  EXPECT_TRUE(contains(s, "the header does not begin with '{'")) << s.message();
  s = with_header(R"({"a":{"dtype":"F32","shape":[01],"data_offsets":[0,4]}})", 4);
  EXPECT_TRUE(contains(s, "a leading zero")) << s.message();
  // A header that is not UTF-8 (a Latin-1 name), which the reference loader refuses; so does
  // this reader since review, 2026-12-06. A UTF-8 name is read.
  s = with_header("{\"caf\xe9\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4);
  EXPECT_TRUE(contains(s, "the header is not UTF-8 (byte 5 of it)")) << s.message();
  s = with_header("{\"caf\xc3\xa9\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4);
  EXPECT_TRUE(s.is_ok()) << s.message();
  s = with_header(R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[0,0]}})", 0);
  EXPECT_TRUE(s.is_ok()) << s.message();
  s = with_header(R"({"a":{"dtype":"F32","shape":[1.5],"data_offsets":[0,4]}})", 4);
  EXPECT_TRUE(contains(s, "only integers")) << s.message();
  s = with_header(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]})", 4);
  EXPECT_TRUE(contains(s, "invalid JSON") && contains(s, path)) << s.message();
  s = with_header(R"({"a":{"dtype":"F32","shape":[4611686018427387904,4],"data_offsets":[0,4]}})",
                  4);
  EXPECT_FALSE(s.is_ok());

  // The tensors must cover the data exactly, as the format's reference loader requires: no
  // gap before or between them, no tail after the last.
  s = with_header(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8);
  EXPECT_TRUE(contains(s, "4 bytes of the data before tensor 'a' belong to no tensor"))
      << s.message();
  s = with_header(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                  R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
                  12);
  EXPECT_TRUE(contains(s, "before tensor 'b'")) << s.message();
  s = with_header(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 12);
  EXPECT_TRUE(contains(s, "cover 4 bytes of data but the file holds 12")) << s.message();
  s = with_header(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                  R"("a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                  8);
  EXPECT_TRUE(contains(s, "duplicate key 'a'")) << s.message();
  EXPECT_TRUE(with_header(R"({"__metadata__":{"k":"v"}})", 0).is_ok()) << "no tensors, no data";
  // A header of 2^20 + 1 bare numbers (4 MiB) is refused before it is a 100 MiB tree; at the
  // 100 MiB header limit it was ~4.8 GB of parsed nodes (review).
  std::string many = R"({"a":{"dtype":"F32","shape":[)";
  for (int i = 0; i < (1 << 20); ++i) many += "0,";
  many += R"(0],"data_offsets":[0,0]}})";
  s = with_header(many, 0);
  EXPECT_TRUE(contains(s, "more than 1048576 values")) << s.message().substr(0, 200);
}

TEST(Safetensors, WriterRejectsBadInput) {
  const std::vector<float> v(6, 1.0f);
  EXPECT_FALSE(write_safetensors(temp("bad.safetensors"), {{"a", {2, 2}, v}}).is_ok());
  EXPECT_FALSE(write_safetensors(temp("bad.safetensors"), {{"a", {6}, v}, {"a", {6}, v}}).is_ok());
  EXPECT_FALSE(write_safetensors(temp("bad.safetensors"), {{"__metadata__", {6}, v}}).is_ok());
  // Names with characters that need escaping survive a round trip.
  const std::string path = temp("escape.safetensors");
  ASSERT_TRUE(
      write_safetensors(path, {{"we\"ird\\name\n\x01", {2, 3}, v}}, {{"k\t", "v\""}}).is_ok());
  auto f = SafetensorsFile::read(path);
  ASSERT_TRUE(f.is_ok()) << f.status().message();
  EXPECT_EQ(f->tensors().at(0).name, "we\"ird\\name\n\x01");
  EXPECT_EQ(f->metadata().at("k\t"), "v\"");
}

}  // namespace
}  // namespace sparq::train
