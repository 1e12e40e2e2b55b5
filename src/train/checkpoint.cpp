#include "train/checkpoint.h"

#include <bit>
#include <charconv>
#include <cstring>
#include <set>
#include <span>
#include <string_view>
#include <vector>

#include "core/check.h"
#include "core/checksum.h"
#include "core/file_io.h"

namespace sparq::train {
namespace {

static_assert(std::endian::native == std::endian::little, "checkpoints are little-endian");

constexpr std::size_t kFixedHeaderBytes = 40;
constexpr std::size_t kAlign = 64;
constexpr std::size_t kTrailerBytes = 8;

std::size_t align_up(std::size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

template <typename T>
void append_pod(std::string& out, T value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof(T));
}
void append_str(std::string& out, std::string_view s) {
  append_pod(out, static_cast<std::uint32_t>(s.size()));
  out.append(s);
}
template <typename T>
void store_pod(std::string& out, std::size_t offset, T value) {
  std::memcpy(out.data() + offset, &value, sizeof(T));
}

// Bounds-checked sequential reads of the section table and metadata.
class Cursor {
 public:
  Cursor(std::string_view bytes, std::size_t pos, std::size_t end)
      : bytes_(bytes), pos_(pos), end_(end) {}
  template <typename T>
  bool pod(T* out) {
    if (end_ - pos_ < sizeof(T)) return false;
    std::memcpy(out, bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return true;
  }
  bool str(std::string* out) {
    std::uint32_t n = 0;
    if (!pod(&n) || end_ - pos_ < n) return false;
    out->assign(bytes_.data() + pos_, n);
    pos_ += n;
    return true;
  }

 private:
  std::string_view bytes_;
  std::size_t pos_, end_;
};

struct TableEntry {
  std::string name;
  std::uint64_t offset = 0, size = 0, checksum = 0;
};

struct Parsed {
  std::vector<TableEntry> table;
  std::map<std::string, std::string> meta;
};

// Reads the table and metadata of a file whose magic, version and size are already checked;
// an error here means a damaged index.
Result<Parsed> parse_index(const std::string& path, std::string_view bytes) {
  std::uint32_t sections = 0, metas = 0;
  std::uint64_t data_offset = 0;
  std::memcpy(&sections, bytes.data() + 12, 4);
  std::memcpy(&metas, bytes.data() + 16, 4);
  std::memcpy(&data_offset, bytes.data() + 32, 8);
  const std::size_t payload_end = bytes.size() - kTrailerBytes;
  if (data_offset < kFixedHeaderBytes || data_offset > payload_end) {
    return Status::error("checkpoint '{}' is corrupt: data offset {} outside the file", path,
                         data_offset);
  }
  Cursor cur(bytes, kFixedHeaderBytes, data_offset);
  Parsed p;
  std::set<std::string> names;
  for (std::uint32_t i = 0; i < sections; ++i) {
    TableEntry e;
    if (!cur.str(&e.name) || !cur.pod(&e.offset) || !cur.pod(&e.size) || !cur.pod(&e.checksum)) {
      return Status::error("checkpoint '{}' is corrupt: section table entry {} is damaged", path,
                           i);
    }
    if (e.offset < data_offset || e.offset > payload_end || e.size > payload_end - e.offset) {
      return Status::error(
          "checkpoint '{}' is corrupt: section '{}' ([{}, +{})) lies outside the data [{}, {})",
          path, e.name, e.offset, e.size, data_offset, payload_end);
    }
    if (!names.insert(e.name).second) {
      return Status::error("checkpoint '{}' is corrupt: section '{}' appears twice", path, e.name);
    }
    p.table.push_back(std::move(e));
  }
  for (std::uint32_t i = 0; i < metas; ++i) {
    std::string key, value;
    if (!cur.str(&key) || !cur.str(&value)) {
      return Status::error("checkpoint '{}' is corrupt: metadata entry {} is damaged", path, i);
    }
    p.meta[std::move(key)] = std::move(value);
  }
  return p;
}

}  // namespace

// ---- CheckpointFile -------------------------------------------------------------------

void CheckpointFile::add_bytes(std::string name, std::string_view bytes) {
  SPARQ_CHECK(!has_section(name), "checkpoint section '{}' added twice", name);
  sections.emplace_back(std::move(name), std::string(bytes));
}

void CheckpointFile::add_floats(std::string name, std::span<const float> values) {
  add_bytes(std::move(name),
            std::string_view(reinterpret_cast<const char*>(values.data()), values.size_bytes()));
}

bool CheckpointFile::has_section(std::string_view name) const {
  return std::any_of(sections.begin(), sections.end(),
                     [&](const auto& s) { return s.first == name; });
}

Result<std::string_view> CheckpointFile::section(std::string_view name) const {
  for (const auto& [n, bytes] : sections) {
    if (n == name) return std::string_view(bytes);
  }
  return Status::error("checkpoint '{}' has no section '{}'", path, name);
}

Status CheckpointFile::read_floats(std::string_view name, std::span<float> out) const {
  SPARQ_ASSIGN_OR_RETURN(const std::string_view bytes, section(name));
  if (bytes.size() != out.size_bytes()) {
    return Status::error(
        "checkpoint '{}': section '{}' holds {} bytes ({} floats), expected {} floats", path, name,
        bytes.size(), bytes.size() / sizeof(float), out.size());
  }
  if (!out.empty()) std::memcpy(out.data(), bytes.data(), bytes.size());
  return Status::ok();
}

Result<std::string> CheckpointFile::meta_value(const std::string& key) const {
  const auto it = meta.find(key);
  if (it == meta.end()) return Status::error("checkpoint '{}' has no metadata key '{}'", path, key);
  return it->second;
}

std::string CheckpointFile::meta_or(const std::string& key, const std::string& fallback) const {
  const auto it = meta.find(key);
  return it == meta.end() ? fallback : it->second;
}

Result<std::int64_t> CheckpointFile::meta_int(const std::string& key) const {
  SPARQ_ASSIGN_OR_RETURN(std::string text, meta_value(key));
  // The whole text, in decimal: std::stoll read "12abc" as 12 and skipped leading blanks.
  std::int64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc() || end != text.data() + text.size()) {
    return Status::error("{}: metadata '{}' is not an integer: '{}'", path, key, text);
  }
  return value;
}

// ---- file ------------------------------------------------------------------------------

Status write_checkpoint_file(const std::string& path, const CheckpointFile& file,
                             std::int64_t step) {
  // The index's size does not depend on the offsets it stores, so build it once with
  // placeholder offsets, then patch them in.
  std::string out(kFixedHeaderBytes, '\0');
  std::memcpy(out.data(), kCheckpointMagic, 8);
  store_pod(out, 8, kCheckpointVersion);
  store_pod(out, 12, static_cast<std::uint32_t>(file.sections.size()));
  store_pod(out, 16, static_cast<std::uint32_t>(file.meta.size()));
  std::vector<std::size_t> offset_slots;
  std::set<std::string_view> names;
  for (const auto& [name, bytes] : file.sections) {
    SPARQ_CHECK(names.insert(name).second, "checkpoint section '{}' appears twice", name);
    append_str(out, name);
    offset_slots.push_back(out.size());
    append_pod<std::uint64_t>(out, 0);
    append_pod<std::uint64_t>(out, bytes.size());
    append_pod<std::uint64_t>(out, checksum64(bytes.data(), bytes.size()));
  }
  for (const auto& [key, value] : file.meta) {
    append_str(out, key);
    append_str(out, value);
  }
  const std::size_t data_offset = align_up(out.size());
  std::size_t end = data_offset;  // sections start aligned; the trailer follows the last one
  for (std::size_t i = 0; i < file.sections.size(); ++i) {
    end = align_up(end);
    store_pod<std::uint64_t>(out, offset_slots[i], end);
    end += file.sections[i].second.size();
  }
  const std::size_t total = end + kTrailerBytes;
  store_pod<std::uint64_t>(out, 24, total);
  store_pod<std::uint64_t>(out, 32, data_offset);
  out.resize(data_offset, '\0');
  // The header, then each section after its padding, then the trailer: written as pieces,
  // never copied into one image (file_io.h, the pieces form), with the whole-file checksum
  // taken over the same pieces in order.
  static constexpr char kZeros[kAlign] = {};
  std::vector<std::string_view> pieces = {out};
  Checksum64 checksum;
  checksum.update(out.data(), out.size());
  std::size_t at = out.size();
  for (const auto& [name, bytes] : file.sections) {
    const std::string_view padding(kZeros, align_up(at) - at);
    pieces.insert(pieces.end(), {padding, bytes});
    checksum.update(padding.data(), padding.size());
    checksum.update(bytes.data(), bytes.size());
    at = align_up(at) + bytes.size();
  }
  SPARQ_CHECK(at + kTrailerBytes == total, "checkpoint size {} != planned {}", at + kTrailerBytes,
              total);
  const std::uint64_t digest = checksum.digest();
  pieces.emplace_back(reinterpret_cast<const char*>(&digest), sizeof(digest));
  return write_file_atomic(
      path, std::span<const std::string_view>(pieces),
      {.chunk_bytes = kCheckpointWriteChunk, .fault_prefix = "checkpoint", .fault_step = step});
}

Result<CheckpointFile> read_checkpoint_file(const std::string& path) {
  SPARQ_ASSIGN_OR_RETURN(const std::string bytes, read_file(path));
  // A file shorter than the magic that begins like it (an empty one from a partial copy) is
  // truncated, not something else (review, 2026-12-05).
  if (bytes.size() < 8 && std::memcmp(bytes.data(), kCheckpointMagic, bytes.size()) == 0) {
    return Status::error("checkpoint '{}' is truncated: {} bytes, not even its magic", path,
                         bytes.size());
  }
  if (bytes.size() < 8 || std::memcmp(bytes.data(), kCheckpointMagic, 8) != 0) {
    return Status::error("'{}' is not a sparq checkpoint (bad magic bytes)", path);
  }
  if (bytes.size() < kFixedHeaderBytes + kTrailerBytes) {
    return Status::error("checkpoint '{}' is truncated: {} bytes, smaller than its header", path,
                         bytes.size());
  }
  std::uint32_t version = 0;
  std::uint64_t total = 0;
  std::memcpy(&version, bytes.data() + 8, 4);
  std::memcpy(&total, bytes.data() + 24, 8);
  if (version != kCheckpointVersion) {
    return Status::error("checkpoint '{}' has format version {}; this build reads version {}", path,
                         version, kCheckpointVersion);
  }
  if (bytes.size() != total) {
    return Status::error("checkpoint '{}' is {}: {} bytes, header says {}", path,
                         bytes.size() < total ? "truncated" : "too long", bytes.size(), total);
  }
  const std::size_t payload_end = bytes.size() - kTrailerBytes;
  std::uint64_t stored = 0;
  std::memcpy(&stored, bytes.data() + payload_end, 8);
  const bool whole_ok = stored == checksum64(bytes.data(), payload_end);

  Result<Parsed> parsed = parse_index(path, bytes);
  if (!parsed.is_ok()) {
    // A damaged index under a bad whole-file checksum is plain corruption.
    if (!whole_ok) {
      return Status::error("checkpoint '{}' is corrupt: checksum mismatch in the header", path);
    }
    return parsed.status();
  }
  // Per-section checksums name the damaged section; the whole-file checksum then covers the
  // header, table, metadata and padding.
  for (const TableEntry& e : parsed->table) {
    if (checksum64(bytes.data() + e.offset, e.size) != e.checksum) {
      return Status::error("checkpoint '{}' is corrupt: checksum mismatch in section '{}'", path,
                           e.name);
    }
  }
  if (!whole_ok) {
    return Status::error(
        "checkpoint '{}' is corrupt: checksum mismatch in the header, metadata or padding", path);
  }
  CheckpointFile file;
  file.path = path;
  file.meta = std::move(parsed->meta);
  for (const TableEntry& e : parsed->table) {
    file.sections.emplace_back(e.name, bytes.substr(e.offset, e.size));
  }
  return file;
}

Status check_file_rank(const CheckpointFile& file, const std::string& path, int rank) {
  const auto it = file.meta.find("rank");
  if (it == file.meta.end() || it->second == std::to_string(rank)) return Status::ok();
  return Status::error(
      "{}: written by rank {}, but it is rank {}'s file: the files of this checkpoint were "
      "renamed or copied across ranks",
      path, it->second, rank);
}

}  // namespace sparq::train
