#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <set>

#include "compress/block_codec.h"
#include "compress/byte_io.h"
#include "compress/random_streams.h"
#include "compress/sparse_format.h"
#include "core/dtype.h"
#include "core/rng.h"

namespace sparq::compress {
namespace {

TEST(RandomStreams, ServerDrawsAreTheOwnersOnlyForRankSharedDraws) {
  // Note [Server draws]: the owner's re-encode of its region draws from a stream of its own,
  // while randomk's rank-shared index set (rank 0) stays the one phase 1 used.
  EncodeContext owner{
      .seed = 7, .step = 3, .bucket_id = 2, .rank = 1, .world_size = 4, .offset = 4096};
  const EncodeContext server = server_encode_context(owner);
  EXPECT_EQ(server.rank, 5);
  EXPECT_EQ(server.offset, owner.offset);
  EXPECT_NE(compression_stream(server, server.rank), compression_stream(owner, owner.rank));
  for (int r = 0; r < owner.world_size; ++r) {
    EXPECT_NE(compression_stream(server, server.rank), compression_stream(owner, r)) << r;
  }
  EXPECT_EQ(compression_stream(server, 0), compression_stream(owner, 0));
}

// Note [Tree merge draws]: every tree merge of a step and bucket draws from its own stream,
// apart from every leaf, every two_phase server and every other (round, rank); and a node's
// list context is the merge of the last round in which it received.
TEST(TreeMergeDraws, EveryMergeHasItsOwnStreamAndListsKnowTheirs) {
  for (int p = 1; p <= 40; ++p) {
    EncodeContext leaf{.seed = 7, .step = 3, .bucket_id = 2, .rank = 0, .world_size = p};
    std::set<std::uint64_t> streams;
    for (int r = 0; r < 2 * p; ++r) streams.insert(compression_stream(leaf, r));
    std::size_t merges = 0;
    for (int dist = 1, round = 0; dist < p; dist <<= 1, ++round) {
      for (int r = 0; r + dist < p; r += 2 * dist) {
        EncodeContext own = leaf;
        own.rank = r;
        const EncodeContext merged = tree_merge_context(own, round);
        EXPECT_EQ(merged.rank, p * (round + 2) + r);
        streams.insert(compression_stream(merged, merged.rank));
        ++merges;
        // What r sends on (or keeps, at rank 0) is the list of its last merge so far.
        EXPECT_EQ(tree_list_context(leaf, r, round + 1).rank, merged.rank) << p << " " << r;
      }
    }
    EXPECT_EQ(streams.size(), static_cast<std::size_t>(2 * p) + merges) << p;
  }
  // 6 ranks: rank 4 received from 5 in round 0 and had no peer (6) in round 1, so in round 2
  // it sends its round-0 merge; rank 1 never received and sends its leaf list.
  EncodeContext six{.seed = 1, .world_size = 6};
  EXPECT_EQ(tree_list_context(six, 4, 2).rank, 6 * 2 + 4);
  EXPECT_EQ(tree_list_context(six, 1, 0).rank, 1);
  EXPECT_EQ(tree_list_context(six, 0, 0).rank, 0);
  EXPECT_EQ(tree_list_context(six, 0, 3).rank, 6 * 4 + 0);
  EXPECT_EQ(tree_root_context(six).rank, 6 * 4 + 0);  // 3 rounds; the last merged into rank 0
  EncodeContext one{.seed = 1, .world_size = 1};
  EXPECT_EQ(tree_root_context(one).rank, 0);  // no round: the leaf list
  EncodeContext five{.seed = 1, .world_size = 5};
  EXPECT_EQ(tree_root_context(five).rank, 5 * 4 + 0);  // 3 rounds (1, 2, 4 apart)
}

TEST(ByteIo, VarintRoundTripsAndHasTheDocumentedSize) {
  const std::uint32_t values[] = {0, 1, 127, 128, 16383, 16384, (1u << 21) - 1, 1u << 21,
                                  (1u << 28) - 1, 1u << 28, 0xffffffffu};
  const std::size_t sizes[] = {1, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5};
  for (std::size_t i = 0; i < std::size(values); ++i) {
    std::uint8_t buf[8];
    EXPECT_EQ(varint_size(values[i]), sizes[i]);
    const std::uint8_t* end = put_varint(buf, values[i]);
    ASSERT_EQ(static_cast<std::size_t>(end - buf), sizes[i]);
    std::uint32_t back = 0;
    EXPECT_EQ(get_varint(buf, end, back), end);
    EXPECT_EQ(back, values[i]);
    EXPECT_EQ(get_varint(buf, end - 1, back), nullptr) << "truncated varint must fail";
  }
}

std::vector<std::uint32_t> decode_indices(const Message& msg, std::size_t n) {
  const SparseHeader h = read_sparse_header(msg, n, 32, "test");
  std::vector<std::uint32_t> out;
  for_each_index(h, msg.data() + kSparseHeaderBytes, n,
                 [&](std::uint32_t j, std::uint32_t i) {
                   EXPECT_EQ(j, out.size());
                   out.push_back(i);
                 });
  return out;
}

TEST(SparseFormat, PicksTheSmallerIndexCodingAndRoundTrips) {
  const std::size_t n = 10000;
  std::vector<float> a(n, 1.0f);
  Rng rng(3, 1);
  for (std::size_t count : {0u, 1u, 50u, 700u, 1200u, 1250u, 1300u, 5000u, 10000u}) {
    std::vector<std::uint32_t> idx(n);
    std::iota(idx.begin(), idx.end(), 0u);
    for (std::size_t i = 0; i < count; ++i) std::swap(idx[i], idx[i + rng.below(n - i)]);
    idx.resize(count);
    std::sort(idx.begin(), idx.end());
    Message msg;
    encode_sparse_f32(a, idx, msg);
    const SparseHeader h = read_sparse_header(msg, n, 32, "test");
    const std::size_t varint = delta_varint_bytes(idx), bitmap = bitmap_bytes(n);
    EXPECT_EQ(h.index_bytes, std::min(varint, bitmap)) << count;
    EXPECT_EQ(h.format, bitmap < varint ? IndexFormat::kBitmap : IndexFormat::kDeltaVarint);
    EXPECT_EQ(msg.size(), kSparseHeaderBytes + h.index_bytes + 4 * count);
    EXPECT_EQ(decode_indices(msg, n), idx) << count;
  }
}

TEST(SparseFormat, DeltaVarintBytesCountGaps) {
  // gaps 5, 0, 199 (2 bytes), 0 -> 1 + 1 + 2 + 1 bytes
  const std::vector<std::uint32_t> idx = {5, 6, 206, 207};
  EXPECT_EQ(delta_varint_bytes(idx), 5u);
}

TEST(BlockCodec, PackUnpackRoundTripsForEveryWidth) {
  Rng rng(11, 2);
  for (int bits = 2; bits <= 8; ++bits) {
    for (std::size_t count : {1u, 7u, 8u, 9u, 64u, 257u}) {
      std::vector<std::uint8_t> codes(count), back(count);
      for (auto& c : codes) c = static_cast<std::uint8_t>(rng.below(1u << bits));
      std::vector<std::uint8_t> packed(packed_code_bytes(count, bits), 0xAA);
      pack_codes(codes.data(), count, bits, packed.data());
      unpack_codes(packed.data(), count, bits, back.data());
      EXPECT_EQ(codes, back) << "bits " << bits << " count " << count;
    }
  }
}

TEST(BlockCodec, FourBitCodesPackLowNibbleFirst) {
  const std::uint8_t codes[3] = {0x3, 0xC, 0x7};
  std::uint8_t packed[2];
  pack_codes(codes, 3, 4, packed);
  EXPECT_EQ(packed[0], 0xC3);
  EXPECT_EQ(packed[1], 0x07);
}

TEST(BlockCodec, ScaleRoundsUpToTheNextHalf) {
  Rng rng(5, 5);
  for (int i = 0; i < 10000; ++i) {
    const float s = std::ldexp(rng.uniform() + 0.5f, static_cast<int>(rng.below(40)) - 30);
    const std::uint16_t bits = half_bits_round_up(s);
    const float up = half_bits_to_float(bits);
    ASSERT_GE(up, s);
    if (bits > 0) {
      ASSERT_LT(half_bits_to_float(static_cast<std::uint16_t>(bits - 1)), s);
    }
  }
  EXPECT_EQ(half_bits_round_up(1e9f), 0x7bff) << "capped at the largest finite f16";
}

}  // namespace
}  // namespace sparq::compress
