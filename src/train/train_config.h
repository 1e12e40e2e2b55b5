// TrainConfig: everything `train --config X.yaml [--set key=value ...]` reads, typed and
// validated. Sections: model, data, optim, compress, comm, train, log (docs/config.md lists
// every key with its default and meaning). Unknown keys, wrong types and out-of-range values
// are errors naming the file and the dotted key; nothing falls back silently.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "comm/bucket_plan.h"
#include "comm/emulated_link.h"
#include "compress/gradient_exchange.h"
#include "data/markov_source.h"
#include "models/config.h"
#include "optim/lr_schedule.h"
#include "optim/optimizer.h"

namespace sparq::train {

struct DataConfig {
  // markov (synthetic text with a known entropy rate), shard (token shards from
  // prepare_data: GPT-2 LM or BERT MLM), cifar10 (a directory of CIFAR-10 binaries),
  // synthetic_images (class-conditional images, no files).
  std::string source = "markov";
  std::string train_path, eval_path;  // shard files or the CIFAR-10 directory
  int seq_len = 64;                   // language models: tokens per row
  // markov
  data::MarkovConfig markov{.vocab_size = 256, .order = 2, .branching = 4, .smoothing = 0.02,
                            .seed = 7};
  std::int64_t markov_train_tokens = 1 << 20;
  std::int64_t markov_eval_tokens = 1 << 16;
  // BERT MLM (defaults: bert-base-uncased's vocab.txt)
  double mask_prob = 0.15;
  std::int64_t cls_id = 101, sep_id = 102, mask_id = 103, pad_id = 0;
  // images
  bool augment = true;
  std::int64_t synthetic_train_images = 10000, synthetic_eval_images = 2000;
};

struct CommConfig {
  std::string backend = "auto";  // auto (mpi when launched by mpirun, else self) | mpi | self
  std::string allreduce = "auto";  // MPI allreduce algorithm: auto (by size) | mpi | ring
  std::string mpi_wait = "busy";  // how MPI transfers are waited for: busy | sleep (docs/comm.md)
  comm::BucketPlanConfig plan;
  bool overlap = true;  // false: communicate after backward (the WFBP-off baseline)
  double timeout_s = 300;
  comm::EmulatedLink emulate;  // make the link behave like a slower network (experiments)
  // auto | always | never: exchange the tied embedding's head share early and its lookup share as
  // exact rows (Note [Tied embedding split], models/model.h); see resolve_tied_split().
  std::string split_tied_embedding = "auto";
  // fixed: every compressed bucket goes as the compress section says. auto: at start-up the
  // step simulator (sim/auto_plan.h, docs/simulate.md) chooses per bucket dense or compressed
  // and the aggregation strategy that minimise the predicted step, from a measured machine
  // profile (plan_profile) and its link plan_network, keeping the step's compression ratio at
  // least plan_min_compression. Planned by run_training() and train_main() (train/run.h).
  std::string plan_mode = "fixed";
  std::string plan_profile, plan_network;
  double plan_min_compression = 1.0;
};

struct LoopConfig {
  std::int64_t steps = 100;
  int micro_batch = 8;
  int accumulation = 1;
  std::int64_t eval_interval = 0;  // 0: evaluate only at the end
  int eval_batches = 8;            // per rank
  std::int64_t checkpoint_interval = 0;  // 0: only at the end (when checkpoint_dir is set)
  std::string checkpoint_dir;            // empty: no checkpoints
  // Complete checkpoints kept: the newest N (older ones and stale incomplete ones are removed
  // after each save); 0 keeps every checkpoint and removes nothing.
  std::int64_t keep_checkpoints = 3;
  std::uint64_t seed = 1;
  int max_nonfinite_in_a_row = 5;
  int threads = 0;  // OpenMP threads per rank; 0 keeps OMP_NUM_THREADS / the default
  // Initial weights from safetensors instead of the random initialisation: sparq names
  // (what --export-safetensors writes) or Hugging Face GPT-2 names (fine-tuning).
  std::string init_from;
  std::string init_format = "auto";  // auto | sparq | gpt2_hf
  // Where every rank computes: cpu, or cuda (one GPU per rank, chosen by the local rank).
  Device device = Device::kCPU;
  // GEMM-operand precision: fp32, or bf16 on cuda (Note [bf16 GEMM operands],
  // core/cuda/mixed_gemm.h); everything else stays f32.
  std::string precision = "fp32";
};

struct LogConfig {
  std::string metrics_path;  // JSONL, rank 0 (empty: none)
  int progress_interval = 1;
  bool per_rank_timing = false;  // every rank logs its own timing line
  std::string trace_path;        // Chrome trace, one file written by rank 0
  std::int64_t trace_start = 0, trace_steps = 0;
  // never_sent_share over this many compressed steps (0: off; 4 bytes per parameter).
  std::int64_t never_sent_window = 0;
};

struct TrainConfig {
  std::string origin;  // the config file
  // origin and the --set keys applied to it ("configs/x.yaml with --set a, b"): what errors
  // found after parsing name, through where(), since a value from --set is not the file's
  // (they named the file alone: review, 2026-12-07).
  std::string origin_with_overrides;
  const std::string& where() const {
    return origin_with_overrides.empty() ? origin : origin_with_overrides;
  }
  ModelConfig model;
  DataConfig data;
  optim::OptimConfig optim;
  optim::LrScheduleConfig schedule;
  double clip_norm = 0;
  // aggregate | local | auto (local when optim.communicate is momentum or update, whose
  // aggregate is not a gradient; aggregate otherwise). See data_parallel.h.
  std::string clip_scope = "auto";
  compress::GradientExchangeConfig compress;
  CommConfig comm;
  LoopConfig train;
  LogConfig log;
  std::string resolved_yaml;  // effective_yaml(): every key's value in force
};

// Settings outside optim that this run never reads, set to anything but their default: the
// BERT data keys for another model, data.augment for a token source, data.synthetic.* for a
// source other than synthetic_images, data.markov.* for another source, data.seq_len for an
// image source, train.keep_checkpoints without train.checkpoint_dir,
// train.init_format without train.init_from, log.trace_* without
// log.trace, comm.plan_* without comm.plan: auto. Noted by the dry run and the start-up log,
// not refused, as optim's are (OptimConfig::unread_settings: a study cell switching one key
// keeps the base config's others). They passed without a word (review, 2026-12-06).
std::vector<std::string> unread_settings(const TrainConfig& config);

// Whether the config clips each rank's local gradient before communication (clip_scope
// resolved).
bool clips_locally(const TrainConfig& config);

// Whether a step holds every bucket until backward ends, so that this rank's whole gradient
// is measured (and clipped) before any of it is sent (data_parallel.h): local clipping with
// optim.clip_norm > 0, and any local scope on a GPU, where the local norm is read at the end.
// On the CPU a local scope without clipping measures the norm range by range as the ranges
// become ready, and communication overlaps backward (review, 2026-12-07: the VGG configs,
// communicate: update without clipping, held every bucket only to log that norm).
bool holds_buckets_for_local_norm(const TrainConfig& config);

// Whether training splits the tied embedding (comm.split_tied_embedding resolved): it needs
// a model with a tied embedding, more than one rank, a CPU store, optim.communicate: gradient,
// aggregate clipping (the other modes transform the WHOLE local gradient before sending) and
// a compressor that keeps no optimizer state (not dgc, whose momentum the rows would bypass).
// `always` splits when all hold and is an error naming the first that does not. `auto` also
// needs the split to pay: the exact rows of a step, gathered by every rank, must cost at most
// half of the table's own exchange (Note [Tied split cost], tied_split.cpp).
// `tied_rows`: the tied table's rows (the padded vocabulary), 0 for a model without one.
Result<bool> resolve_tied_split(const TrainConfig& config, std::int64_t tied_rows,
                                int world_size);

// Every key with the value in force (file, override or default) as YAML that reads back to
// the same configuration; for --dry-run and checkpoints.
std::string effective_yaml(const TrainConfig& config);
// The settings in which two such texts differ, one "key: before -> after" per dotted key in
// key order ("(none)" for a key only one side has); empty when they agree. A resume logs
// them against the config its checkpoint was written with.
std::vector<std::string> config_differences(const std::string& before, const std::string& after);
// One setting of such a text by its dotted key ("train.micro_batch"), as flow YAML; nullopt
// when the text has no such leaf or cannot be read.
std::optional<std::string> config_setting(const std::string& yaml, const std::string& key);

// What the chosen train.device and precision cannot run yet (bf16 with vgg; on cuda: a
// compressor without a GPU twin, a strategy not built there (the tree with topk_sampled),
// comm.plan: auto), as an error naming the key to change. The trainer refuses to train such a
// config; --dry-run still validates it and prints the plan, with this message as a note.
Status check_device_support(const TrainConfig& config);

// Reads and validates a config; `overrides` are "a.b=value" strings from --set.
Result<TrainConfig> load_train_config(const std::string& path,
                                      const std::vector<std::string>& overrides);
// `keys_read`, when given, receives every key the reading asked for (YamlReader::keys_read):
// a test checks that the resolved YAML writes each of them.
Result<TrainConfig> parse_train_config(const std::string& yaml_text, const std::string& origin,
                                       const std::vector<std::string>& overrides,
                                       std::vector<std::string>* keys_read = nullptr);

}  // namespace sparq::train
