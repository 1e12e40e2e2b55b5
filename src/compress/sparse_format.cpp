#include "compress/sparse_format.h"

#include "core/host_device.h"
#include "core/ops.h"

namespace sparq::compress {

std::size_t delta_varint_bytes(std::span<const std::uint32_t> idx) {
  std::size_t bytes = 0;
  std::uint64_t next = 0;
  for (std::uint32_t i : idx) {
    bytes += varint_size(static_cast<std::uint32_t>(i - next));
    next = static_cast<std::uint64_t>(i) + 1;
  }
  return bytes;
}

SparseHeader plan_indices(std::span<const std::uint32_t> idx, std::size_t n,
                          std::uint8_t value_bits) {
  SPARQ_CHECK(n <= UINT32_MAX, "sparse messages address at most 2^32 floats, got {}", n);
  SparseHeader h;
  h.count = static_cast<std::uint32_t>(idx.size());
  h.value_bits = value_bits;
  const std::size_t varint = delta_varint_bytes(idx), bitmap = bitmap_bytes(n);
  if (bitmap < varint) {
    h.format = IndexFormat::kBitmap;
    h.index_bytes = static_cast<std::uint32_t>(bitmap);
  } else {
    h.format = IndexFormat::kDeltaVarint;
    h.index_bytes = static_cast<std::uint32_t>(varint);
  }
  return h;
}

std::uint8_t* write_sparse_prefix(const SparseHeader& h, std::span<const std::uint32_t> idx,
                                  std::size_t n, std::uint8_t* out) {
  store_u32(out, h.count);
  store_u32(out + 4, h.index_bytes);
  out[8] = static_cast<std::uint8_t>(h.format);
  out[9] = h.value_bits;
  store_u16(out + 10, 0);
  std::uint8_t* p = out + kSparseHeaderBytes;
  if (h.format == IndexFormat::kBitmap) {
    std::memset(p, 0, h.index_bytes);
    for (std::uint32_t i : idx) p[i >> 3] |= static_cast<std::uint8_t>(1u << (i & 7));
    return p + h.index_bytes;
  }
  std::uint64_t next = 0;
  for (std::uint32_t i : idx) {
    p = put_varint(p, static_cast<std::uint32_t>(i - next));
    next = static_cast<std::uint64_t>(i) + 1;
  }
  SPARQ_CHECK(p == out + kSparseHeaderBytes + h.index_bytes, "varint size mismatch");
  return p;
}

SparseHeader read_sparse_header(std::span<const std::uint8_t> msg, std::size_t n,
                                std::uint8_t expected_bits, std::string_view who) {
  SPARQ_CHECK(msg.size() >= kSparseHeaderBytes, "{}: message of {} bytes has no header", who,
              msg.size());
  SparseHeader h;
  h.count = load_u32(msg.data());
  h.index_bytes = load_u32(msg.data() + 4);
  SPARQ_CHECK(msg[8] <= 1, "{}: unknown index format {}", who, msg[8]);
  h.format = static_cast<IndexFormat>(msg[8]);
  h.value_bits = msg[9];
  SPARQ_CHECK(h.value_bits == expected_bits, "{}: message has {}-bit values, expected {}", who,
              h.value_bits, expected_bits);
  SPARQ_CHECK(h.count <= n, "{}: {} entries for a span of {}", who, h.count, n);
  SPARQ_CHECK(h.format != IndexFormat::kBitmap || h.index_bytes == bitmap_bytes(n),
              "{}: bitmap of {} bytes for a span of {}", who, h.index_bytes, n);
  SPARQ_CHECK(kSparseHeaderBytes + h.index_bytes <= msg.size(), "{}: truncated index section",
              who);
  return h;
}

Status check_sparse_prefix(std::span<const std::uint8_t> msg, std::size_t n,
                           std::uint8_t expected_bits, std::string_view who, SparseHeader* out) {
  if (msg.size() < kSparseHeaderBytes) {
    return Status::error("{}: message of {} bytes has no {}-byte header", who, msg.size(),
                         kSparseHeaderBytes);
  }
  SparseHeader h;
  h.count = load_u32(msg.data());
  h.index_bytes = load_u32(msg.data() + 4);
  if (msg[8] > 1) return Status::error("{}: unknown index format {}", who, msg[8]);
  h.format = static_cast<IndexFormat>(msg[8]);
  h.value_bits = msg[9];
  if (h.value_bits != expected_bits) {
    return Status::error("{}: message has {}-bit values, expected {}", who, h.value_bits,
                         expected_bits);
  }
  if (h.count > n) return Status::error("{}: {} entries for {} floats", who, h.count, n);
  if (h.format == IndexFormat::kBitmap && h.index_bytes != bitmap_bytes(n)) {
    return Status::error("{}: bitmap of {} bytes for {} floats (expected {})", who, h.index_bytes,
                         n, bitmap_bytes(n));
  }
  if (h.index_bytes > msg.size() - kSparseHeaderBytes) {
    return Status::error("{}: index section of {} bytes runs past the {}-byte message", who,
                         h.index_bytes, msg.size());
  }
  const std::uint8_t* section = msg.data() + kSparseHeaderBytes;
  if (h.format == IndexFormat::kBitmap) {
    std::uint64_t set = 0;
    for (std::size_t byte = 0; byte < h.index_bytes; ++byte) set += std::popcount(section[byte]);
    // Bits past n in the last byte would be indices >= n.
    if (n % 8 != 0 && (section[n / 8] >> (n % 8)) != 0) {
      return Status::error("{}: bitmap marks an index past {} floats", who, n);
    }
    if (set != h.count) {
      return Status::error("{}: bitmap holds {} indices, the header says {}", who, set, h.count);
    }
  } else {
    const std::uint8_t* p = section;
    const std::uint8_t* end = section + h.index_bytes;
    std::uint64_t next = 0;
    for (std::uint32_t j = 0; j < h.count; ++j) {
      std::uint32_t gap = 0;
      p = get_varint(p, end, gap);
      if (!p) return Status::error("{}: index {} of {}: truncated or overlong varint", who, j, h.count);
      const std::uint64_t i = next + gap;
      if (i >= n) return Status::error("{}: index {} out of range for {} floats", who, i, n);
      next = i + 1;
    }
    if (p != end) {
      return Status::error("{}: index section has {} bytes after its {} indices", who, end - p,
                           h.count);
    }
  }
  *out = h;
  return Status::ok();
}

Status check_sparse_f32(std::span<const std::uint8_t> msg, std::size_t n, std::string_view who) {
  SparseHeader h;
  SPARQ_RETURN_IF_ERROR(check_sparse_prefix(msg, n, 32, who, &h));
  const std::size_t expected = kSparseHeaderBytes + h.index_bytes + 4 * std::size_t{h.count};
  if (msg.size() != expected) {
    return Status::error("{}: message of {} bytes, its header implies {}", who, msg.size(),
                         expected);
  }
  return Status::ok();
}

void prepare_output(std::span<float> out, DecodeMode mode) {
  if (mode == DecodeMode::kSet) ops::fill(out.data(), out.size(), 0.0f);
}

void encode_sparse_f32(std::span<const float> a, std::span<const std::uint32_t> idx,
                       Message& msg) {
  const SparseHeader h = plan_indices(idx, a.size(), 32);
  msg.resize(kSparseHeaderBytes + h.index_bytes + 4 * idx.size());
  std::uint8_t* values = write_sparse_prefix(h, idx, a.size(), msg.data());
  for (std::size_t j = 0; j < idx.size(); ++j) store_f32(values + 4 * j, a[idx[j]]);
}

void encode_sparse_pairs(std::span<const std::uint32_t> idx, std::span<const float> values,
                         std::size_t n, Message& msg) {
  const SparseHeader h = plan_indices(idx, n, 32);
  msg.resize(kSparseHeaderBytes + h.index_bytes + 4 * idx.size());
  std::uint8_t* out = write_sparse_prefix(h, idx, n, msg.data());
  for (std::size_t j = 0; j < idx.size(); ++j) store_f32(out + 4 * j, values[j]);
}

namespace {

// Validates the header and total size; returns the header and the start of the values.
const std::uint8_t* sparse_f32_values(std::span<const std::uint8_t> msg, std::size_t n,
                                      std::string_view who, SparseHeader& h) {
  h = read_sparse_header(msg, n, 32, who);
  const std::size_t value_offset = kSparseHeaderBytes + h.index_bytes;
  SPARQ_CHECK(msg.size() == value_offset + 4 * std::size_t{h.count},
              "{}: message is {} bytes, its header implies {}", who, msg.size(),
              value_offset + 4 * std::size_t{h.count});
  return msg.data() + value_offset;
}

}  // namespace

void parse_sparse_f32(std::span<const std::uint8_t> msg, std::size_t n,
                      std::vector<std::uint32_t>& indices, std::vector<float>& values,
                      std::string_view who) {
  SparseHeader h;
  const std::uint8_t* in = sparse_f32_values(msg, n, who, h);
  indices.resize(h.count);
  values.resize(h.count);
  for_each_index(h, msg.data() + kSparseHeaderBytes, n, [&](std::uint32_t j, std::uint32_t i) {
    indices[j] = i;
    values[j] = load_f32(in + 4 * j);
  });
}

void decode_sparse_f32(std::span<const std::uint8_t> msg, std::span<float> out, float alpha,
                       DecodeMode mode, std::string_view who) {
  SparseHeader h;
  const std::uint8_t* values = sparse_f32_values(msg, out.size(), who, h);
  prepare_output(out, mode);
  for_each_index(h, msg.data() + kSparseHeaderBytes, out.size(),
                 [&](std::uint32_t j, std::uint32_t i) {
                   // Note [Written-out multiply-adds] (core/host_device.h): the device's bits.
                   out[i] = mul_add(alpha, load_f32(values + 4 * j), out[i]);
                 });
}

}  // namespace sparq::compress
