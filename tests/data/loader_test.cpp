// Sampler, LM and MLM loaders: per-rank disjointness, epoch coverage, exact resume, the
// BERT masking rates, and evaluation's single padded pass.
#include <gtest/gtest.h>

#include <map>
#include <numeric>
#include <set>

#include "data/lm_loader.h"
#include "data/mlm_loader.h"
#include "data/sampler.h"

namespace sparq::data {
namespace {

SamplerConfig sampler_config(int micro, int rank, int world, std::uint64_t seed = 42) {
  SamplerConfig c;
  c.micro_batch = micro, c.rank = rank, c.world_size = world, c.seed = seed;
  return c;
}

TEST(EpochSampler, RanksShareEachGlobalBatchDisjointlyAndCoverTheEpoch) {
  const int world = 3, micro = 4;
  const std::uint64_t items = 50;  // 4 full global batches of 12, 2 items dropped
  std::vector<EpochSampler> ranks;
  for (int r = 0; r < world; ++r)
    ranks.push_back(EpochSampler::create(items, sampler_config(micro, r, world)).value());
  ASSERT_EQ(ranks[0].steps_per_epoch(), 4u);
  for (int epoch = 0; epoch < 2; ++epoch) {
    std::set<std::uint64_t> seen;
    for (std::uint64_t step = 0; step < 4; ++step) {
      for (auto& s : ranks) {
        std::vector<std::uint64_t> batch;
        s.next(&batch);
        ASSERT_EQ(batch.size(), static_cast<std::size_t>(micro));
        for (auto i : batch) {
          EXPECT_LT(i, items);
          EXPECT_TRUE(seen.insert(i).second) << "item " << i << " reused within epoch " << epoch;
        }
      }
    }
    EXPECT_EQ(seen.size(), 48u);
    EXPECT_EQ(ranks[0].state().epoch, static_cast<std::uint64_t>(epoch + 1));
  }
}

TEST(EpochSampler, EpochsAreShuffledDifferentlyAndShuffleCanBeOff) {
  auto s = EpochSampler::create(100, sampler_config(100, 0, 1)).value();
  std::vector<std::uint64_t> e0, e1;
  s.next(&e0);
  s.next(&e1);
  EXPECT_NE(e0, e1);
  EXPECT_TRUE(std::is_permutation(e0.begin(), e0.end(), e1.begin()));
  auto config = sampler_config(100, 0, 1);
  config.shuffle = false;
  auto ordered = EpochSampler::create(100, config).value();
  ordered.next(&e0);
  std::vector<std::uint64_t> identity(100);
  std::iota(identity.begin(), identity.end(), 0);
  EXPECT_EQ(e0, identity);
}

TEST(EpochSampler, RestoreReproducesTheNextBatch) {
  auto a = EpochSampler::create(37, sampler_config(3, 1, 2)).value();
  std::vector<std::uint64_t> batch;
  for (int i = 0; i < 9; ++i) a.next(&batch);  // crosses an epoch boundary (6 steps per epoch)
  const LoaderState saved = a.state();
  EXPECT_EQ(saved.epoch, 1u);
  EXPECT_EQ(saved.step, 3u);
  std::vector<std::uint64_t> expected, got;
  a.next(&expected);
  auto b = EpochSampler::create(37, sampler_config(3, 1, 2)).value();
  ASSERT_TRUE(b.restore(saved).is_ok());
  b.next(&got);
  EXPECT_EQ(got, expected);
}

TEST(EpochSampler, BadConfigurationsAreClearErrors) {
  EXPECT_NE(EpochSampler::create(5, sampler_config(4, 0, 2))
                .status()
                .message()
                .find("fewer than one global batch"),
            std::string::npos);
  EXPECT_FALSE(EpochSampler::create(100, sampler_config(4, 2, 2)).is_ok());
  EXPECT_FALSE(EpochSampler::create(100, sampler_config(0, 0, 1)).is_ok());
  auto s = EpochSampler::create(100, sampler_config(4, 0, 1, 7)).value();
  const Status st = s.restore({8, 0, 0});
  EXPECT_NE(st.message().find("seed 8"), std::string::npos) << st.message();
  EXPECT_FALSE(s.restore({7, 0, 25}).is_ok());
}

SamplerConfig eval_config(int micro, int rank, int world) {
  SamplerConfig c = sampler_config(micro, rank, world);
  c.shuffle = false;
  c.pad_last_batch = true;
  return c;
}

TEST(EpochSampler, EvaluationScoresEveryItemOnceAndPadsTheLastBatch) {
  // 10 items, G = 3 x 2 = 6: two global batches, the second holding 4 items and 2 pads.
  const int world = 3, micro = 2;
  std::vector<EpochSampler> ranks;
  for (int r = 0; r < world; ++r)
    ranks.push_back(EpochSampler::create(10, eval_config(micro, r, world)).value());
  ASSERT_EQ(ranks[0].steps_per_epoch(), 2u);
  for (int epoch = 0; epoch < 2; ++epoch) {  // the same pass again after the epoch rolls
    std::vector<std::uint64_t> order;
    for (int step = 0; step < 2; ++step) {
      for (EpochSampler& s : ranks) {
        std::vector<std::uint64_t> items;
        s.next(&items);
        order.insert(order.end(), items.begin(), items.end());
      }
    }
    EXPECT_EQ(order, (std::vector<std::uint64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, kPaddingItem,
                                                 kPaddingItem}))
        << "epoch " << epoch;
    EXPECT_EQ(ranks[2].state().epoch, static_cast<std::uint64_t>(epoch + 1));
  }
  // Fewer items than one global batch still make one (padded) batch; none is an error.
  auto small = EpochSampler::create(4, eval_config(micro, 1, world)).value();
  EXPECT_EQ(small.steps_per_epoch(), 1u);
  std::vector<std::uint64_t> items;
  small.next(&items);
  EXPECT_EQ(items, (std::vector<std::uint64_t>{2, 3}));
  EXPECT_FALSE(EpochSampler::create(0, eval_config(micro, 0, world)).is_ok());
}

std::shared_ptr<VectorTokenSource> counting_source(std::uint32_t n) {
  std::vector<std::uint32_t> t(n);
  std::iota(t.begin(), t.end(), 0);
  return std::make_shared<VectorTokenSource>(std::move(t), n);
}

TEST(LmLoader, WindowsOfTPlusOneWithShiftedTargets) {
  LmLoaderConfig config;
  config.seq_len = 8;
  config.sampler = sampler_config(2, 0, 1);
  auto loader = LmLoader::create(counting_source(8 * 10 + 1), config).value();
  EXPECT_EQ(loader.num_windows(), 10u);
  std::set<std::uint64_t> windows;
  for (int step = 0; step < 5; ++step) {
    const LmBatch& b = loader.next();
    ASSERT_EQ(b.inputs.shape(), (Shape{2, 8}));
    for (int row = 0; row < 2; ++row) {
      const std::uint64_t w = b.windows[row];
      windows.insert(w);
      for (int i = 0; i < 8; ++i) {
        EXPECT_EQ(b.inputs.data<std::int32_t>()[row * 8 + i], static_cast<std::int32_t>(w * 8 + i));
        EXPECT_EQ(b.targets.data<std::int32_t>()[row * 8 + i],
                  static_cast<std::int32_t>(w * 8 + i + 1));
      }
    }
  }
  EXPECT_EQ(windows.size(), 10u);  // every window once per epoch
}

TEST(LmLoader, ReadsFromAMemoryMappedShard) {
  std::vector<std::uint32_t> tokens(4 * 64 + 1);
  for (std::size_t i = 0; i < tokens.size(); ++i)
    tokens[i] = static_cast<std::uint32_t>(i * 7 % 1000);
  const std::string path = ::testing::TempDir() + "/lm_loader_shard.bin";
  ASSERT_TRUE(write_shard(path, "test", 1000, tokens, 1).is_ok());
  auto source = ShardTokenSource::open(path);
  ASSERT_TRUE(source.is_ok()) << source.status().message();
  LmLoaderConfig config;
  config.seq_len = 64;
  config.sampler = sampler_config(4, 0, 1);
  auto loader = LmLoader::create(source.value(), config).value();
  const LmBatch& b = loader.next();
  for (int row = 0; row < 4; ++row) {
    const std::uint64_t w = b.windows[row];
    for (int i = 0; i < 64; ++i) {
      EXPECT_EQ(b.inputs.data<std::int32_t>()[row * 64 + i],
                static_cast<std::int32_t>(tokens[w * 64 + i]));
      EXPECT_EQ(b.targets.data<std::int32_t>()[row * 64 + i],
                static_cast<std::int32_t>(tokens[w * 64 + i + 1]));
    }
  }
}

TEST(LmLoader, ResumeFromStateIsExact) {
  LmLoaderConfig config;
  config.seq_len = 16;
  config.sampler = sampler_config(4, 1, 2, 9);
  auto source = counting_source(5000);
  auto a = LmLoader::create(source, config).value();
  for (int i = 0; i < 50; ++i) a.next();
  const LoaderState state = a.state();
  const LmBatch& expected = a.next();
  const std::vector<std::int32_t> want(expected.inputs.data<std::int32_t>(),
                                       expected.inputs.data<std::int32_t>() + 64);
  auto b = LmLoader::create(source, config).value();
  ASSERT_TRUE(b.restore(state).is_ok());
  const LmBatch& got = b.next();
  EXPECT_EQ(std::vector<std::int32_t>(got.inputs.data<std::int32_t>(),
                                      got.inputs.data<std::int32_t>() + 64),
            want);
}

TEST(LmLoader, TooFewTokensIsAClearError) {
  LmLoaderConfig config;
  config.seq_len = 1024;
  config.sampler = sampler_config(8, 0, 1);
  auto r = LmLoader::create(counting_source(3000), config);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("3000 tokens"), std::string::npos) << r.status().message();
}

TEST(LmLoader, EvaluationPaddingRowsHaveEveryTargetIgnored) {
  LmLoaderConfig config;
  config.seq_len = 8;
  config.sampler = eval_config(2, 0, 1);
  auto loader = LmLoader::create(counting_source(8 * 3 + 1), config).value();  // 3 windows
  ASSERT_EQ(loader.steps_per_epoch(), 2u);
  loader.next();
  const LmBatch& b = loader.next();  // window 2, then padding
  ASSERT_EQ(b.windows, (std::vector<std::uint64_t>{2, kPaddingItem}));
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(b.targets.data<std::int32_t>()[i], 2 * 8 + i + 1);
    EXPECT_EQ(b.inputs.data<std::int32_t>()[8 + i], i);  // window 0's tokens: valid ids
    EXPECT_EQ(b.targets.data<std::int32_t>()[8 + i], kIgnoreLabel);
  }
}

// Tokens 5.. are "words"; 1 = [SEP] separates documents; 2 [CLS], 3 [MASK], 0 [PAD].
MlmLoaderConfig mlm_config(int max_len, SamplerConfig s) {
  MlmLoaderConfig c;
  c.max_len = max_len;
  c.pad_id = 0, c.sep_id = 1, c.cls_id = 2, c.mask_id = 3;
  c.sampler = s;
  return c;
}

TEST(MlmLoader, SequencesFollowDocumentsWithClsSepAndPadding) {
  // Documents of 3 and 9 tokens; max_len 6 leaves 4 tokens per piece: 3 | 4 4 1.
  std::vector<std::uint32_t> t = {10, 11, 12, 1, 20, 21, 22, 23, 24, 25, 26, 27, 28, 1};
  auto source = std::make_shared<VectorTokenSource>(t, 100);
  auto config = mlm_config(6, sampler_config(4, 0, 1));
  config.sampler.shuffle = false;
  config.mask_prob = 0;
  auto loader = MlmLoader::create(source, config).value();
  ASSERT_EQ(loader.num_sequences(), 4u);
  const MlmBatch& b = loader.next();
  const std::vector<std::int32_t> ids(b.input_ids.data<std::int32_t>(),
                                      b.input_ids.data<std::int32_t>() + 24);
  EXPECT_EQ(ids, (std::vector<std::int32_t>{2, 10, 11, 12, 1,  0, 2, 20, 21, 22, 23, 1,
                                            2, 24, 25, 26, 27, 1, 2, 28, 1,  0,  0,  0}));
  const std::vector<std::int32_t> attn(b.attention_mask.data<std::int32_t>(),
                                       b.attention_mask.data<std::int32_t>() + 24);
  EXPECT_EQ(attn, (std::vector<std::int32_t>{1, 1, 1, 1, 1, 0, 1, 1, 1, 1, 1, 1,
                                             1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0}));
  for (int i = 0; i < 24; ++i) {
    EXPECT_EQ(b.labels.data<std::int32_t>()[i], kIgnoreLabel);
    EXPECT_EQ(b.token_type_ids.data<std::int32_t>()[i], 0);
  }
}

TEST(MlmLoader, EvaluationPaddingRowsAreARealSequenceWithNoLabel) {
  std::vector<std::uint32_t> t = {10, 11, 12, 1, 20, 21, 1, 30, 1};  // 3 documents
  auto source = std::make_shared<VectorTokenSource>(t, 100);
  auto config = mlm_config(6, eval_config(2, 0, 1));
  config.mask_prob = 1;  // every content position of a real row has a label
  auto loader = MlmLoader::create(source, config).value();
  ASSERT_EQ(loader.steps_per_epoch(), 2u);
  loader.next();
  const MlmBatch& b = loader.next();
  ASSERT_EQ(b.sequences, (std::vector<std::uint64_t>{2, kPaddingItem}));
  EXPECT_NE(b.labels.data<std::int32_t>()[1], kIgnoreLabel);  // sequence 2's one token
  for (int i = 0; i < 6; ++i) EXPECT_EQ(b.labels.data<std::int32_t>()[6 + i], kIgnoreLabel);
  // The padding row attends to sequence 0 ([CLS] 10 11 12 [SEP]): never an empty row.
  EXPECT_EQ(b.attention_mask.data<std::int32_t>()[6 + 4], 1);
}

TEST(MlmLoader, MaskingRatesAre15PercentThen80_10_10) {
  std::vector<std::uint32_t> t(200000);
  for (std::size_t i = 0; i < t.size(); ++i)
    t[i] = (i % 500 == 499) ? 1 : 5 + static_cast<std::uint32_t>(i % 900);
  auto source = std::make_shared<VectorTokenSource>(t, 1000);
  auto loader = MlmLoader::create(source, mlm_config(128, sampler_config(16, 0, 1, 3))).value();
  std::uint64_t content = 0, chosen = 0, masked = 0, kept = 0, replaced = 0;
  for (std::uint64_t step = 0; step < loader.steps_per_epoch(); ++step) {
    const MlmBatch& b = loader.next();
    const auto* ids = b.input_ids.data<std::int32_t>();
    const auto* labels = b.labels.data<std::int32_t>();
    const auto* attn = b.attention_mask.data<std::int32_t>();
    for (std::int64_t i = 0; i < b.input_ids.numel(); ++i) {
      const bool special = ids[i] == 0 || ids[i] == 1 || ids[i] == 2;
      if (labels[i] == kIgnoreLabel) {
        if (attn[i] && !special) ++content;
        continue;
      }
      ++content, ++chosen;
      EXPECT_GE(labels[i], 5);  // never a special token
      if (ids[i] == 3)
        ++masked;
      else if (ids[i] == labels[i])
        ++kept;
      else
        ++replaced;
    }
  }
  ASSERT_GT(content, 150000u);
  // Binomial standard deviations are ~0.1% of content and ~1% of chosen: 5 sigma bounds.
  EXPECT_NEAR(static_cast<double>(chosen) / content, 0.15, 0.005);
  EXPECT_NEAR(static_cast<double>(masked) / chosen, 0.80, 0.02);
  EXPECT_NEAR(static_cast<double>(replaced) / chosen, 0.10,
              0.015);  // a random id equal to the original counts as kept
  EXPECT_NEAR(static_cast<double>(kept) / chosen, 0.10, 0.015);
}

TEST(MlmLoader, MasksDoNotDependOnTheWorldSize) {
  std::vector<std::uint32_t> t(6000);
  for (std::size_t i = 0; i < t.size(); ++i)
    t[i] = (i % 97 == 96) ? 1 : 5 + static_cast<std::uint32_t>(i % 50);
  auto source = std::make_shared<VectorTokenSource>(t, 60);
  auto single = MlmLoader::create(source, mlm_config(32, sampler_config(4, 0, 1))).value();
  auto rank1 = MlmLoader::create(source, mlm_config(32, sampler_config(2, 1, 2))).value();
  // Same seed, same epoch: sequence s gets the same masked ids whoever loads it.
  std::map<std::uint64_t, std::vector<std::int32_t>> by_seq;
  for (int step = 0; step < 10; ++step) {
    const MlmBatch& b = single.next();
    for (std::size_t r = 0; r < b.sequences.size(); ++r) {
      by_seq[b.sequences[r]] =
          std::vector<std::int32_t>(b.input_ids.data<std::int32_t>() + r * 32,
                                    b.input_ids.data<std::int32_t>() + (r + 1) * 32);
    }
  }
  for (int step = 0; step < 10; ++step) {
    const MlmBatch& b = rank1.next();
    for (std::size_t r = 0; r < b.sequences.size(); ++r) {
      const auto it = by_seq.find(b.sequences[r]);
      ASSERT_NE(it, by_seq.end());
      EXPECT_EQ(std::vector<std::int32_t>(b.input_ids.data<std::int32_t>() + r * 32,
                                          b.input_ids.data<std::int32_t>() + (r + 1) * 32),
                it->second);
    }
  }
}

}  // namespace
}  // namespace sparq::data

namespace sparq::data {
namespace {

// The epoch's permutation in order, read through a one-item, one-rank sampler.
std::vector<std::uint64_t> permutation(std::uint64_t items, std::uint64_t seed) {
  auto s = EpochSampler::create(items, sampler_config(1, 0, 1, seed)).value();
  std::vector<std::uint64_t> perm, one;
  for (std::uint64_t i = 0; i < items; ++i) {
    s.next(&one);
    perm.push_back(one[0]);
  }
  return perm;
}

// Elastic resume: a world of another size continues at the global item position.
TEST(EpochSampler, AnotherWorldSizeContinuesAtTheGlobalItemPosition) {
  const std::uint64_t items = 100;
  const auto perm = permutation(items, 42);
  auto two = EpochSampler::create(items, sampler_config(3, 1, 2)).value();  // G = 6
  std::vector<std::uint64_t> batch;
  for (int i = 0; i < 5; ++i) two.next(&batch);
  const LoaderState saved = two.state();
  ASSERT_TRUE(saved.position.has_value());
  EXPECT_EQ(*saved.position, 30u);
  EXPECT_EQ(saved.step, 5u);
  // Three ranks (G = 9): together their next global batch is perm[30, 39).
  std::vector<std::uint64_t> global;
  for (int r = 0; r < 3; ++r) {
    auto three = EpochSampler::create(items, sampler_config(3, r, 3)).value();
    ASSERT_TRUE(three.restore(saved).is_ok());
    EXPECT_EQ(three.global_position(), 30u + 3u * r);
    three.next(&batch);
    global.insert(global.end(), batch.begin(), batch.end());
    EXPECT_EQ(*three.state().position, 39u);
  }
  EXPECT_EQ(global, std::vector<std::uint64_t>(perm.begin() + 30, perm.begin() + 39));
}

TEST(EpochSampler, ResumedPositionWithoutRoomForABatchStartsTheNextEpoch) {
  auto s = EpochSampler::create(100, sampler_config(3, 0, 3)).value();  // G = 9
  ASSERT_TRUE(s.restore({42, 4, 0, 95}).is_ok());  // 5 items left: the tail is dropped
  EXPECT_EQ(s.state().epoch, 5u);
  EXPECT_EQ(*s.state().position, 0u);
  EXPECT_FALSE(s.restore({42, 4, 0, 101}).is_ok());
}

TEST(EpochSampler, StateWithoutPositionCountsStepsOfThisWorld) {
  // Checkpoints from before positions were saved: step * G.
  auto s = EpochSampler::create(100, sampler_config(3, 1, 2)).value();
  ASSERT_TRUE(s.restore({42, 2, 4, std::nullopt}).is_ok());
  EXPECT_EQ(s.state().epoch, 2u);
  EXPECT_EQ(*s.state().position, 24u);
  EXPECT_EQ(s.global_position(), 27u);
  EXPECT_FALSE(s.restore({42, 2, 16, std::nullopt}).is_ok());  // past the 16 steps
}

}  // namespace
}  // namespace sparq::data
