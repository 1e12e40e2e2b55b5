// ShardReader (shard.h): a shard from its file (a memory map) or from memory, both checked
// by ShardReader::parse.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>

#include "core/check.h"
#include "data/shard.h"

namespace sparq::data {
namespace {

static_assert(std::endian::native == std::endian::little, "shards are little-endian");

template <typename T>
T get(const std::uint8_t* bytes, std::size_t offset) {
  T value;
  std::memcpy(&value, bytes + offset, sizeof(T));
  return value;
}

// The error for a shard of size < kShardHeaderBytes whose first `have` bytes are `head`.
Status short_shard_error(const std::string& path, std::size_t size, const std::uint8_t* head,
                         std::size_t have) {
  if (size == 0) return Status::error("shard '{}' is empty", path);
  // A short file is a truncated shard only if it starts like one: a text file or a file of
  // another kind is named as such (review, 2026-12-06: a 26-byte text file was "truncated").
  if (std::memcmp(head, kShardMagic, std::min(have, sizeof kShardMagic)) != 0) {
    return Status::error("'{}' is not a sparq token shard (bad magic bytes)", path);
  }
  return Status::error("shard '{}' is truncated: {} bytes, smaller than the {}-byte header", path,
                       size, kShardHeaderBytes);
}

}  // namespace

Result<ShardReader> ShardReader::open(const std::string& path, bool verify_payload) {
  // O_NONBLOCK: a FIFO given as a shard is refused below instead of blocking the open until
  // a writer appears (it changes nothing for a regular file).
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK);
  if (fd < 0) return Status::error("cannot open shard '{}': {}", path, std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return Status::error("cannot stat shard '{}': {}", path, std::strerror(err));
  }
  // A directory opened and then failed to mmap ("No such device"), or read as a truncated
  // shard on tmpfs (review, 2026-12-06): say what it is, and where the shards usually are.
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    if (S_ISDIR(st.st_mode)) {
      return Status::error(
          "shard '{}' is a directory, not a token shard (prepare_data --out DIR writes "
          "DIR/<name>.bin, and DIR/val.bin or DIR/<name>.val.bin)",
          path);
    }
    return Status::error("shard '{}' is not a regular file", path);
  }
  const auto file_bytes = static_cast<std::size_t>(st.st_size);
  if (file_bytes < kShardHeaderBytes) {
    std::uint8_t head[sizeof kShardMagic] = {};
    const ssize_t got = file_bytes == 0 ? 0 : ::pread(fd, head, sizeof head, 0);
    ::close(fd);
    return short_shard_error(path, file_bytes, head, static_cast<std::size_t>(got < 0 ? 0 : got));
  }
  void* map = ::mmap(nullptr, file_bytes, PROT_READ, MAP_SHARED, fd, 0);
  const int map_err = errno;
  ::close(fd);  // the mapping keeps the file alive
  if (map == MAP_FAILED)
    return Status::error("cannot mmap shard '{}': {}", path, std::strerror(map_err));
  ShardReader r;
  r.path_ = path;
  r.map_ = map;
  r.map_bytes_ = file_bytes;
  SPARQ_RETURN_IF_ERROR(r.parse(static_cast<const std::uint8_t*>(map), file_bytes, verify_payload));
  return r;
}

Result<ShardReader> ShardReader::from_bytes(std::vector<std::uint8_t> bytes, std::string name,
                                            bool verify_payload) {
  if (bytes.size() < kShardHeaderBytes) {
    return short_shard_error(name, bytes.size(), bytes.data(), bytes.size());
  }
  ShardReader r;
  r.path_ = std::move(name);
  r.owned_ = std::move(bytes);
  SPARQ_RETURN_IF_ERROR(r.parse(r.owned_.data(), r.owned_.size(), verify_payload));
  return r;
}

Status ShardReader::parse(const std::uint8_t* h, std::size_t size, bool verify_payload) {
  const std::string& path = path_;
  if (std::memcmp(h, kShardMagic, 8) != 0) {
    return Status::error("'{}' is not a sparq token shard (bad magic bytes)", path);
  }
  ShardHeader& hd = header_;
  hd.version = get<std::uint32_t>(h, 8);
  const bool header_sums = get<std::uint64_t>(h, kShardHeaderChecksumOffset) ==
                           shard_checksum(h, kShardHeaderChecksumOffset);
  // A flipped bit in the version field reads as another version: with a header whose checksum
  // fails too, corruption is as likely as a newer format, and the message says both (review,
  // 2026-12-06: it said only "format version 65537").
  if (hd.version != kShardVersion) {
    return Status::error("shard '{}' has format version {}; this build reads version {}{}", path,
                         hd.version, kShardVersion,
                         header_sums ? ""
                                     : " (or its header is corrupt: the header checksum does not "
                                       "match either)");
  }
  if (!header_sums) {
    return Status::error("shard '{}' is corrupt: header checksum mismatch", path);
  }
  hd.token_width = get<std::uint32_t>(h, 12);
  hd.token_count = get<std::uint64_t>(h, 16);
  hd.vocab_size = get<std::uint32_t>(h, 24);
  hd.document_count = get<std::uint32_t>(h, 28);
  hd.payload_checksum = get<std::uint64_t>(h, 32);
  const char* name = reinterpret_cast<const char*>(h + kShardNameOffset);
  hd.tokenizer.assign(name, strnlen(name, kShardNameBytes));
  if (hd.token_width != 2 && hd.token_width != 4) {
    return Status::error("shard '{}' has token width {} (expected 2 or 4)", path, hd.token_width);
  }
  // Fields whose checksum holds but that contradict the format (docs/data.md): --verify said
  // "ok" of such a header, which only a tool rewriting it could have written (review,
  // 2026-12-08). A reader that ignored non-zero reserved bytes would misread a later format.
  if (hd.vocab_size == 0) {
    return Status::error("shard '{}' has a vocabulary of size 0 (every id must be below it)", path);
  }
  if (hd.token_width == 2 && hd.vocab_size > 65536) {
    return Status::error(
        "shard '{}' has 2-byte tokens but a vocabulary of {} (2-byte ids hold at most 65536)", path,
        hd.vocab_size);
  }
  if (strnlen(name, kShardNameBytes) == kShardNameBytes) {
    return Status::error("shard '{}' has a tokenizer name that is not NUL-terminated", path);
  }
  for (std::size_t i = kShardNameOffset + kShardNameBytes; i < kShardHeaderChecksumOffset; ++i) {
    if (h[i] != 0) {
      return Status::error(
          "shard '{}': reserved header byte {} is not zero (written by a newer format?)", path, i);
    }
  }
  // Compared as a token count, not as count * width bytes: a count near 2^64 would wrap the
  // product around to the file size and let token() read far past the mapping (fuzzing).
  const std::uint64_t payload_bytes = size - kShardHeaderBytes;
  if (payload_bytes % hd.token_width != 0 || hd.token_count != payload_bytes / hd.token_width) {
    const bool short_file = hd.token_count > payload_bytes / hd.token_width;
    return Status::error(
        "shard '{}' is {}: {} bytes on disk, header promises {} tokens of {} bytes", path,
        short_file ? "truncated" : "too long", size, hd.token_count, hd.token_width);
  }
  payload_ = h + kShardHeaderBytes;
  if (verify_payload) {
    const std::uint64_t actual = shard_checksum(payload_, payload_bytes);
    if (actual != hd.payload_checksum) {
      return Status::error(
          "shard '{}' is corrupt: payload checksum {:016x} != {:016x} in the header", path, actual,
          hd.payload_checksum);
    }
    // The format promises every id < vocab_size, and loaders index embeddings with them.
    for (std::uint64_t i = 0; i < hd.token_count; ++i) {
      const std::uint32_t id = token(i);
      if (id >= hd.vocab_size) {
        return Status::error(
            "shard '{}' is corrupt: token {} is id {}, outside the vocabulary of {}", path, i, id,
            hd.vocab_size);
      }
    }
  }
  return Status::ok();
}

ShardReader::ShardReader(ShardReader&& o) noexcept
    : path_(std::move(o.path_)),
      header_(std::move(o.header_)),
      map_(o.map_),
      map_bytes_(o.map_bytes_),
      owned_(std::move(o.owned_)),  // the buffer moves with it: payload_ stays valid
      payload_(o.payload_) {
  o.map_ = nullptr;
  o.payload_ = nullptr;
}

ShardReader& ShardReader::operator=(ShardReader&& o) noexcept {
  if (this != &o) {
    release();
    path_ = std::move(o.path_);
    header_ = std::move(o.header_);
    map_ = o.map_, map_bytes_ = o.map_bytes_, payload_ = o.payload_;
    owned_ = std::move(o.owned_);
    o.map_ = nullptr, o.payload_ = nullptr;
  }
  return *this;
}

ShardReader::~ShardReader() { release(); }

void ShardReader::release() {
  if (map_) ::munmap(map_, map_bytes_);
  map_ = nullptr;
  owned_ = {};
  payload_ = nullptr;
}

std::uint32_t ShardReader::token(std::uint64_t i) const {
  SPARQ_CHECK(i < header_.token_count, "token {} out of range in shard {} ({} tokens)", i, path_,
              header_.token_count);
  return header_.token_width == 2 ? get<std::uint16_t>(payload_, 2 * i)
                                  : get<std::uint32_t>(payload_, 4 * i);
}

void ShardReader::read(std::uint64_t begin, std::uint64_t count, std::uint32_t* out) const {
  SPARQ_CHECK(begin + count <= header_.token_count, "range [{}, {}) out of shard {} ({} tokens)",
              begin, begin + count, path_, header_.token_count);
  if (count == 0) return;  // `out` may be the null data() of an empty vector (fuzzing)
  if (header_.token_width == 4) {
    std::memcpy(out, payload_ + 4 * begin, 4 * count);
    return;
  }
  for (std::uint64_t i = 0; i < count; ++i) out[i] = get<std::uint16_t>(payload_, 2 * (begin + i));
}

}  // namespace sparq::data
