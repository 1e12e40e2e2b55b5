// Compressor::check_message: every message encode() makes passes (all compressors, sizes,
// step densities), and hand-made bad messages are rejected with an error naming the
// compressor; strategies name the bucket and the sender (check_received).
#include <gtest/gtest.h>

#include <cstring>

#include "common/unexpected_communicator.h"
#include "compress/aggregation.h"
#include "compress/byte_io.h"
#include "compress/sparse_format.h"
#include "compress/two_phase_aggregator.h"
#include "test_util.h"

namespace sparq::compress {
namespace {

using testing::make;
using testing::normal_vector;

using Case = testing::CompressorCase;

EncodeContext check_context(std::int64_t step, double density = 0) {
  EncodeContext ctx;
  ctx.seed = 5;
  ctx.step = step;
  ctx.bucket_id = 3;
  ctx.rank = 1;
  ctx.world_size = 4;
  ctx.density = density;
  return ctx;
}

TEST(CheckMessage, EncodedMessagesAlwaysPass) {
  for (const Case& cs : testing::all_compressor_cases()) {
    for (std::size_t n : {1u, 9u, 1000u, 5000u}) {
      auto c = make(cs.name, cs.params);
      for (int step = 0; step < 4; ++step) {
        // Steps 2 and 3 run at warm-up densities for the compressors that have one (3: every
        // entry, the largest messages).
        const double warmup = step == 2 ? 0.3 : step == 3 ? 1.0 : 0.0;
        const EncodeContext ctx = check_context(step, c->density() ? warmup : 0.0);
        auto a = normal_vector(n, 10 + step, 2.0f);
        if (step == 1) std::fill(a.begin(), a.begin() + n / 2, 0.0f);  // many exact zeros
        Message msg;
        c->encode(a, ctx, msg);
        const Status s = c->check_message(msg, n, ctx);
        EXPECT_TRUE(s.is_ok()) << cs.name << " n " << n << " step " << step << ": " << s.message();
        // The bound peers check sizes against before they allocate (comm/gather.h).
        EXPECT_LE(msg.size(), c->max_message_bytes(n)) << cs.name << " n " << n;
      }
    }
  }
}

// A message of the right layout for `c` and n, to be damaged by each test.
Message encoded(Compressor& c, std::size_t n, const EncodeContext& ctx) {
  Message msg;
  c.encode(normal_vector(n, 3), ctx, msg);
  return msg;
}

void expect_rejected(const Compressor& c, const Message& msg, std::size_t n,
                     const std::string& fragment) {
  const Status s = c.check_message(msg, n, check_context(0));
  ASSERT_FALSE(s.is_ok()) << c.name() << ": accepted a bad message (" << fragment << ")";
  EXPECT_EQ(s.message().rfind(std::string(c.name()) + ": ", 0), 0u) << s.message();
  EXPECT_NE(s.message().find(fragment), std::string::npos) << s.message();
}

TEST(CheckMessage, WrongSizesAreRejectedByEveryCompressor) {
  for (const Case& cs : testing::all_compressor_cases()) {
    auto c = make(cs.name, cs.params);
    const std::size_t n = 1000;
    Message msg = encoded(*c, n, check_context(0));
    Message longer = msg;
    longer.push_back(0);
    expect_rejected(*c, longer, n, "bytes");
    Message shorter(msg.begin(), msg.end() - 1);
    expect_rejected(*c, shorter, n, "bytes");
    expect_rejected(*c, Message{}, n, "bytes");
  }
}

// count=1, a varint index, one f32 value: the plain sparse message by hand.
Message sparse_one(std::uint32_t index) {
  Message msg(kSparseHeaderBytes + 5 + 4, 0);
  store_u32(msg.data(), 1);
  msg[9] = 32;
  const std::uint8_t* end = put_varint(msg.data() + kSparseHeaderBytes, index);
  const auto index_bytes = static_cast<std::uint32_t>(end - msg.data() - kSparseHeaderBytes);
  store_u32(msg.data() + 4, index_bytes);
  msg.resize(kSparseHeaderBytes + index_bytes + 4);
  store_f32(msg.data() + kSparseHeaderBytes + index_bytes, 1.5f);
  return msg;
}

TEST(CheckMessage, SparseHeadersAndIndicesAreChecked) {
  for (const char* name : {"topk", "topk_sampled", "gtopk", "threshold", "dgc"}) {
    auto c = make(name);
    EXPECT_TRUE(c->check_message(sparse_one(999), 1000, check_context(0)).is_ok()) << name;
    expect_rejected(*c, sparse_one(70000), 1000, "index 70000 out of range for 1000 floats");
    Message bad_format = sparse_one(5);
    bad_format[8] = 7;
    expect_rejected(*c, bad_format, 1000, "unknown index format 7");
    Message bad_bits = sparse_one(5);
    bad_bits[9] = 16;
    expect_rejected(*c, bad_bits, 1000, "16-bit values");
    Message too_many = sparse_one(5);
    store_u32(too_many.data(), 2);  // two entries, one varint
    expect_rejected(*c, too_many, 1000, "varint");
    Message huge_section = sparse_one(5);
    store_u32(huge_section.data() + 4, 0xfffffff0u);
    expect_rejected(*c, huge_section, 1000, "runs past");
  }
}

TEST(CheckMessage, BitmapsMayNotMarkPaddingOrDisagreeWithTheCount) {
  auto c = make("topk", {{"density", "0.9"}});
  const std::size_t n = 13;  // 2 bitmap bytes, 3 padding bits
  Message msg = encoded(*c, n, check_context(0));
  ASSERT_EQ(msg[8], 1) << "expected a bitmap message";
  Message padding = msg;
  padding[kSparseHeaderBytes + 1] |= 0x80;  // index 15 >= 13
  expect_rejected(*c, padding, n, "past 13 floats");
  Message count = msg;
  store_u32(count.data(), load_u32(count.data()) - 1);
  count.resize(count.size() - 4);  // keep the size consistent with the smaller count
  expect_rejected(*c, count, n, "bitmap holds");
}

TEST(CheckMessage, ScalesAndNormsAreChecked) {
  const std::size_t n = 1000;
  auto bq = make("blockquant", {{"bits", "4"}});
  Message msg = encoded(*bq, n, check_context(0));
  store_u16(msg.data() + 2, 0x7c00);  // +inf as the second block's f16 scale
  expect_rejected(*bq, msg, n, "block 1");

  auto lbs = make("lbs");
  msg = encoded(*lbs, n, check_context(0));
  const std::uint32_t index_bytes = load_u32(msg.data() + 4);
  store_u16(msg.data() + kSparseHeaderBytes + index_bytes, 0xfc00);  // -inf
  expect_rejected(*lbs, msg, n, "block 0");

  auto qsgd = make("qsgd", {{"chunk", "128"}});
  msg = encoded(*qsgd, n, check_context(0));
  store_f32(msg.data() + 4, -1.0f);
  expect_rejected(*qsgd, msg, n, "chunk 1 has a negative norm");

  for (const char* name : {"signsgd", "onebit", "terngrad"}) {
    auto c = make(name);
    msg = encoded(*c, n, check_context(0));
    store_f32(msg.data(), -2.0f);
    expect_rejected(*c, msg, n, "negative scale");
  }
}

TEST(CheckMessage, PowerSgdNeedsItsLayout) {
  auto c = make("powersgd", {{"rank", "2"}, {"min_compress_numel", "16"}});
  const Message msg = encoded(*c, 1000, check_context(0));
  expect_rejected(*c, msg, 999, "no matrix layout for 999 floats");
}

TEST(CheckMessage, StrategiesNameTheBucketCompressorAndSender) {
  auto c = make("topk");
  EncodeContext from = check_context(0);
  from.rank = 1;
  const Status s = check_received(*c, sparse_one(70000), 1000, from, "rank 1");
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.message(),
            "bucket 3 (topk): message from rank 1: index 70000 out of range for 1000 floats");
  EXPECT_TRUE(check_received(*c, sparse_one(7), 1000, from, "rank 1").is_ok());
}

// A world of two whose peer announces `forged` bytes for this rank's two_phase region.
class ForgedRegionSize final : public ::sparq::testing::UnexpectedCommunicator {
 public:
  explicit ForgedRegionSize(std::int64_t forged) : forged_(forged) {}
  void alltoall(const void* in, void* out, std::size_t count, DType dtype) override {
    ASSERT_EQ(count, 1u);
    ASSERT_EQ(dtype, DType::kI64);
    static_cast<std::int64_t*>(out)[0] = static_cast<const std::int64_t*>(in)[0];
    static_cast<std::int64_t*>(out)[1] = forged_;
  }

 private:
  std::int64_t forged_;
};

// Sizes received from peers are bounded before anything is allocated for them (comm/gather.h):
// two_phase's region messages by the compressor's max_message_bytes of this rank's region.
TEST(CheckMessageDeathTest, TwoPhaseEndsTheJobOnAForgedRegionSize) {
  auto c = make("topk", {{"density", "0.5"}});
  std::vector<float> bucket = normal_vector(100, 3);
  for (const std::int64_t forged : {std::int64_t{-1}, std::int64_t{1} << 40}) {
    ForgedRegionSize comm(forged);
    TwoPhaseAggregator two_phase(AggregatorOptions{});
    EXPECT_DEATH((void)two_phase.run(bucket, *c, nullptr, comm, check_context(0)),
                 "rank 1 sent a size of " + std::to_string(forged) +
                     " for its message for my region, outside \\[0, " +
                     std::to_string(c->max_message_bytes(50)) + "\\]")
        << forged;
  }
}

}  // namespace
}  // namespace sparq::compress
