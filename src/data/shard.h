// Token shards: one file of token ids with a self-describing, checksummed header.
//
// Layout (all integers little-endian; header is 128 bytes):
//   offset size  field
//   0      8     magic "SPARQTOK"
//   8      4     version (1)
//   12     4     token width in bytes: 2 (u16, when vocab_size <= 65536) or 4 (u32)
//   16     8     token count
//   24     4     vocab size (every token id is < this)
//   28     4     document count (documents are separated by the tokenizer's separator)
//   32     8     payload checksum: shard_checksum() of the token bytes
//   40     32    tokenizer name, ASCII, NUL-padded ("gpt2", "bert-uncased", "markov", ...)
//   72     48    zero (reserved)
//   120    8     header checksum: shard_checksum() of bytes [0, 120)
//   128    ...   token count * width bytes of ids; the file ends exactly there
//
// The checksum is core/checksum.h's checksum64 (FNV-1a over little-endian 8-byte words, then
// the tail bytes), so it runs at memory speed and catches flipped, zeroed or reordered bytes.
#pragma once

#include <cstdint>
#include <cstdio>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/checksum.h"
#include "core/status.h"

namespace sparq::data {

inline constexpr char kShardMagic[8] = {'S', 'P', 'A', 'R', 'Q', 'T', 'O', 'K'};
inline constexpr std::uint32_t kShardVersion = 1;
inline constexpr std::size_t kShardHeaderBytes = 128;
inline constexpr std::size_t kShardNameBytes = 32;

struct ShardHeader {
  std::uint32_t version = kShardVersion;
  std::uint32_t token_width = 2;
  std::uint64_t token_count = 0;
  std::uint32_t vocab_size = 0;
  std::uint32_t document_count = 0;
  std::uint64_t payload_checksum = 0;
  std::string tokenizer;  // at most 31 bytes
};

// The shard format's name for checksum64 (kept for existing callers).
inline std::uint64_t shard_checksum(const void* data, std::size_t bytes) {
  return checksum64(data, bytes);
}

// Streams tokens to `path` (written as path + ".tmp", renamed by finish()), so memory use
// does not grow with the shard. The width is fixed by vocab_size at construction.
class ShardWriter {
 public:
  static Result<ShardWriter> create(const std::string& path, std::string tokenizer,
                                    std::uint32_t vocab_size);
  ShardWriter(ShardWriter&& other) noexcept;
  ShardWriter& operator=(ShardWriter&& other) = delete;
  ShardWriter(const ShardWriter&) = delete;
  ~ShardWriter();  // removes the temporary file if finish() was never called

  // Ids must be < vocab_size (checked: a violation is a bug in the caller).
  Status append(std::span<const std::uint32_t> tokens);
  void add_documents(std::uint32_t n) { header_.document_count += n; }
  // Writes the header and renames the file into place. The writer is spent afterwards.
  Status finish();

  std::uint64_t token_count() const { return header_.token_count; }

 private:
  ShardWriter() = default;
  std::string path_;
  std::FILE* file_ = nullptr;
  ShardHeader header_;
  Checksum64 checksum_;  // of the payload written so far
  std::vector<std::uint8_t> scratch_;
};

// A read-only memory map of a shard. Move-only; token reads are thread-safe.
class ShardReader {
 public:
  // Validates magic, version, width, header checksum, exact file size, and (unless
  // verify_payload is false) the payload checksum. Errors name the file and the problem.
  static Result<ShardReader> open(const std::string& path, bool verify_payload = true);
  ShardReader(ShardReader&& other) noexcept;
  ShardReader& operator=(ShardReader&& other) noexcept;
  ShardReader(const ShardReader&) = delete;
  ~ShardReader();

  const ShardHeader& header() const { return header_; }
  std::uint64_t size() const { return header_.token_count; }
  const std::string& path() const { return path_; }
  std::uint32_t token(std::uint64_t i) const;
  // Copies tokens [begin, begin + count) to out (precondition: in range).
  void read(std::uint64_t begin, std::uint64_t count, std::uint32_t* out) const;

 private:
  ShardReader() = default;
  void release();
  std::string path_;
  ShardHeader header_;
  void* map_ = nullptr;
  std::size_t map_bytes_ = 0;
  const std::uint8_t* payload_ = nullptr;
};

// Writes a whole in-memory token array as a shard (tests, synthetic sources).
Status write_shard(const std::string& path, const std::string& tokenizer, std::uint32_t vocab_size,
                   std::span<const std::uint32_t> tokens, std::uint32_t document_count);

}  // namespace sparq::data
