// The safetensors format read and validated (train/safetensors.h); written in
// safetensors_write.cpp.
#include "train/safetensors.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string_view>
#include <utility>

#include "core/check.h"
#include "core/dtype.h"
#include "core/file_io.h"
#include "data/shard.h"
#include "data/unicode.h"
#include "train/checkpoint.h"
#include "train/json_subset.h"

namespace sparq::train {
namespace {

static_assert(std::endian::native == std::endian::little, "safetensors data is little-endian");

// Headers of real models are a few hundred KB; this only stops absurd allocations.
constexpr std::uint64_t kMaxHeaderBytes = 100ull << 20;

// ---- header validation -------------------------------------------------------------------

// Bits per element of the safetensors dtypes (the format's list, sub-byte floats included,
// whose tensors are packed); 0 for an unknown one. A file that holds a dtype this reader
// cannot convert is still read: only its f32-convertible tensors can be loaded, and a model
// file with an extra F8_E8M0 or C64 tensor was refused whole (review, 2026-12-06).
std::size_t safetensors_dtype_bits(std::string_view dtype) {
  static const std::map<std::string_view, std::size_t> kBits = {
      {"F64", 64},    {"F32", 32}, {"F16", 16},    {"BF16", 16},   {"I64", 64},
      {"I32", 32},    {"I16", 16}, {"I8", 8},      {"U64", 64},    {"U32", 32},
      {"U16", 16},    {"U8", 8},   {"BOOL", 8},    {"F8_E4M3", 8}, {"F8_E5M2", 8},
      {"F8_E8M0", 8}, {"C64", 64}, {"F6_E2M3", 6}, {"F6_E3M2", 6}, {"F4", 4}};
  const auto it = kBits.find(dtype);
  return it == kBits.end() ? 0 : it->second;
}

const Json* member(const Json& obj, std::string_view key) {
  for (const auto& [k, v] : obj.members) {
    if (k == key) return &v;
  }
  return nullptr;
}

// Reads one tensor's header entry; errors are prefixed with the tensor's name by the caller.
Status parse_entry(const Json& value, std::uint64_t data_bytes, SafetensorsEntry* e) {
  if (value.kind != Json::Kind::kObject) {
    return Status::error("expected an object, got {}", kind_name(value.kind));
  }
  const Json* dtype = member(value, "dtype");
  const Json* shape = member(value, "shape");
  const Json* offsets = member(value, "data_offsets");
  if (!dtype || dtype->kind != Json::Kind::kString) return Status::error("no string 'dtype'");
  if (!shape || shape->kind != Json::Kind::kArray) return Status::error("no array 'shape'");
  if (!offsets || offsets->kind != Json::Kind::kArray || offsets->items.size() != 2) {
    return Status::error("'data_offsets' must be an array [begin, end]");
  }
  e->dtype = dtype->str;
  const std::size_t bits = safetensors_dtype_bits(e->dtype);
  if (bits == 0) return Status::error("unknown dtype '{}'", e->dtype);
  // The most elements the data could hold (two per byte for F4); a file holds < 2^61 bytes.
  const std::uint64_t limit = data_bytes * 8 / bits;
  std::uint64_t numel = 1;
  for (const Json& d : shape->items) {
    if (d.kind != Json::Kind::kInt || d.num < 0) {
      return Status::error("shape entries must be non-negative integers");
    }
    e->shape.push_back(d.num);
    if (d.num != 0 && numel > (limit + 1) / static_cast<std::uint64_t>(d.num)) {
      numel = limit + 1;  // certainly too large for the data; avoids overflow
    } else {
      numel *= static_cast<std::uint64_t>(d.num);
    }
  }
  for (const Json& o : offsets->items) {
    if (o.kind != Json::Kind::kInt || o.num < 0) {
      return Status::error("data_offsets must be non-negative integers");
    }
  }
  e->begin = static_cast<std::uint64_t>(offsets->items[0].num);
  e->end = static_cast<std::uint64_t>(offsets->items[1].num);
  if (e->begin > e->end || e->end > data_bytes) {
    return Status::error("data_offsets [{}, {}) lie outside the {} data bytes", e->begin, e->end,
                         data_bytes);
  }
  // numel <= limit + 1 (above), so numel * bits cannot overflow.
  if (numel > limit || numel * bits != (e->end - e->begin) * 8) {
    return Status::error("data_offsets [{}, {}) hold {} bytes but shape x {} needs {}", e->begin,
                         e->end, e->end - e->begin, e->dtype,
                         numel > limit      ? std::string("more than the file holds")
                         : numel * bits % 8 ? fmt::format("{} bits, not whole bytes", numel * bits)
                                            : std::to_string(numel * bits / 8));
  }
  return Status::ok();
}

}  // namespace

// ---- helpers shared with the importers of other naming schemes -------------------------

bool convertible_to_f32(std::string_view dtype) {
  return dtype == "F32" || dtype == "F16" || dtype == "BF16" || dtype == "F64";
}

std::vector<std::int64_t> dims_of(const Shape& s) {
  std::vector<std::int64_t> d;
  for (int i = 0; i < s.ndim(); ++i) d.push_back(s[i]);
  return d;
}

std::string dims_str(const std::vector<std::int64_t>& d) {
  return fmt::format("[{}]", fmt::join(d, ", "));
}

Status check_cpu_store(const ParamStore& store, std::string_view what) {
  if (!store.allocated()) return Status::error("{}: the parameter store is not allocated", what);
  if (store.device() != Device::kCPU) {
    return Status::error("{}: the parameter store is on {}; copy it to the host first", what,
                         device_name(store.device()));
  }
  return Status::ok();
}

// ---- reading -----------------------------------------------------------------------------

std::int64_t SafetensorsEntry::numel() const {
  // A zero dimension first: the reader accepts huge other dimensions next to it, whose
  // product would overflow.
  if (std::find(shape.begin(), shape.end(), 0) != shape.end()) return 0;
  std::int64_t n = 1;
  for (const std::int64_t d : shape) n *= d;
  return n;
}

Result<SafetensorsFile> SafetensorsFile::read(const std::string& path) {
  SafetensorsFile f;
  f.path_ = path;
  SPARQ_ASSIGN_OR_RETURN(f.bytes_, read_file(path));
  SPARQ_RETURN_IF_ERROR(f.parse_header(f.bytes_.size()));
  f.has_data_ = true;
  return f;
}

Result<SafetensorsFile> SafetensorsFile::read_header(const std::string& path) {
  SafetensorsFile f;
  f.path_ = path;
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return read(path);  // a pipe has no size
  const std::uintmax_t size = std::filesystem::file_size(path, ec);
  if (ec) return Status::error("cannot determine the size of '{}': {}", path, ec.message());
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::error("cannot open '{}': {}", path, std::strerror(errno));
  // The 8-byte length, then as much of the header as the file holds and parse_header accepts.
  f.bytes_.resize(std::min<std::uintmax_t>(size, 8));
  if (!in.read(f.bytes_.data(), static_cast<std::streamsize>(f.bytes_.size()))) {
    return Status::error("short read from '{}'", path);
  }
  if (f.bytes_.size() == 8) {
    std::uint64_t header_len = 0;
    std::memcpy(&header_len, f.bytes_.data(), 8);
    const std::uint64_t take = std::min<std::uint64_t>({header_len, size - 8, kMaxHeaderBytes});
    f.bytes_.resize(8 + take);
    if (!in.read(f.bytes_.data() + 8, static_cast<std::streamsize>(take))) {
      return Status::error("short read from '{}'", path);
    }
  }
  SPARQ_RETURN_IF_ERROR(f.parse_header(size));
  return f;
}

Status SafetensorsFile::parse_header(std::uint64_t file_bytes) {
  const std::string& path = path_;
  const std::string& b = bytes_;
  if (file_bytes < 8) {
    return Status::error("safetensors '{}' is truncated: {} bytes, no header length", path,
                         file_bytes);
  }
  // sparq's own files given for safetensors (train.init_from of a rank file) read their magic
  // as a header length: "header length 5785792162838958163 runs past the end of the file"
  // (review, 2026-12-08).
  if (b.compare(0, 8, std::string_view(kCheckpointMagic, 8)) == 0) {
    return Status::error(
        "'{}' is a sparq checkpoint rank file, not safetensors: resume its step directory with "
        "--resume, or write safetensors from it with --resume <its step directory> --stop-at "
        "<that step> --export-safetensors <file>",
        path);
  }
  if (b.compare(0, 8, std::string_view(data::kShardMagic, 8)) == 0) {
    return Status::error("'{}' is a sparq token shard (data.train, data.eval), not safetensors",
                         path);
  }
  std::uint64_t header_len = 0;
  std::memcpy(&header_len, b.data(), 8);
  if (header_len > file_bytes - 8) {
    return Status::error(
        "safetensors '{}': header length {} runs past the end of the file ({} bytes)", path,
        header_len, file_bytes);
  }
  if (header_len > kMaxHeaderBytes) {
    return Status::error(
        "safetensors '{}': header length {} exceeds the {} MiB this reader "
        "accepts",
        path, header_len, kMaxHeaderBytes >> 20);
  }
  // As the reference loader: the header is a JSON object from its first byte (review: a
  // header opening with spaces was read here and refused there).
  if (header_len == 0 || b[8] != '{') {
    return Status::error("safetensors '{}': the header does not begin with '{{'", path);
  }
  data_begin_ = 8 + header_len;
  const std::uint64_t data_bytes = file_bytes - data_begin_;
  const std::string_view header = std::string_view(b).substr(8, header_len);
  // JSON text is UTF-8, and the reference loader refuses a header that is not: a tensor name
  // of other bytes was accepted here and the file refused there (review, 2026-12-06).
  for (std::size_t pos = 0; pos < header.size();) {
    int length = 1;
    if (data::decode_utf8(header, pos, &length) == data::kInvalidCodePoint) {
      return Status::error("safetensors '{}': the header is not UTF-8 (byte {} of it)", path, pos);
    }
    pos += static_cast<std::size_t>(length);
  }
  auto doc = parse_json(header);
  if (!doc.is_ok()) return doc.status().with_context("safetensors '" + path + "'");
  if (doc->kind != Json::Kind::kObject) {
    return Status::error("safetensors '{}': the header is not a JSON object", path);
  }
  for (auto& [name, value] : doc->members) {
    if (name == kSafetensorsMetadataKey) {
      if (value.kind != Json::Kind::kObject) {
        return Status::error("safetensors '{}': __metadata__ is not an object", path);
      }
      for (auto& [k, v] : value.members) {
        if (v.kind != Json::Kind::kString) {
          return Status::error("safetensors '{}': metadata '{}' is not a string", path, k);
        }
        metadata_[k] = v.str;
      }
      continue;
    }
    SafetensorsEntry e;
    e.name = name;
    const Status s = parse_entry(value, data_bytes, &e);
    if (!s.is_ok()) return s.with_context(fmt::format("safetensors '{}': tensor '{}'", path, name));
    tensors_.push_back(std::move(e));
  }
  // As the format's reference loader requires: sorted by begin, the tensors cover the data
  // exactly, each starting where the previous one ends, from byte 0 to the file's end. A gap or
  // a tail is a damaged or foreign file, not something to load without a word.
  std::vector<const SafetensorsEntry*> order;
  for (const auto& e : tensors_) order.push_back(&e);
  std::sort(order.begin(), order.end(), [](const auto* x, const auto* y) {
    return x->begin != y->begin ? x->begin < y->begin : x->end < y->end;
  });
  std::uint64_t covered = 0;
  for (std::size_t i = 0; i < order.size(); ++i) {
    if (order[i]->begin < covered) {
      return Status::error("safetensors '{}': tensors '{}' and '{}' overlap in the data", path,
                           order[i - 1]->name, order[i]->name);
    }
    if (order[i]->begin > covered) {
      return Status::error(
          "safetensors '{}': {} bytes of the data before tensor '{}' belong to "
          "no tensor (offsets must be contiguous)",
          path, order[i]->begin - covered, order[i]->name);
    }
    covered = order[i]->end;
  }
  if (covered != data_bytes) {
    return Status::error(
        "safetensors '{}': the tensors cover {} bytes of data but the file "
        "holds {} after its header",
        path, covered, data_bytes);
  }
  return Status::ok();
}

const SafetensorsEntry* SafetensorsFile::find(std::string_view name) const {
  for (const auto& e : tensors_) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

namespace {

// Converts n elements of a float dtype (convertible_to_f32) at src, which need not be aligned.
void convert_to_f32(std::string_view dtype, const char* src, float* out, std::size_t n) {
  if (n == 0) return;  // memcpy must not see the null data() of an empty span (fuzzing)
  if (dtype == "F32") {
    std::memcpy(out, src, n * 4);
  } else if (dtype == "F16" || dtype == "BF16") {
    std::vector<std::uint16_t> bits(n);  // the source need not be 2-byte aligned
    std::memcpy(bits.data(), src, n * 2);
    if (dtype == "F16") {
      half_to_float(bits.data(), out, n);
    } else {
      bf16_to_float(bits.data(), out, n);
    }
  } else {
    for (std::size_t i = 0; i < n; ++i) {
      double v;
      std::memcpy(&v, src + 8 * i, 8);
      out[i] = static_cast<float>(v);
    }
  }
}

Status unconvertible(const std::string& path, const SafetensorsEntry& e) {
  return Status::error(
      "safetensors '{}': tensor '{}' has dtype {}, which cannot be loaded "
      "as f32 (F32, F16, BF16, F64 can)",
      path, e.name, e.dtype);
}

}  // namespace

Status SafetensorsFile::read_f32(const SafetensorsEntry& e, std::span<float> out) const {
  SPARQ_CHECK(has_data_, "SafetensorsFile::read_f32 on a file read by read_header()");
  const auto n = static_cast<std::size_t>(e.numel());
  if (out.size() != n) {
    return Status::error("safetensors '{}': tensor '{}' has {} elements, the destination {}", path_,
                         e.name, n, out.size());
  }
  if (!convertible_to_f32(e.dtype)) return unconvertible(path_, e);
  convert_to_f32(e.dtype, bytes_.data() + data_begin_ + e.begin, out.data(), n);
  return Status::ok();
}

Status SafetensorsFile::check_finite(const SafetensorsEntry& e) const {
  SPARQ_CHECK(has_data_, "SafetensorsFile::check_finite on a file read by read_header()");
  if (!convertible_to_f32(e.dtype)) return unconvertible(path_, e);
  const auto n = static_cast<std::size_t>(e.numel());
  const std::size_t width = e.dtype == "F64" ? 8 : e.dtype == "F32" ? 4 : 2;
  const char* src = bytes_.data() + data_begin_ + e.begin;
  std::vector<float> chunk(std::min<std::size_t>(n, 1 << 14));
  for (std::size_t at = 0; at < n; at += chunk.size()) {
    const std::size_t count = std::min(chunk.size(), n - at);
    convert_to_f32(e.dtype, src + at * width, chunk.data(), count);
    for (std::size_t i = 0; i < count; ++i) {
      if (!std::isfinite(chunk[i])) {
        return Status::error(
            "safetensors '{}': tensor '{}' holds a non-finite value ({} at element {}, as f32): "
            "the file is damaged or the run that wrote it diverged",
            path_, e.name, chunk[i], at + i);
      }
    }
  }
  return Status::ok();
}

Result<std::vector<float>> SafetensorsFile::read_f32(std::string_view name) const {
  const SafetensorsEntry* e = find(name);
  if (!e) return Status::error("safetensors '{}' has no tensor '{}'", path_, name);
  std::vector<float> v(static_cast<std::size_t>(e->numel()));
  SPARQ_RETURN_IF_ERROR(read_f32(*e, v));
  return v;
}

}  // namespace sparq::train
