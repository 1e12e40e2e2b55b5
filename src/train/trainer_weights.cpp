// The model's weights and state in and out of the trainer: train.init_from's import
// (Trainer::load_initial_weights) and Note [Model state follows rank 0]
// (Trainer::share_model_state).
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <vector>

#include "core/tensor_copy.h"
#include "train/hf_gpt2.h"
#include "train/safetensors.h"
#include "train/trainer.h"

namespace sparq::train {

Status Trainer::check_initial_weights_fit_data() const {
  // Synthetic Markov ids mean nothing to any tokenizer: the weights are only a starting point
  // there (benchmarks, tests), as from a random initialization.
  const std::string& tokenizer = data_info_.tokenizer;
  if (initial_weights_format_ != "gpt2_hf" || tokenizer.empty() || tokenizer == "gpt2" ||
      tokenizer == "markov") {
    return Status::ok();
  }
  return Status::error(
      "{}: train.init_from: '{}' holds Hugging Face GPT-2 weights, whose embedding rows are "
      "GPT-2 BPE ids, but data.train '{}' was made by tokenizer '{}': its ids would meet rows "
      "of unrelated tokens. Tokenize the text with prepare_data --tokenizer gpt2, or train "
      "from scratch (no train.init_from)",
      config_.where(), config_.train.init_from, config_.data.train_path, tokenizer);
}

Status Trainer::load_initial_weights(bool check_only) {
  const std::string& path = config_.train.init_from;
  std::string format = config_.train.init_format;
  if (format == "auto") {
    // Hugging Face GPT-2 files are recognised by their fused attention projection.
    auto read = SafetensorsFile::read_header(path);
    if (!read.is_ok()) return read.status().with_context(config_.where() + ": train.init_from");
    const SafetensorsFile& file = *read;
    const bool hf = file.find("h.0.attn.c_attn.weight") != nullptr ||
                    file.find("transformer.h.0.attn.c_attn.weight") != nullptr;
    format = hf ? "gpt2_hf" : "sparq";
  }
  initial_weights_format_ = format;
  if (check_only) {
    const Status s = format == "gpt2_hf"
                         ? import_gpt2_hf(store_, path, config_.model.vocab_size, true)
                         : import_safetensors(store_, path, {.check_only = true}, model_->state());
    return s.with_context(config_.where() + ": train.init_from");
  }
  // A GPU store is imported through its host copy (same layout), then uploaded whole.
  ParamStore* target = &store_;
  if (context().is_cuda()) {
    host_params();
    target = &host_mirror_;
  }
  // The file's vocabulary must be the model's: with fewer rows, the ids above them would
  // start from zero embeddings without a word.
  std::vector<std::string> state_absent;
  const Status s =
      format == "gpt2_hf"
          ? import_gpt2_hf(*target, path, config_.model.vocab_size)
          : import_safetensors(*target, path, {.state_absent = &state_absent}, model_->state());
  SPARQ_RETURN_IF_ERROR(s.with_context(config_.where() + ": train.init_from"));
  if (!state_absent.empty() && is_root()) {
    spdlog::warn(
        "train.init_from: {} holds none of the model's {} state tensors ({}, ...: an export from "
        "before they were exported); they start from their defaults, and evaluations before "
        "training has run them in are off",
        path, state_absent.size(), state_absent.front());
  }
  if (context().is_cuda()) {
    copy_from_host(host_mirror_.params(), store_.param_range({0, store_.flat_numel()}));
  }
  if (is_root()) spdlog::info("initial weights from {} ({} names)", path, format);
  return Status::ok();
}

// Note [Model state follows rank 0]
// BatchNorm's running statistics are updated by every rank from its own batches, so the
// replicas' statistics drift apart while their parameters stay identical (review,
// 2026-12-06: 0.019 apart after 4 steps of vgg-tiny), and an evaluation summed each rank's
// scores under its own statistics: the score of no single model. As PyTorch DDP, which
// broadcasts a module's buffers from rank 0, rank 0's statistics are the model's: they are
// broadcast before every evaluation and every checkpoint, so that what is evaluated, what
// every rank saves and what rank 0 exports is one model. Training never reads them (train
// mode normalises with the batch's statistics), and rank 0's own never change by the
// broadcast, so when it happens changes neither the parameters nor rank 0's history: an
// interrupted and resumed run evaluates and saves what the uninterrupted one does.
Status Trainer::share_model_state(const std::string& what) {
  const std::vector<StateTensor> state = model_->state();
  if (comm_.size() == 1 || state.empty()) return Status::ok();
  // A GPU model's state goes through the host (the control communicator takes host buffers),
  // copied here rather than on the engine's thread, which need not have the rank's device
  // current (self-review, 2026-12-06).
  std::vector<std::vector<char>> staging(state.size());
  for (std::size_t i = 0; i < state.size(); ++i) {
    if (state[i].tensor.device() == comm_.device()) continue;
    staging[i].resize(state[i].tensor.nbytes());
    copy_to_host(state[i].tensor, staging[i].data());
  }
  SPARQ_RETURN_IF_ERROR(
      run_control("model state broadcast (" + what + ")", [&](comm::Communicator& c) {
        for (std::size_t i = 0; i < state.size(); ++i) {
          void* buffer = staging[i].empty() ? state[i].tensor.raw() : staging[i].data();
          c.broadcast(buffer, static_cast<std::size_t>(state[i].tensor.numel()),
                      state[i].tensor.dtype(), 0);
        }
        return Status::ok();
      }));
  for (std::size_t i = 0; i < state.size(); ++i) {
    if (!staging[i].empty()) copy_from_host(staging[i].data(), state[i].tensor);
  }
  return Status::ok();
}

}  // namespace sparq::train
