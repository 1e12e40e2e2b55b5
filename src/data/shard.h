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
// the tail bytes), so it runs at memory speed and catches ordinary damage (zeroed or garbled
// pages, truncation, reordered words), not every change: see its blind spot there.
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
inline constexpr std::size_t kShardNameOffset = 40;  // then zeros up to the checksum
inline constexpr std::size_t kShardNameBytes = 32;
inline constexpr std::size_t kShardHeaderChecksumOffset = 120;

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

// Streams tokens to `path` (written under a private temporary name, path + ".tmp.<16 hex>",
// renamed into place at the end), so memory use does not grow with the shard. The width is
// fixed by vocab_size at construction. Two writers of one path (two prepare_data runs given
// one --out) never touch each other's file, and the last rename wins with a complete shard:
// with the shared path + ".tmp" of before, one run unlinked the other's file part-way and the
// run that reported success left an empty shard (review, 2026-12-07; Note [Atomic writes
// without a shared temporary name], core/file_io.h). A path + ".tmp" is never touched.
//
// Fault points (core/fault.h; hit=N picks the N-th shard of the process): "shard.close"
// before the fsync of the temporary file, "shard.rename" before its rename.
class ShardWriter {
 public:
  static Result<ShardWriter> create(const std::string& path, std::string tokenizer,
                                    std::uint32_t vocab_size);
  ShardWriter(ShardWriter&& other) noexcept;
  ShardWriter& operator=(ShardWriter&& other) = delete;
  ShardWriter(const ShardWriter&) = delete;
  ~ShardWriter();  // removes the temporary file unless it was renamed into place

  // Ids must be < vocab_size (checked: a violation is a bug in the caller).
  Status append(std::span<const std::uint32_t> tokens);
  // Fails, naming the shard, when the header's 32-bit document count would wrap.
  Status add_documents(std::uint64_t n);
  // Writes the header, flushes, fsyncs and closes the temporary file: the complete shard is then
  // durable under the temporary name, and only commit() remains. On failure the temporary
  // file is removed.
  Status close();
  // Renames the temporary file over `path` (after close()). Does not fsync the directory.
  Status commit();
  // close(), commit() and an fsync of the directory: for a shard written on its own. The
  // writer is spent afterwards.
  Status finish();

  const std::string& path() const { return path_; }
  const std::string& temporary_path() const { return tmp_path_; }
  std::uint64_t token_count() const { return header_.token_count; }

 private:
  // kClosed: the complete shard is on disk as tmp_path_; kDone: nothing left to clean up
  // (renamed into place, removed after a failure, or moved from).
  enum class State { kOpen, kClosed, kDone };
  ShardWriter() = default;
  std::string path_;
  std::string tmp_path_;  // the private temporary name
  std::FILE* file_ = nullptr;
  State state_ = State::kOpen;
  ShardHeader header_;
  Checksum64 checksum_;  // of the payload written so far
  std::vector<std::uint8_t> scratch_;
};

// Finishes several shards that belong together (a training and a validation split), so
// that a failure never leaves a new file next to an old one from an earlier run:
//  1. close() every writer; if any fails, every old file is left untouched;
//  2. remove the old files of writers[1..] (the companions) and fsync the directory;
//  3. rename writers[0] into place and fsync, then rename the companions and fsync.
// Why this order: a stale val.bin next to a new train.bin (or the reverse) is a silent
// error (the splits may overlap, or come from different corpora), while a missing val.bin
// makes training fail with a clear message. So at every moment, a crash included, the
// directory holds the old set, writers[0]'s old or new file alone, or the new set. The
// error of a failed step says which files are now from which run.
Status finish_together(std::span<ShardWriter* const> writers);

// A read-only view of a shard: a memory map of its file (open), or a buffer it owns
// (from_bytes). Move-only; token reads are thread-safe.
class ShardReader {
 public:
  // Validates magic, version, width, header checksum, exact file size, and (unless
  // verify_payload is false) the payload checksum and every id < vocab_size. Errors name the
  // file and the problem.
  static Result<ShardReader> open(const std::string& path, bool verify_payload = true);
  // The same checks, by the same code, on a whole shard held in memory; `name` stands for
  // the path in errors and path(). The reader keeps `bytes` (moving a vector keeps its
  // buffer), so a buffer of exactly the shard's size lets AddressSanitizer see any read past
  // its end, which a memory map hides up to the end of its last page (fuzz/shard_fuzz.cpp).
  static Result<ShardReader> from_bytes(std::vector<std::uint8_t> bytes, std::string name,
                                        bool verify_payload = true);
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
  // Checks the shard bytes[0, size) (the size at least the header's) and takes its header;
  // payload_ then points into `bytes`, which the caller has made this reader's.
  Status parse(const std::uint8_t* bytes, std::size_t size, bool verify_payload);
  void release();
  std::string path_;
  ShardHeader header_;
  void* map_ = nullptr;  // open(): the mapping
  std::size_t map_bytes_ = 0;
  std::vector<std::uint8_t> owned_;  // from_bytes(): the shard
  const std::uint8_t* payload_ = nullptr;
};

// The warning for one of private_temporaries(path) (core/file_io.h) found beside a shard once
// this run's writers are done: another run's, killed part-way (nothing removes it: no writer
// can tell a dead run's file from a live one's) or still writing, so that a killed run's
// full-size file does not sit there unseen.
std::string describe_other_writers_temporary(const std::string& file);

// Writes a whole in-memory token array as a shard (tests, synthetic sources).
Status write_shard(const std::string& path, const std::string& tokenizer, std::uint32_t vocab_size,
                   std::span<const std::uint32_t> tokens, std::uint32_t document_count);

}  // namespace sparq::data
