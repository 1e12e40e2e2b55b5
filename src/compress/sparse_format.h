// The sparse message format shared by every index-carrying compressor (topk, topk_sampled,
// threshold, gtopk, dgc, lbs). Layout, all little-endian:
//
//   offset 0   u32  count        k, the number of kept entries
//   offset 4   u32  index_bytes  size of the index section
//   offset 8   u8   index_format 0 = delta varint, 1 = bitmap
//   offset 9   u8   value_bits   32 (f32 values) or the lbs code width b
//   offset 10  u16  reserved     0
//   offset 12  index section, index_bytes long
//   then       the value section (format owned by the compressor)
//
// Indices are strictly ascending positions in the encoded span of n floats.
//   delta varint: LEB128 of idx[0], then of idx[j] - idx[j-1] - 1 (gaps, never negative)
//   bitmap:       ceil(n/8) bytes, bit (i % 8) of byte i / 8 set when i is kept
// The encoder writes whichever is smaller (ties go to delta varint) and flags it, so the
// index cost is min(sum of varint sizes, ceil(n/8)) bytes.
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string_view>
#include <vector>

#include "compress/byte_io.h"
#include "compress/compressor.h"
#include "core/check.h"

namespace sparq::compress {

constexpr std::size_t kSparseHeaderBytes = 12;
enum class IndexFormat : std::uint8_t { kDeltaVarint = 0, kBitmap = 1 };

struct SparseHeader {
  std::uint32_t count = 0;
  std::uint32_t index_bytes = 0;
  IndexFormat format = IndexFormat::kDeltaVarint;
  std::uint8_t value_bits = 32;
};

std::size_t delta_varint_bytes(std::span<const std::uint32_t> sorted_indices);
inline std::size_t bitmap_bytes(std::size_t n) { return (n + 7) / 8; }

// Picks the smaller index coding for these (ascending) indices of a span of n.
SparseHeader plan_indices(std::span<const std::uint32_t> sorted_indices, std::size_t n,
                          std::uint8_t value_bits);
// Writes the header and the index section; returns a pointer just past the index section.
std::uint8_t* write_sparse_prefix(const SparseHeader& h, std::span<const std::uint32_t> indices,
                                  std::size_t n, std::uint8_t* out);
// Parses and validates the header of `msg` for a span of n and the expected value width.
SparseHeader read_sparse_header(std::span<const std::uint8_t> msg, std::size_t n,
                                std::uint8_t expected_bits, std::string_view who);

// check_message() of the sparse prefix: the header against n and the expected value width,
// and a walk of the whole index section (every index < n and ascending, exactly `count` of
// them, no bitmap bit past n, no trailing varint bytes). On success *h is the header and
// for_each_index() cannot fail on this message. Errors start with `who`.
Status check_sparse_prefix(std::span<const std::uint8_t> msg, std::size_t n,
                           std::uint8_t expected_bits, std::string_view who, SparseHeader* h);
// check_message() of a plain sparse f32 message (the prefix, then 4 * count value bytes).
Status check_sparse_f32(std::span<const std::uint8_t> msg, std::size_t n, std::string_view who);

// Calls fn(j, index) for the j-th kept index, j = 0..count-1, in ascending index order.
// Aborts (SPARQ_CHECK) on a corrupt index section.
template <typename Fn>
void for_each_index(const SparseHeader& h, const std::uint8_t* section, std::size_t n, Fn&& fn) {
  if (h.format == IndexFormat::kBitmap) {
    std::uint32_t j = 0;
    const std::size_t nbytes = bitmap_bytes(n);
    for (std::size_t byte = 0; byte < nbytes; byte += 8) {
      std::uint64_t word = 0;
      std::memcpy(&word, section + byte, std::min<std::size_t>(8, nbytes - byte));
      while (word) {
        const std::uint32_t i = static_cast<std::uint32_t>(byte * 8 + std::countr_zero(word));
        SPARQ_CHECK(i < n && j < h.count, "corrupt bitmap index section");
        fn(j++, i);
        word &= word - 1;
      }
    }
    SPARQ_CHECK(j == h.count, "bitmap holds {} indices, header says {}", j, h.count);
    return;
  }
  const std::uint8_t* p = section;
  const std::uint8_t* end = section + h.index_bytes;
  std::uint64_t next = 0;  // smallest index the next entry may take
  for (std::uint32_t j = 0; j < h.count; ++j) {
    std::uint32_t gap = 0;
    p = get_varint(p, end, gap);
    SPARQ_CHECK(p != nullptr, "corrupt varint index section");
    const std::uint64_t i = next + gap;
    SPARQ_CHECK(i < n, "index {} out of range {}", i, n);
    fn(j, static_cast<std::uint32_t>(i));
    next = i + 1;
  }
  SPARQ_CHECK(p == end, "varint index section has trailing bytes");
}

// The plain sparse message: the prefix above, then f32 values[count] in index order.
// Bytes: 12 + index_bytes + 4 * count.
void encode_sparse_f32(std::span<const float> a, std::span<const std::uint32_t> indices,
                       Message& msg);
// The same message from (index, value) pairs, for merged lists (gtopk).
void encode_sparse_pairs(std::span<const std::uint32_t> indices, std::span<const float> values,
                         std::size_t n, Message& msg);
// Reads a sparse f32 message back into (index, value) pairs.
void parse_sparse_f32(std::span<const std::uint8_t> msg, std::size_t n,
                      std::vector<std::uint32_t>& indices, std::vector<float>& values,
                      std::string_view who);
void decode_sparse_f32(std::span<const std::uint8_t> msg, std::span<float> out, float alpha,
                       DecodeMode mode, std::string_view who);

// out = alpha * 0 (kSet) or unchanged (kAdd): the dense part of decoding a sparse message.
void prepare_output(std::span<float> out, DecodeMode mode);

}  // namespace sparq::compress
