#include "train/batch_source.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <vector>

#include "data/image_dataset.h"
#include "data/image_loader.h"
#include "data/lm_loader.h"
#include "data/markov_source.h"
#include "data/mlm_loader.h"
#include "data/token_source.h"

namespace sparq::train {
namespace {

static_assert(data::kIgnoreLabel == kIgnoreIndex, "loaders' padding must be what models ignore");

// One slot's storage: every tensor a Batch may need, as owned vectors.
struct Slot {
  std::vector<std::int32_t> tokens, targets, token_types, labels;
  std::vector<std::uint8_t> mask;
  std::vector<float> images;
};

template <typename T>
T* copy_into(std::vector<T>& dst, const Tensor& src) {
  dst.resize(static_cast<std::size_t>(src.numel()));
  std::memcpy(dst.data(), src.data<T>(), dst.size() * sizeof(T));
  return dst.data();
}

data::SamplerConfig sampler_config(const TrainConfig& c, bool train, int rank, int world) {
  data::SamplerConfig s;
  s.micro_batch = c.train.micro_batch;
  s.rank = rank;
  s.world_size = world;
  s.seed = c.train.seed;
  s.shuffle = train;
  s.pad_last_batch = !train;  // evaluation scores every item once (sampler.h)
  return s;
}

// What every loader-backed source shares: the loader, the slots, the rows per batch.
template <typename Loader>
class LoaderSource : public BatchSource {
 public:
  LoaderSource(Loader loader, int slots, std::int64_t rows, std::int64_t items_per_row)
      : loader_(std::move(loader)), slots_(slots), rows_(rows), per_row_(items_per_row) {}
  data::LoaderState state() const override { return loader_.state(); }
  Status restore(const data::LoaderState& st) override { return loader_.restore(st); }
  std::int64_t items_per_batch() const override { return rows_ * per_row_; }
  std::uint64_t steps_per_epoch() const override { return loader_.steps_per_epoch(); }

 protected:
  Loader loader_;
  std::vector<Slot> slots_;
  std::int64_t rows_, per_row_;
};

class LmSource final : public LoaderSource<data::LmLoader> {
 public:
  using LoaderSource::LoaderSource;
  Batch next(int slot) override {
    const data::LmBatch& b = loader_.next();
    Slot& s = slots_[slot];
    Batch out;
    out.tokens = Tensor(copy_into(s.tokens, b.inputs), DType::kI32, {rows_, per_row_});
    out.targets = Tensor(copy_into(s.targets, b.targets), DType::kI32, {rows_, per_row_});
    return out;
  }
};

class MlmSource final : public LoaderSource<data::MlmLoader> {
 public:
  using LoaderSource::LoaderSource;
  Batch next(int slot) override {
    const data::MlmBatch& b = loader_.next();
    Slot& s = slots_[slot];
    const Shape shape{rows_, per_row_};
    Batch out;
    out.tokens = Tensor(copy_into(s.tokens, b.input_ids), DType::kI32, shape);
    out.targets = Tensor(copy_into(s.targets, b.labels), DType::kI32, shape);
    out.token_types = Tensor(copy_into(s.token_types, b.token_type_ids), DType::kI32, shape);
    // The loader's mask is i32; the model takes u8.
    s.mask.resize(static_cast<std::size_t>(rows_ * per_row_));
    const std::int32_t* m = b.attention_mask.data<std::int32_t>();
    for (std::size_t i = 0; i < s.mask.size(); ++i) s.mask[i] = m[i] != 0;
    out.attention_mask = Tensor(s.mask.data(), DType::kU8, shape);
    return out;
  }
};

class ImageSource final : public LoaderSource<data::ImageLoader> {
 public:
  using LoaderSource::LoaderSource;
  Batch next(int slot) override {
    const data::ImageBatch& b = loader_.next();
    Slot& s = slots_[slot];
    Batch out;
    out.images = Tensor(copy_into(s.images, b.images), DType::kF32, b.images.shape());
    out.labels = Tensor(copy_into(s.labels, b.labels), DType::kI32, {rows_});
    return out;
  }
};

Status require_file(const std::string& path, const std::string& key, const std::string& origin) {
  if (path.empty()) return Status::error("{}: {}: no path given", origin, key);
  // The error_code forms throughout: the throwing ones end the job by std::terminate on
  // EACCES, ELOOP or ENAMETOOLONG (review, 2026-12-07).
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    if (ec)
      return Status::error("{}: {}: cannot look up '{}': {}", origin, key, path, ec.message());
    return Status::error("{}: {}: '{}' does not exist (make token shards with prepare_data, "
                         "get data with scripts/get_data.sh; see README)",
                         origin, key, path);
  }
  return Status::ok();
}

Result<std::shared_ptr<const data::TokenSource>> token_source(const TrainConfig& c, bool train,
                                                              DataInfo* info) {
  const DataConfig& d = c.data;
  if (d.source == "markov") {
    const bool mlm = c.model.arch == ModelArch::kBert;
    // BERT's [PAD], [CLS], [SEP] and [MASK] ids must not be text: a Markov 102 split
    // documents, a 103 the model was not asked about looked like [MASK], and 0 and 101 were
    // scored as targets (review, 2026-12-05). The chain runs over the other ids, in order.
    std::vector<std::uint32_t> specials;
    if (mlm) {
      for (const std::int64_t id : {d.pad_id, d.cls_id, d.sep_id, d.mask_id}) {
        if (id < static_cast<std::int64_t>(d.markov.vocab_size)) {
          specials.push_back(static_cast<std::uint32_t>(id));
        }
      }
      std::sort(specials.begin(), specials.end());
      specials.erase(std::unique(specials.begin(), specials.end()), specials.end());
    }
    data::MarkovConfig markov = d.markov;
    markov.vocab_size -= static_cast<std::uint32_t>(specials.size());
    if (markov.vocab_size < 2 || markov.branching > static_cast<int>(markov.vocab_size)) {
      return Status::error(
          "{}: data.markov.vocab_size: {} leaves {} ids besides BERT's special "
          "ones, fewer than data.markov.branching {} (or 2)",
          c.where(), d.markov.vocab_size, markov.vocab_size, markov.branching);
    }
    auto made = data::MarkovChain::create(markov);
    if (!made.is_ok()) return made.status().with_context(c.where() + ": data.markov");
    const data::MarkovChain chain = std::move(made).value();
    const auto count = static_cast<std::uint64_t>(train ? d.markov_train_tokens
                                                        : d.markov_eval_tokens);
    // Distinct streams: evaluation text is never trained on.
    auto tokens = chain.generate(count, train ? 0 : 1);
    for (std::uint32_t& t : tokens) {
      for (const std::uint32_t s : specials) t += t >= s ? 1 : 0;  // step over each hole
    }
    if (info) {
      info->description = chain.describe();
      info->identity = fmt::format("{}, {} {} tokens", info->description, count,
                                   train ? "training" : "evaluation");
      // The entropy rate bounds next-token prediction; BERT predicts masked tokens from both
      // sides, for which it is no bound and the chain's next-token score no reference (review:
      // "the model -32.6% above it"), so a masked LM reports neither.
      if (c.model.arch != ModelArch::kBert) {
        info->entropy_rate = chain.entropy_rate_nats();
        info->loss_bound = chain.row_loss_bound_nats(c.data.seq_len);
        info->source_order = d.markov.order;
        if (d.markov.order == 1) info->source = std::make_shared<const data::MarkovChain>(chain);
      }
    }
    return std::shared_ptr<const data::TokenSource>(
        std::make_shared<data::VectorTokenSource>(std::move(tokens), d.markov.vocab_size));
  }
  const std::string key = train ? "data.train" : "data.eval";
  const std::string& path = train || d.eval_path.empty() ? d.train_path : d.eval_path;
  SPARQ_RETURN_IF_ERROR(require_file(path, train ? "data.train" : "data.eval", c.where()));
  auto shard = data::ShardTokenSource::open(path);
  if (!shard.is_ok()) return shard.status().with_context(c.where() + ": " + key);
  const std::string& tokenizer = (*shard)->shard().header().tokenizer;
  // BERT's [CLS], [SEP], [MASK] and [PAD] (data.cls_id, ...) are WordPiece ids; in another
  // tokenizer's ids they are ordinary tokens, and masked positions could not be told apart.
  if (c.model.arch == ModelArch::kBert && tokenizer != "bert-uncased") {
    return Status::error(
        "{}: {}: shard '{}' was made by tokenizer '{}', but a BERT model "
        "needs a 'bert-uncased' (WordPiece) shard: prepare_data --tokenizer "
        "wordpiece",
        c.where(), key, path, tokenizer);
  }
  // After the tokenizer: a GPT-2 shard for BERT was "has vocabulary 50257 but the model only
  // 30522", which sent the user to raise vocab_size (review, 2026-12-08).
  if ((*shard)->vocab_size() > static_cast<std::uint32_t>(c.model.vocab_size)) {
    return Status::error("{}: {}: shard '{}' has vocabulary {} but the model only {}", c.where(),
                         key, path, (*shard)->vocab_size(), c.model.vocab_size);
  }
  // prepare_data starts every document with the tokenizer's separator, so a WordPiece shard's
  // first token is the [SEP] of the vocabulary it was made with. Another vocabulary's ids in
  // data.sep_id (cls_id, mask_id, pad_id are set with it) split documents at an ordinary
  // word and made [MASK] one, with no error (review, 2026-12-06).
  if (c.model.arch == ModelArch::kBert && (*shard)->size() > 0) {
    std::uint32_t first = 0;
    (*shard)->read(0, 1, &first);
    if (static_cast<std::int64_t>(first) != d.sep_id) {
      return Status::error(
          "{}: {}: shard '{}' starts with token {}, the [SEP] of the vocabulary it was made "
          "with (prepare_data starts every document with it), but data.sep_id is {}: set "
          "data.sep_id, data.cls_id, data.mask_id and data.pad_id to that vocabulary's [SEP], "
          "[CLS], [MASK] and [PAD] ids",
          c.where(), key, path, first, d.sep_id);
    }
  }
  if (!train && path != d.train_path) {
    // Scores on another tokenizer's ids would mean nothing.
    // Its header only: the training loader verifies the payload once (a second full pass
    // over a large shard at every start, on every rank, otherwise).
    auto train_shard = data::ShardReader::open(d.train_path, /*verify_payload=*/false);
    if (!train_shard.is_ok()) return train_shard.status().with_context(c.where() + ": data.train");
    const data::ShardHeader& t = train_shard->header();
    if (t.tokenizer != tokenizer || t.vocab_size != (*shard)->vocab_size()) {
      return Status::error(
          "{}: data.eval: shard '{}' (tokenizer '{}', vocabulary {}) does not "
          "match data.train '{}' (tokenizer '{}', vocabulary {})",
          c.where(), path, tokenizer, (*shard)->vocab_size(), d.train_path, t.tokenizer,
          t.vocab_size);
    }
  }
  if (info) {
    // With the payload's checksum: a shard regenerated at the same path is other data.
    info->identity = fmt::format("{} tokens, tokenizer {}, checksum {:016x}", (*shard)->size(),
                                 (*shard)->shard().header().tokenizer,
                                 (*shard)->shard().header().payload_checksum);
    info->description = fmt::format("{} ({})", path, info->identity);
    info->tokenizer = tokenizer;
  }
  return std::shared_ptr<const data::TokenSource>(std::move(shard).value());
}

}  // namespace

Status check_source_feeds_model(const TrainConfig& c) {
  // Every BERT source is the MLM loader's single segments (data/mlm_loader.h): no sentence
  // pairs and no NSP labels, which the model's forward requires with nsp (review,
  // 2026-12-07: the dry run passed and the first step aborted). A config with nsp stays
  // valid for what reads no batches (the simulator prices its head).
  if (c.model.arch == ModelArch::kBert && c.model.nsp) {
    return Status::error(
        "{}: model.nsp: 1 trains a next-sentence head, which needs sentence pairs with NSP "
        "labels; data.source '{}' gives single segments with MLM labels only: set nsp=0",
        c.where(), c.data.source);
  }
  return Status::ok();
}

Result<std::unique_ptr<BatchSource>> make_batch_source(const TrainConfig& c, bool train,
                                                       int rank, int world, int slots,
                                                       DataInfo* info) {
  SPARQ_RETURN_IF_ERROR(check_source_feeds_model(c));
  const DataConfig& d = c.data;
  const std::int64_t rows = c.train.micro_batch;
  // What a loader's error names: the config, the key and the file or generated source.
  const std::string key = train ? "data.train" : "data.eval";
  std::string split = fmt::format("{}: {} data", c.where(), train ? "training" : "evaluation");
  if (d.source == "shard" || d.source == "cifar10") {
    const std::string& path = train || d.eval_path.empty() ? d.train_path : d.eval_path;
    split = fmt::format("{}: {} '{}'", c.where(), d.source == "cifar10" ? "data.train" : key, path);
  } else if (d.source == "markov") {
    split += fmt::format(" (data.markov.{}_tokens)", train ? "train" : "eval");
  } else {
    split += fmt::format(" (data.synthetic.{}_images)", train ? "train" : "eval");
  }
  if (c.model.is_language_model()) {
    SPARQ_ASSIGN_OR_RETURN(auto source, token_source(c, train, info));
    if (info) info->unit = "tok";
    if (c.model.arch == ModelArch::kBert) {
      data::MlmLoaderConfig m;
      m.max_len = d.seq_len;
      m.mask_prob = static_cast<float>(d.mask_prob);
      m.cls_id = static_cast<std::uint32_t>(d.cls_id);
      m.sep_id = static_cast<std::uint32_t>(d.sep_id);
      m.mask_id = static_cast<std::uint32_t>(d.mask_id);
      m.pad_id = static_cast<std::uint32_t>(d.pad_id);
      m.sampler = sampler_config(c, train, rank, world);
      m.fixed_masks = !train;
      auto loader = data::MlmLoader::create(source, m);
      if (!loader.is_ok()) return loader.status().with_context(split);
      return std::unique_ptr<BatchSource>(
          std::make_unique<MlmSource>(std::move(loader).value(), slots, rows, d.seq_len));
    }
    data::LmLoaderConfig l;
    l.seq_len = d.seq_len;
    l.sampler = sampler_config(c, train, rank, world);
    auto loader = data::LmLoader::create(source, l);
    if (!loader.is_ok()) return loader.status().with_context(split);
    return std::unique_ptr<BatchSource>(
        std::make_unique<LmSource>(std::move(loader).value(), slots, rows, d.seq_len));
  }

  std::shared_ptr<data::ImageDataset> images;
  if (d.source == "cifar10") {
    SPARQ_RETURN_IF_ERROR(require_file(d.train_path, "data.train", c.where()));
    auto loaded = data::load_cifar10_dir(d.train_path, train);
    if (!loaded.is_ok()) return loaded.status().with_context(c.where() + ": data.train");
    images = std::make_shared<data::ImageDataset>(std::move(loaded).value());
    if (info) {
      // A partial download trains on what is there (load_cifar10_dir); the start-up line says
      // which batches are missing, which was easy to miss (review, 2026-12-06).
      std::vector<std::string> missing;
      for (int i = 1; train && i <= 5; ++i) {
        const std::string name = fmt::format("data_batch_{}.bin", i);
        std::error_code ec;
        if (!std::filesystem::exists(std::filesystem::path(d.train_path) / name, ec)) {
          missing.push_back(name);
        }
      }
      const std::string contents =
          fmt::format("{} images{}", images->size(),
                      missing.empty() ? std::string()
                                      : fmt::format("; {} of the 5 training batches "
                                                    "missing: {}",
                                                    missing.size(), fmt::join(missing, ", ")));
      info->description = fmt::format("CIFAR-10 {} ({})", d.train_path, contents);
      info->identity = fmt::format("CIFAR-10 ({})", contents);
    }
  } else {
    data::SyntheticImageConfig s;
    s.count = static_cast<std::size_t>(d.synthetic_train_images);
    s.num_classes = static_cast<int>(c.model.num_classes);
    s.seed = c.train.seed;
    // The evaluation images are new samples of the training classes.
    if (!train)
      s = data::synthetic_eval_config(s, static_cast<std::size_t>(d.synthetic_eval_images));
    auto made = data::make_synthetic_images(s);
    if (!made.is_ok()) return made.status().with_context(split);
    images = std::make_shared<data::ImageDataset>(std::move(made).value());
    if (info) info->description = fmt::format("synthetic images ({})", images->size());
  }
  if (info) info->unit = "img";
  data::ImageLoaderConfig ic;
  ic.augment = train && d.augment;
  ic.sampler = sampler_config(c, train, rank, world);
  auto loader = data::ImageLoader::create(images, ic);
  if (!loader.is_ok()) return loader.status().with_context(split);
  return std::unique_ptr<BatchSource>(
      std::make_unique<ImageSource>(std::move(loader).value(), slots, rows, 1));
}

}  // namespace sparq::train
