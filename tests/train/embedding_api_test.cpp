// The embedding API (include/sparq/: model registry, training from a TrainConfig built in
// code, the per-step callback): a model defined here, outside src/, trains through
// run_training() and its metrics arrive through the callbacks.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <filesystem>
#include <vector>

#include "compress/aggregation.h"
#include "compress/dense_cast.h"
#include "compress/registry.h"
#include "core/threading.h"
#include "models/model_registry.h"
#include "train/run.h"

namespace sparq {
namespace {

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// A bigram language model written against the Model interface only: logits of token t are
// row tokens[t] of a [V, V] table plus a bias. Two layers, so the readiness order (bias,
// then table) is exercised. Plain host loops: a CPU store.
class BigramLm final : public Model {
 public:
  BigramLm(const ModelConfig& config, RunShape shape) : Model(config, shape) {
    add_layer("table", {"bigram.table"});
    add_layer("bias", {"bigram.bias"});
  }
  void declare(ParamStore& store) const override {
    const std::int64_t v = config().padded_vocab();
    store.add({"bigram.table", Shape{v, v}, Init::normal(0.02f), /*weight_decay=*/false});
    store.add({"bigram.bias", Shape{v}, Init::zeros(), false});
  }
  float forward(const Batch& batch) override {
    check_token_batch(batch, &b_, &t_);
    const std::int64_t v = config().padded_vocab(), rows = b_ * t_;
    logits_.assign(static_cast<std::size_t>(rows * v), 0.0f);
    tokens_.assign(batch.tokens.data<std::int32_t>(), batch.tokens.data<std::int32_t>() + rows);
    targets_.assign(batch.targets.data<std::int32_t>(), batch.targets.data<std::int32_t>() + rows);
    const float* table = store().param("bigram.table").data<float>();
    const float* bias = store().param("bigram.bias").data<float>();
    double loss = 0;
    counted_ = 0;
    for (std::int64_t r = 0; r < rows; ++r) {
      float* z = &logits_[static_cast<std::size_t>(r * v)];
      float top = -INFINITY;
      for (std::int64_t j = 0; j < v; ++j) {
        z[j] = table[tokens_[r] * v + j] + bias[j];
        top = std::max(top, z[j]);
      }
      if (targets_[r] == kIgnoreIndex) continue;
      double sum = 0;
      for (std::int64_t j = 0; j < v; ++j) sum += std::exp(double(z[j]) - top);
      loss += std::log(sum) + top - z[targets_[r]];
      ++counted_;
    }
    // No has_forward_ or mark_forward(): the trainer records the forward (review,
    // 2026-12-07: a model written as the docs say aborted at backward()).
    return counted_ ? static_cast<float>(loss / counted_) : 0.0f;
  }
  Tensor logits() const override {
    return Tensor(const_cast<float*>(logits_.data()), DType::kF32,
                  Shape{b_, t_, config().padded_vocab()});
  }
  std::size_t activation_bytes() const override {
    return static_cast<std::size_t>(run_shape().micro_batch * run_shape().seq_len *
                                    config().padded_vocab()) * sizeof(float);
  }

 protected:
  void bind_layers(const ParamStore&) override {}
  void backward_layers() override {
    const std::int64_t v = config().padded_vocab(), rows = b_ * t_;
    // dL/dz = (softmax(z) - onehot(target)) / counted, in place of the logits.
    for (std::int64_t r = 0; r < rows; ++r) {
      float* z = &logits_[static_cast<std::size_t>(r * v)];
      if (targets_[r] == kIgnoreIndex || counted_ == 0) {
        std::fill(z, z + v, 0.0f);
        continue;
      }
      const float top = *std::max_element(z, z + v);
      double sum = 0;
      for (std::int64_t j = 0; j < v; ++j) sum += std::exp(double(z[j]) - top);
      for (std::int64_t j = 0; j < v; ++j) {
        z[j] = static_cast<float>(std::exp(double(z[j]) - top) / sum / counted_);
      }
      z[targets_[r]] -= 1.0f / static_cast<float>(counted_);
    }
    float* bias_grad = store().grad("bigram.bias").data<float>();
    for (std::int64_t r = 0; r < rows; ++r) {
      for (std::int64_t j = 0; j < v; ++j) bias_grad[j] += logits_[static_cast<std::size_t>(r * v + j)];
    }
    ready(1);
    float* table_grad = store().grad("bigram.table").data<float>();
    for (std::int64_t r = 0; r < rows; ++r) {
      for (std::int64_t j = 0; j < v; ++j) {
        table_grad[tokens_[r] * v + j] += logits_[static_cast<std::size_t>(r * v + j)];
      }
    }
    ready(0);
  }

 private:
  std::int64_t b_ = 0, t_ = 0, counted_ = 0;
  std::vector<float> logits_;
  std::vector<std::int32_t> tokens_, targets_;
};

void register_bigram() {
  static const Status registered = [] {
    ModelConfig defaults = model_preset("gpt2-tiny").value();  // an LM: next-token batches
    defaults.vocab_size = 256;
    defaults.n_ctx = 64;
    return register_model({"test_bigram", "bigram table + bias", defaults,
                           [](const ModelConfig& c, RunShape s) -> Result<std::unique_ptr<Model>> {
                             return std::unique_ptr<Model>(std::make_unique<BigramLm>(c, s));
                           }});
  }();
  ASSERT_TRUE(registered.is_ok()) << registered.message();
}

train::TrainConfig bigram_config(std::int64_t steps) {
  train::TrainConfig c = train::default_train_config().value();
  c.model = make_model_config("test_bigram", {}).value();
  c.data.markov.order = 1;
  c.data.markov.vocab_size = 256;
  c.data.markov_train_tokens = 1 << 16;
  c.data.markov_eval_tokens = 1 << 12;
  c.schedule.lr = 0.05;
  c.train.steps = steps;
  c.train.eval_batches = 2;
  c.compress.compress.name = "topk";
  c.compress.compress.params = {{"density", "0.1"}};
  c.log.progress_interval = 0;
  return c;
}

TEST(EmbeddingApi, RegisteredModelTrainsFromACodeBuiltConfigWithCallbacks) {
  register_bigram();
  auto config = train::validate_train_config(bigram_config(40));
  ASSERT_TRUE(config.is_ok()) << config.status().message();
  EXPECT_TRUE(contains(config->resolved_yaml, "preset: test_bigram")) << config->resolved_yaml;
  EXPECT_TRUE(contains(config->resolved_yaml, "name: topk"));
  auto comm = train::make_communicator(config->comm);
  ASSERT_TRUE(comm.is_ok()) << comm.status().message();

  std::vector<std::int64_t> steps;
  std::vector<float> losses;
  std::vector<train::EvalMetrics> evals;
  train::RunOptions options;
  options.trainer.on_step = [&](const train::StepMetrics& m) {
    steps.push_back(m.step());
    losses.push_back(m.result.loss);
    EXPECT_GT(m.payload_bytes, 0u);
    EXPECT_LT(m.payload_bytes, m.dense_bytes);  // topk at density 0.1 sends less than f32
  };
  options.trainer.on_eval = [&](const train::EvalMetrics& e) { evals.push_back(e); };
  auto summary = train::run_training(*config, **comm, options);
  ASSERT_TRUE(summary.is_ok()) << summary.status().message();

  ASSERT_EQ(steps.size(), 40u);
  for (std::size_t i = 0; i < steps.size(); ++i) EXPECT_EQ(steps[i], static_cast<std::int64_t>(i + 1));
  EXPECT_NEAR(losses.front(), std::log(256.0), 0.05);  // a near-uniform start
  const double tail = (losses[35] + losses[36] + losses[37] + losses[38] + losses[39]) / 5;
  EXPECT_LT(tail, losses.front() - 1.0) << "the bigram table did not learn";
  ASSERT_EQ(evals.size(), 1u);  // eval_interval 0: only the final evaluation
  EXPECT_EQ(evals[0].step, 40);
  EXPECT_DOUBLE_EQ(evals[0].loss, summary->eval.loss);
  EXPECT_EQ(summary->steps, 40);
}

TEST(EmbeddingApi, AnEditedConfigIsRevalidatedByRunTraining) {
  register_bigram();
  train::TrainConfig config = train::validate_train_config(bigram_config(40)).value();
  config.train.steps = 3;  // edited after validation: resolved_yaml is stale
  int calls = 0;
  train::RunOptions options;
  options.trainer.on_step = [&](const train::StepMetrics&) { ++calls; };
  auto comm = train::make_communicator(config.comm).value();
  auto summary = train::run_training(config, *comm, options);
  ASSERT_TRUE(summary.is_ok()) << summary.status().message();
  EXPECT_EQ(calls, 3);
  EXPECT_EQ(summary->steps, 3);

  config.schedule.lr = -1;
  auto refused = train::run_training(config, *comm, options);
  ASSERT_FALSE(refused.is_ok());
  EXPECT_TRUE(contains(refused.status().message(), "<in-code config>")) << refused.status().message();
  EXPECT_TRUE(contains(refused.status().message(), "optim.lr")) << refused.status().message();
}

// The model is its spec (effective_yaml writes the spec alone): a field edited in code trained
// while checkpoints recorded the spec, unvalidated (review, 2026-12-05). Refused by both
// validate_train_config and run_training, naming the field; make_model_config trains.
TEST(EmbeddingApi, AModelFieldEditedOutsideItsSpecIsRefused) {
  register_bigram();
  train::TrainConfig config = train::validate_train_config(bigram_config(2)).value();
  auto comm = train::make_communicator(config.comm).value();
  train::TrainConfig edited = config;
  edited.model.n_ctx = 128;
  for (const Status& s : {train::validate_train_config(edited).status(),
                          train::run_training(edited, *comm, {}).status()}) {
    ASSERT_FALSE(s.is_ok());
    EXPECT_TRUE(contains(s.message(), "model: n_ctx edited in code, not in its spec"))
        << s.message();
  }
  edited.model = make_model_config("test_bigram", {{"n_ctx", "128"}}).value();
  auto trained = train::run_training(edited, *comm, {});
  ASSERT_TRUE(trained.is_ok()) << trained.status().message();
}

// One communicator serves several runs (train/run.h), but the emulated link and the backend
// are fixed when it is made: a run asking for another link trained on the old one while its
// report named its own (review, 2026-12-05). Refused, naming both; a communicator made for
// the config trains.
TEST(EmbeddingApi, ARunOnACommunicatorMadeForAnotherLinkIsRefused) {
  register_bigram();
  train::TrainConfig config = train::validate_train_config(bigram_config(2)).value();
  auto plain = train::make_communicator(config.comm).value();
  config.comm.emulate.gbit_per_s = 1000;
  auto refused = train::run_training(config, *plain, {});
  ASSERT_FALSE(refused.is_ok());
  EXPECT_TRUE(contains(refused.status().message(),
                       "comm.emulate asks for an emulated link of 1000 Gbit/s and 0 us a call, "
                       "but the communicator was made with no emulated link"))
      << refused.status().message();

  auto linked = train::make_communicator(config.comm).value();
  auto trained = train::run_training(config, *linked, {});
  ASSERT_TRUE(trained.is_ok()) << trained.status().message();
  EXPECT_EQ(trained->steps, 2);

  train::TrainConfig unlinked = train::validate_train_config(bigram_config(2)).value();
  auto other = train::run_training(unlinked, *linked, {});
  ASSERT_FALSE(other.is_ok());
  EXPECT_TRUE(contains(other.status().message(), "comm.emulate asks for no emulated link"))
      << other.status().message();

  unlinked.comm.backend = "mpi";  // on a one-process communicator: it trained alone
  auto alone = train::run_training(unlinked, *plain, {});
  ASSERT_FALSE(alone.is_ok());
  EXPECT_TRUE(
      contains(alone.status().message(), "comm.backend: mpi, but the communicator is 'self'"))
      << alone.status().message();
}

// train.threads is the Trainer's, not the embedder's: OpenMP keeps the count per thread, and
// a run that set it used to leave it set for the caller and for the next run's default.
TEST(EmbeddingApi, TrainThreadsIsRestoredForTheCaller) {
  register_bigram();
  set_num_threads(2);
  const int before = max_threads();  // 1 in a build without OpenMP
  train::TrainConfig config = bigram_config(2);
  config.train.threads = 1;
  auto comm = train::make_communicator(config.comm).value();
  ASSERT_TRUE(train::run_training(config, *comm).is_ok());
  EXPECT_EQ(max_threads(), before);
}

// A registered model's parameters, optimizer state and residual go through checkpoints like
// a built-in model's: 3 steps + resume + 3 steps ends where 6 steps in one run end.
TEST(EmbeddingApi, RegisteredModelResumesBitIdentically) {
  register_bigram();
  const std::string dir = ::testing::TempDir() + "sparq_embedding_api_ckpt";
  std::filesystem::remove_all(dir);
  train::TrainConfig config = bigram_config(6);
  auto comm = train::make_communicator(config.comm).value();
  auto straight = train::run_training(config, *comm);
  ASSERT_TRUE(straight.is_ok()) << straight.status().message();

  config.train.checkpoint_dir = dir;
  config.train.checkpoint_interval = 3;
  train::RunOptions first;
  first.stop_at = 3;  // interrupted after the step-3 checkpoint
  ASSERT_TRUE(train::run_training(config, *comm, first).is_ok());
  train::RunOptions second;
  second.resume = dir;
  auto resumed = train::run_training(config, *comm, second);
  ASSERT_TRUE(resumed.is_ok()) << resumed.status().message();
  EXPECT_EQ(resumed->steps, 6);
  EXPECT_EQ(resumed->steps_run, 3);
  EXPECT_EQ(resumed->param_checksum, straight->param_checksum);
  std::filesystem::remove_all(dir);
}

// An aggregation strategy registered here carries every compressed bucket of a training run
// when compress.aggregation names it: allgather underneath, counting its calls.
std::atomic<int> counting_runs{0};
class CountingAggregator final : public compress::Aggregator {
 public:
  std::string_view name() const override { return "test_counting"; }
  Status run(std::span<float> bucket, compress::Compressor& c, compress::ErrorFeedback* ef,
             comm::Communicator& comm, const compress::EncodeContext& ctx) override {
    ++counting_runs;
    const Status s = inner_->run(bucket, c, ef, comm, ctx);
    payload_bytes_ = inner_->last_payload_bytes();
    return s;
  }

 private:
  std::unique_ptr<compress::Aggregator> inner_ =
      compress::make_aggregator(compress::Aggregation::kAllgather);
};

TEST(EmbeddingApi, RegisteredAggregationCarriesTheBuckets) {
  register_bigram();
  static const Status registered = compress::register_aggregation(
      {"test_counting", "allgather, counted", {}, [](const compress::AggregatorOptions&) {
         return std::unique_ptr<compress::Aggregator>(std::make_unique<CountingAggregator>());
       }});
  ASSERT_TRUE(registered.is_ok()) << registered.message();
  train::TrainConfig config = bigram_config(3);
  config.compress.aggregation = "test_counting";
  auto comm = train::make_communicator(config.comm).value();
  counting_runs = 0;
  auto summary = train::run_training(config, *comm);
  ASSERT_TRUE(summary.is_ok()) << summary.status().message();
  EXPECT_GE(counting_runs.load(), 3);  // at least one compressed bucket per step
  EXPECT_GT(summary->compression_ratio, 1.0);
}

TEST(EmbeddingApi, CodeBuiltConfigErrorsNameTheKey) {
  train::TrainConfig c = train::default_train_config().value();
  c.compress.compress.name = "topkk";
  auto bad_name = train::validate_train_config(c);
  ASSERT_FALSE(bad_name.is_ok());
  EXPECT_TRUE(contains(bad_name.status().message(), "compress.name: unknown compressor 'topkk'"))
      << bad_name.status().message();
  c.compress.compress.name = "topk";
  c.compress.compress.params = {{"densty", "0.1"}};
  auto bad_key = train::validate_train_config(c);
  ASSERT_FALSE(bad_key.is_ok());
  EXPECT_TRUE(contains(bad_key.status().message(), "compress.topk.densty: unknown key"))
      << bad_key.status().message();
  c.compress.compress.params = {};
  c.compress.aggregation = "ring";
  auto bad_strategy = train::validate_train_config(c);
  ASSERT_FALSE(bad_strategy.is_ok());
  EXPECT_TRUE(contains(bad_strategy.status().message(), "compress.aggregation: unknown aggregation 'ring'"))
      << bad_strategy.status().message();
}

// An external compressor is selected and configured from YAML like a built-in one.
TEST(EmbeddingApi, ExternalCompressorInAYamlConfig) {
  static const Status registered = compress::register_compressor(
      {"test_yaml_dense", "dense, for the YAML test",
       {{"scale", "unused factor, (0, 10]"}},
       [](compress::ConfigReader& r) -> Result<std::unique_ptr<compress::Compressor>> {
         SPARQ_ASSIGN_OR_RETURN(double scale, r.real("scale", 1.0, 0.0, 10.0, true));
         (void)scale;
         return std::unique_ptr<compress::Compressor>(std::make_unique<compress::DenseCastCompressor>(
             compress::DenseCastCompressor::Format::kF32));
       }});
  ASSERT_TRUE(registered.is_ok()) << registered.message();
  const std::string yaml = "compress:\n  name: test_yaml_dense\n  test_yaml_dense:\n    scale: 2\n";
  auto ok = train::parse_train_config(yaml, "x.yaml", {});
  ASSERT_TRUE(ok.is_ok()) << ok.status().message();
  EXPECT_EQ(ok->compress.compress.params.at("scale"), "2");
  auto typo = train::parse_train_config(yaml, "x.yaml", {"compress.test_yaml_dense.sacle=1"});
  ASSERT_FALSE(typo.is_ok());
  EXPECT_EQ(typo.status().message(),
            "x.yaml with --set compress.test_yaml_dense.sacle: compress.test_yaml_dense.sacle: "
            "unknown key (known keys: scale)");
  auto range = train::parse_train_config(yaml, "x.yaml", {"compress.test_yaml_dense.scale=0"});
  ASSERT_FALSE(range.is_ok());
  EXPECT_EQ(range.status().message(),
            "x.yaml with --set compress.test_yaml_dense.scale: compress.test_yaml_dense.scale: "
            "must be in (0, 10], got 0");
}

TEST(EmbeddingApi, ModelRegistrationErrors) {
  register_bigram();
  const ModelFactory factory = [](const ModelConfig& c, RunShape s) -> Result<std::unique_ptr<Model>> {
    return std::unique_ptr<Model>(std::make_unique<BigramLm>(c, s));
  };
  ModelConfig defaults = model_preset("gpt2-tiny").value();
  const Status again = register_model({"test_bigram", "", defaults, factory});
  EXPECT_TRUE(contains(again.message(), "'test_bigram' is already registered")) << again.message();
  const Status builtin = register_model({"gpt2-tiny", "", defaults, factory});
  EXPECT_TRUE(contains(builtin.message(), "'gpt2-tiny' is a built-in preset")) << builtin.message();
  const Status null_name = register_model({"null", "", defaults, factory});
  EXPECT_TRUE(contains(null_name.message(), "and not 'null'")) << null_name.message();
  defaults.n_head = 3;  // 128 is not divisible by 3
  const Status invalid = register_model({"test_bad", "", defaults, factory});
  EXPECT_TRUE(contains(invalid.message(), "not divisible by n_head 3")) << invalid.message();
  auto unknown = make_model_config("test_bigramm", {});
  ASSERT_FALSE(unknown.is_ok());
  EXPECT_TRUE(contains(unknown.status().message(), "test_bigram")) << unknown.status().message();
  // Keys of the registered model's architecture override its defaults, validated as usual.
  auto sized = make_model_config("test_bigram", {{"vocab_size", "300"}});
  ASSERT_TRUE(sized.is_ok()) << sized.status().message();
  EXPECT_EQ(sized->vocab_size, 300);
  EXPECT_FALSE(make_model_config("test_bigram", {{"layout", "8,M"}}).is_ok());
}

}  // namespace
}  // namespace sparq
