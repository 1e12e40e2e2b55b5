// Arbitrary bytes -> SafetensorsFile::read and read_header (header length, the JSON subset
// parser, every entry's dtype, shape and data_offsets, overlaps), then read_f32 of every
// tensor. read_header must reach read's verdict, with the same message or the same tensors.
// Properties: no crash or sanitizer report; for an accepted file, with the data section the
// bytes after the 8 + N header bytes (data_offsets are relative to it, safetensors.h):
//   - every dtype is one of the format's, every shape dimension >= 0;
//   - every tensor's [begin, end) lies within the data section and holds exactly
//     numel * dtype bits (F4 and F6 packed: whole bytes only);
//   - sorted by begin, the tensors cover the data section exactly (no gap, no overlap);
//   - read_f32 of a float tensor (F32, F16, BF16, F64) succeeds, and its F32, BF16 and F64
//     values are the file's (bit for bit, as a cast to f32); of any other dtype it fails
//     with an error; into a destination of the wrong size it fails with an error.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "fuzz_util.h"
#include "train/safetensors.h"

namespace {

// Bits per element of the format's dtypes, the sub-byte floats packed (a second copy of
// safetensors.cpp's table on purpose: the target checks the reader against the format).
std::size_t dtype_bits(const std::string& dtype) {
  static const std::map<std::string, std::size_t> kBits = {
      {"F64", 64},    {"F32", 32}, {"F16", 16},    {"BF16", 16},   {"I64", 64},
      {"I32", 32},    {"I16", 16}, {"I8", 8},      {"U64", 64},    {"U32", 32},
      {"U16", 16},    {"U8", 8},   {"BOOL", 8},    {"F8_E4M3", 8}, {"F8_E5M2", 8},
      {"F8_E8M0", 8}, {"C64", 64}, {"F6_E2M3", 6}, {"F6_E3M2", 6}, {"F4", 4}};
  const auto it = kBits.find(dtype);
  return it == kBits.end() ? 0 : it->second;
}

bool same_bits(float x, float y) { return std::memcmp(&x, &y, 4) == 0; }

// The values of an accepted float tensor against its bytes; src: its first byte.
void check_values(const sparq::train::SafetensorsEntry& t, const std::uint8_t* src,
                  const std::vector<float>& out) {
  for (std::size_t i = 0; i < out.size(); ++i) {
    float want;
    if (t.dtype == "F32") {
      std::memcpy(&want, src + 4 * i, 4);
    } else if (t.dtype == "BF16") {
      std::uint16_t b;
      std::memcpy(&b, src + 2 * i, 2);
      const std::uint32_t bits = static_cast<std::uint32_t>(b) << 16;
      std::memcpy(&want, &bits, 4);
    } else if (t.dtype == "F64") {
      double d;
      std::memcpy(&d, src + 8 * i, 8);
      want = static_cast<float>(d);
    } else {
      return;  // F16: converted by core's half_to_float, not re-derived here
    }
    // NaN payloads may change in a conversion; any NaN is the NaN.
    if (!same_bits(out[i], want) && !(std::isnan(out[i]) && std::isnan(want))) {
      sparq::fuzz::property_failed("read_f32 of " + t.dtype + " tensor '" + t.name +
                                   "' changed element " + std::to_string(i));
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string& path = sparq::fuzz::scratch_path(".safetensors");
  sparq::fuzz::write_scratch(path, data, size);
  auto file = sparq::train::SafetensorsFile::read(path);
  // A dry run's header-only read must reach the same verdict (and the same entries).
  auto header = sparq::train::SafetensorsFile::read_header(path);
  if (header.is_ok() != file.is_ok() ||
      (!file.is_ok() && header.status().message() != file.status().message())) {
    sparq::fuzz::property_failed("read_header and read disagree on a file");
  }
  if (!file.is_ok()) return 0;
  if (header->tensors().size() != file->tensors().size()) {
    sparq::fuzz::property_failed("read_header and read found different tensors");
  }
  // Accepted, so the header length was read and lies within the file.
  std::uint64_t header_len = 0;
  if (size < 8) sparq::fuzz::property_failed("accepted a file without a header length");
  std::memcpy(&header_len, data, 8);
  if (header_len > size - 8) sparq::fuzz::property_failed("accepted a header past the file");
  const std::uint64_t data_begin = 8 + header_len, data_bytes = size - data_begin;

  std::vector<const sparq::train::SafetensorsEntry*> order;
  for (const auto& t : file->tensors()) {
    const std::string what = "tensor '" + t.name + "' (" + t.dtype + "): ";
    const std::size_t bits = dtype_bits(t.dtype);
    if (bits == 0) sparq::fuzz::property_failed(what + "accepted an unknown dtype");
    for (const std::int64_t d : t.shape) {
      if (d < 0) sparq::fuzz::property_failed(what + "accepted a negative dimension");
    }
    if (t.begin > t.end || t.end > data_bytes) {
      sparq::fuzz::property_failed(what + "a range outside the data section");
    }
    const std::int64_t n = t.numel();
    const std::uint64_t range_bits = (t.end - t.begin) * 8;  // the input is far below 2^61 bytes
    // n <= range_bits / bits first, so n * bits cannot wrap.
    if (n < 0 || static_cast<std::uint64_t>(n) > range_bits / bits ||
        static_cast<std::uint64_t>(n) * bits != range_bits) {
      sparq::fuzz::property_failed(what + "element count x dtype bits != the range's bits");
    }
    order.push_back(&t);

    std::vector<float> out(static_cast<std::size_t>(n));
    const sparq::Status s = file->read_f32(t, out);
    if (sparq::train::convertible_to_f32(t.dtype)) {
      if (!s.is_ok()) sparq::fuzz::property_failed(what + "read_f32: " + s.message());
      check_values(t, data + data_begin + t.begin, out);
    } else if (s.is_ok()) {
      sparq::fuzz::property_failed(what + "read_f32 accepted a dtype it cannot convert");
    }
    std::vector<float> wrong(static_cast<std::size_t>(n) + 1);
    if (file->read_f32(t, wrong).is_ok()) {
      sparq::fuzz::property_failed(what + "read_f32 into a destination of the wrong size");
    }
  }
  std::sort(order.begin(), order.end(), [](const auto* x, const auto* y) {
    return x->begin != y->begin ? x->begin < y->begin : x->end < y->end;
  });
  std::uint64_t covered = 0;
  for (const auto* t : order) {
    if (t->begin != covered) sparq::fuzz::property_failed("a gap or an overlap in the data");
    covered = t->end;
  }
  if (covered != data_bytes) sparq::fuzz::property_failed("data bytes that belong to no tensor");
  return 0;
}
