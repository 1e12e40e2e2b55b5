// Trainer checkpoints: what one rank's file holds, and the checks that make a resume either
// bit-identical or refused (train/checkpoint.h has the file format and directory layout).
//
// Sections: "params" (flat, the store's layout), "model/<name>" (BatchNorm running
// statistics), "optim/<name>" (momentum, Adam moments), "residual" (error feedback, the
// store's layout), "exchange/<bucket>.<part>" (compressor and aggregator state).
// Metadata: step, world size, rank, model spec, layout size and since Note [Layouts in the
// checkpoint] the layout and the bucket ranges, compressor, optimizer and its step count,
// loader position (epoch, step, and since elastic resume the global item position), skip
// counters, and the resolved config. Another world size resumes through elastic_resume.h.
//
// Note [Layouts in the checkpoint]
// "params", "optim/*" and "residual" are flat arrays in the store's layout, read back as flat
// arrays: they mean the same tensors only under the same layout. ParamStore::allocate places
// the tensors that comm.dense_patterns and comm.min_compress_numel route dense last
// (BucketPlanConfig::is_dense), so changing those keeps flat_numel and moved most tensors onto
// others' values without a word. So "layout" records each tensor's "name offset numel" (one
// line each, declaration order) and any resume, elastic too, refuses another layout. The
// "exchange/bucket<b>.*" state is saved by bucket index and belongs to bucket b's flat range,
// which comm.bucket_mb and the other plan settings move without changing the layout: "buckets"
// records the ranges, a same-world resume that holds such state refuses other ones, and an
// elastic resume matches the state by these flat ranges. Checkpoints written before these keys
// existed are resumed as before (flat_numel and GradientExchange::load_state's size checks
// are all that guard them).
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>

#include "core/checksum.h"
#include "core/file_io.h"
#include "core/tensor_copy.h"
#include "train/checkpoint.h"
#include "train/checkpoint_layout.h"
#include "train/elastic_resume.h"
#include "train/trainer.h"

namespace sparq::train {
namespace {

constexpr char kFormat[] = "sparq-train-1";

// Every StateTensor becomes the section "<prefix><name>": f32 views as floats, u8 views as
// bytes. Reading restores f32 views in place (exact sizes) and hands u8 sections back as views
// of the file's bytes, for owners whose state size is not known before loading.
// Device state (a GPU run's optimizer moments, BatchNorm statistics) goes through a host copy.
void add_state(CheckpointFile& f, const std::string& prefix,
               const std::vector<StateTensor>& state) {
  std::vector<float> staging;
  for (const StateTensor& s : state) {
    if (s.tensor.dtype() == DType::kU8) {
      f.add_bytes(prefix + s.name, {static_cast<const char*>(s.tensor.raw()), s.tensor.nbytes()});
    } else {
      f.add_floats(prefix + s.name,
                   {host_floats(s.tensor, staging), static_cast<std::size_t>(s.tensor.numel())});
    }
  }
}

// `may_be_absent`: a section the file lacks leaves zeros (state_presence says why).
Status read_state(const CheckpointFile& f, const std::string& prefix,
                  const std::vector<StateTensor>& state, bool may_be_absent = false) {
  std::vector<float> staging;
  for (const StateTensor& s : state) {
    const auto n = static_cast<std::size_t>(s.tensor.numel());
    const bool absent = may_be_absent && !f.has_section(prefix + s.name);
    if (s.tensor.is_cpu() && absent) {
      std::fill_n(s.tensor.data<float>(), n, 0.0f);
    } else if (s.tensor.is_cpu()) {
      SPARQ_RETURN_IF_ERROR(f.read_floats(prefix + s.name, {s.tensor.data<float>(), n}));
    } else {
      staging.assign(n, 0.0f);
      if (!absent) SPARQ_RETURN_IF_ERROR(f.read_floats(prefix + s.name, staging));
      copy_from_host(staging.data(), s.tensor);
    }
  }
  return Status::ok();
}

std::vector<StateTensor> byte_sections(CheckpointFile& f, const std::string& prefix) {
  std::vector<StateTensor> out;
  for (auto& [name, bytes] : f.sections) {
    if (name.rfind(prefix, 0) != 0) continue;
    out.push_back({name.substr(prefix.size()),
                   Tensor(bytes.data(), DType::kU8, {static_cast<std::int64_t>(bytes.size())})});
  }
  return out;
}

}  // namespace

const ParamStore& Trainer::host_params() {
  if (!context().is_cuda()) return store_;
  copy_to_host(store_.param_range({0, store_.flat_numel()}), host_mirror_.params());
  return host_mirror_;
}

std::uint64_t Trainer::param_checksum() {
  const ParamStore& host = host_params();
  return checksum64(host.params(), static_cast<std::size_t>(host.flat_numel()) * sizeof(float));
}

Status Trainer::set_aside_other_histories() {
  if (other_histories_checked_) return Status::ok();
  // Complete steps from the one this run started at on (but the one it resumed from) belong
  // to another history (this run resumed from an earlier step, a step set aside or another
  // directory, or started afresh in a used one): set aside before this run's first save (a
  // fresh start: before its first step, with their metrics, Trainer::run), so that it
  // overwrites none of them and neither --resume nor retention takes them for this run's own.
  // Every rank waits for rank 0's renames: the others wrote their files into a step directory
  // being moved (review, 2026-12-05).
  other_histories_checked_ = true;
  if (is_root()) {
    for (const std::string& m :
         set_aside_checkpoints_from(config_.train.checkpoint_dir, start_step_, resumed_from_)) {
      spdlog::warn("train.checkpoint_dir: {}", m);
    }
  }
  return agree(Status::ok(), "setting aside other histories' steps");
}

Status Trainer::save_checkpoint() {
  const std::string& root = config_.train.checkpoint_dir;
  const std::string dir = checkpoint_dir(root, step_);
  SPARQ_RETURN_IF_ERROR(set_aside_other_histories());
  // Every rank saves rank 0's model state (Note [Model state follows rank 0]).
  SPARQ_RETURN_IF_ERROR(share_model_state("checkpoint"));
  // Every rank writes its own file; COMPLETE is written only once all of them succeeded, so
  // a save that fails or dies on any rank leaves no directory that passes for complete.
  const Status written = write_rank_checkpoint(dir);
  SPARQ_RETURN_IF_ERROR(agree(written, fmt::format("writing checkpoint {}", dir)));
  // Agreed too: a rank 0 that cannot write the marker (a full disk) must stop every rank,
  // not leave the others waiting for it in the next step's collectives.
  Status marked = Status::ok();
  // The step records up to this step are made durable before the step is: a power cut could
  // keep the fsynced checkpoint and lose the records before it, which a resume from it would
  // never write again (review, 2026-12-07).
  if (is_root()) metrics_.sync();
  if (is_root()) marked = mark_complete(dir, comm_.size());
  SPARQ_RETURN_IF_ERROR(agree(marked, fmt::format("marking checkpoint {} complete", dir)));
  saved_step_ = step_;
  if (is_root()) {
    spdlog::info("checkpoint of step {} written to {}", step_, dir);
    // Only now is there a newer complete checkpoint to fall back on.
    for (const std::string& warning :
         prune_checkpoints(root, config_.train.keep_checkpoints, dir)) {
      spdlog::warn("train.keep_checkpoints: {}", warning);
    }
  }
  return Status::ok();
}

Status Trainer::write_rank_checkpoint(const std::string& dir) {
  // The new step directory's entry, and a new root's, must survive a power cut along with the
  // files in them.
  SPARQ_RETURN_IF_ERROR(create_directories_durably(dir).with_context("train.checkpoint_dir"));
  // Re-saving a step that is complete already (a run resumed from an earlier step): the
  // marker goes before this rank's file changes, or a crash would leave it vouching for a
  // mix of old and new files.
  SPARQ_RETURN_IF_ERROR(clear_complete(dir));

  CheckpointFile f;
  f.meta["format"] = kFormat;
  f.meta["step"] = std::to_string(step_);
  f.meta["world_size"] = std::to_string(comm_.size());
  f.meta["rank"] = std::to_string(comm_.rank());
  f.meta["model"] = config_.model.spec;
  f.meta["flat_numel"] = std::to_string(store_.flat_numel());
  f.meta["layout"] = layout_text(store_);
  f.meta["buckets"] = format_bucket_ranges(bucket_ranges(*plan_));
  f.meta["compressor"] = config_.compress.compress.name;
  // Which strategy each bucket's aggregator state belongs to (resume names it on a change).
  f.meta["aggregations"] = fmt::format("{}", fmt::join(exchange_->aggregation_names(), ","));
  f.meta["optimizer"] = optimizer_->name();
  f.meta["optimizer.steps"] = std::to_string(optimizer_->steps_taken());
  f.meta["optimizer.communicate"] = config_.optim.communicate;
  f.meta["optimizer.local_state_origin"] = std::to_string(optimizer_->local_state_origin());
  for (const auto& [name, value] : optimizer_->counters()) {
    f.meta["optimizer." + name] = std::to_string(value);
  }
  const data::LoaderState loader = train_data_->state();
  f.meta["loader.seed"] = std::to_string(loader.seed);
  f.meta["loader.epoch"] = std::to_string(loader.epoch);
  f.meta["loader.step"] = std::to_string(loader.step);
  f.meta["loader.position"] = std::to_string(loader.position.value_or(0));
  // What the position counts in: a resume on other data is told (Trainer::load_checkpoint).
  f.meta["data"] = data_info_.description;
  f.meta["data.identity"] = data_info_.same_data_key();
  // Token items are rows of this many tokens: rows of another length are other items.
  if (std::string_view(data_info_.unit) == "tok") {
    f.meta["data.seq_len"] = std::to_string(config_.data.seq_len);
  }
  f.meta["skipped_total"] = std::to_string(skipped_total_);
  f.meta["nonfinite_in_a_row"] = std::to_string(nonfinite_in_a_row_);
  // Note [An evaluation a stop skipped] (trainer.cpp); absent in older checkpoints: none.
  f.meta["eval_pending"] = eval_pending_ ? "1" : "0";
  f.meta["config"] = config_.resolved_yaml;

  const ParamStore& host = host_params();
  f.add_floats("params", {host.params(), static_cast<std::size_t>(host.flat_numel())});
  add_state(f, "model/", model_->state());
  add_state(f, "optim/", optimizer_->state());
  exchange_->residual_to_host();  // a GPU store's residual lives on the device
  if (!exchange_->residual().empty()) f.add_floats("residual", exchange_->residual());
  add_state(f, "exchange/", exchange_->save_state());
  return write_checkpoint_file(checkpoint_rank_file(dir, comm_.rank()), f, step_);
}

Status Trainer::load_checkpoint(const std::string& dir, ResumeMessages& messages) {
  // The saving world's size comes from the marker (Note [One save per complete directory],
  // checkpoint_dirs.cpp), the same on every rank; a marker from before it was recorded leaves
  // it to the files: this rank's own when it has one, else rank 0's.
  SPARQ_ASSIGN_OR_RETURN(const int saved_world, complete_world_size(dir));
  std::string file = checkpoint_rank_file(dir, comm_.rank());
  std::error_code ec;
  if (saved_world > 0 ? saved_world != comm_.size() : !std::filesystem::exists(file, ec)) {
    // A file that cannot be looked up is not a missing one: rank 0's would load silently.
    if (ec) return Status::error("{}: cannot look up: {}", file, ec.message());
    file = checkpoint_rank_file(dir, 0);
  }
  SPARQ_ASSIGN_OR_RETURN(CheckpointFile f, read_checkpoint_file(file));
  if (f.meta_or("format", "") != kFormat) {
    return Status::error("{}: not a sparq training checkpoint (format '{}')", file,
                         f.meta_or("format", "missing"));
  }
  SPARQ_ASSIGN_OR_RETURN(std::int64_t world, f.meta_int("world_size"));
  if (world < 1) return Status::error("{}: metadata 'world_size' is {}", file, world);
  if (saved_world > 0 && world != saved_world) {
    return Status::error(
        "{}: written by a world of {} rank(s), but the {} marker of '{}' "
        "vouches for a save by {}: the directory mixes files of two saves",
        file, world, kCheckpointCompleteMarker, dir, saved_world);
  }
  const bool elastic = world != comm_.size();
  if (!elastic && file != checkpoint_rank_file(dir, comm_.rank())) {
    return Status::error("checkpoint '{}' of {} rank(s) has no file for rank {}", dir, world,
                         comm_.rank());
  }
  if (!elastic) SPARQ_RETURN_IF_ERROR(check_file_rank(f, file, comm_.rank()));
  // State that settings which may change on resume decide the existence of (error feedback,
  // SGD's momentum): absent, it starts from zeros; not kept here, it is dropped; both said.
  std::vector<std::string> kept;
  if (!exchange_->residual().empty()) kept.push_back("residual");
  const std::size_t optimizer_sections = optimizer_->state().size();
  for (const StateTensor& s : optimizer_->state()) kept.push_back("optim/" + s.name);
  const StatePresence presence = state_presence(f, kept);
  const bool saved_residual = f.has_section("residual");
  // An elastic resume streams all old files (elastic_resume.h); keep only this one's metadata.
  if (elastic) f.sections.clear();
  const auto must_match = [&](const std::string& key, const std::string& have,
                              const std::string& want) {
    if (have == want) return Status::ok();
    return Status::error(
        "checkpoint '{}' does not match this config: {} is '{}' there and "
        "'{}' here",
        file, key, have, want);
  };
  SPARQ_RETURN_IF_ERROR(check_model(f, config_.model.spec));
  for (const auto& [key, want] :
       {std::pair<std::string, std::string>{"flat_numel", std::to_string(store_.flat_numel())},
        {"compressor", config_.compress.compress.name},
        {"optimizer", optimizer_->name()}}) {
    SPARQ_ASSIGN_OR_RETURN(std::string have, f.meta_value(key));
    SPARQ_RETURN_IF_ERROR(must_match(key, have, want));
  }
  // Written since optim.communicate exists (older checkpoints communicated gradients): the
  // optimizer state means something else in each mode (per-rank moments in update mode).
  SPARQ_RETURN_IF_ERROR(must_match("optimizer.communicate",
                                   f.meta_or("optimizer.communicate", "gradient"),
                                   config_.optim.communicate));
  SPARQ_RETURN_IF_ERROR(check_layout(f, layout_text(store_), config_.resolved_yaml));

  const Tensor params = store_.param_range({0, store_.flat_numel()});
  std::string merged;
  if (!elastic) {
    const BucketRanges buckets = bucket_ranges(*plan_);
    const bool same_buckets =
        !f.meta.count("buckets") || f.meta.at("buckets") == format_bucket_ranges(buckets);
    SPARQ_RETURN_IF_ERROR(check_bucket_plan(f, buckets, config_.resolved_yaml));
    if (same_buckets) {
      SPARQ_RETURN_IF_ERROR(
          check_bucket_kinds(f, exchange_->aggregation_names(), config_.resolved_yaml));
    }
    SPARQ_RETURN_IF_ERROR(read_state(f, "", {{"params", params}}));
    SPARQ_RETURN_IF_ERROR(read_state(f, "model/", model_->state()));
    SPARQ_RETURN_IF_ERROR(read_state(f, "optim/", optimizer_->state(), /*may_be_absent=*/true));
    const std::span<float> residual = exchange_->residual();
    if (!residual.empty() && saved_residual) {
      SPARQ_RETURN_IF_ERROR(f.read_floats("residual", residual));
      // Note [Mass the new plan does not carry] (elastic_resume.h): a checkpoint that an
      // elastic resume wrote before that rule held such mass in buckets sent dense.
      const std::string dropped =
          drop_stranded_residual(residual, buckets, exchange_->aggregation_names());
      if (!dropped.empty()) messages.warnings.push_back("resume: " + dropped);
    } else {
      std::fill(residual.begin(), residual.end(), 0.0f);  // absent: warned below
    }
    // Under other buckets only state that holds nothing passed check_bucket_plan: loaded by
    // index, it would expect the other plan's buckets; left out, every owner starts empty,
    // which is what it saved.
    if (same_buckets) {
      // Checkpoints before 2026-12-06 have no "aggregations": their loader says less.
      SPARQ_RETURN_IF_ERROR(exchange_
                                ->load_state(byte_sections(f, "exchange/"), comm_.rank(),
                                             comm_.size(), saved_aggregations(f))
                                .with_context(file));
    }
  } else {
    SPARQ_ASSIGN_OR_RETURN(merged, load_elastic(dir, static_cast<int>(world), messages.warnings,
                                                messages.server_residual_folded));
    // The data position and the state carry over; the batch each step averages does not, and
    // nothing said so (review, 2026-12-08).
    const std::int64_t per_rank =
        std::int64_t{config_.train.micro_batch} * config_.train.accumulation;
    messages.warnings.push_back(fmt::format(
        "elastic resume from {} to {} ranks: a step now averages a global batch of {} rows "
        "(it was {} at this config's micro-batch {} x accumulation {}); optim.lr and its "
        "schedule stay as configured: scale them with --set if the steps should stay alike",
        world, comm_.size(), per_rank * comm_.size(), per_rank * world, config_.train.micro_batch,
        config_.train.accumulation));
  }
  // resume() folds a loaded server residual and installs the residual on the device: the
  // fold is a collective, so it waits until every rank has loaded.
  for (std::string& w : state_presence_warnings(presence, f, config_.resolved_yaml)) {
    messages.warnings.push_back(std::move(w));
  }
  messages.absent_residual = absent_residual_lines(presence, f, config_.resolved_yaml);
  SPARQ_RETURN_IF_ERROR(restore_data_position(f, file, elastic, world, messages.warnings));
  SPARQ_ASSIGN_OR_RETURN(std::int64_t opt_steps, f.meta_int("optimizer.steps"));
  // An optimizer none of whose state the checkpoint holds (optim.momentum 0 -> 0.9) starts
  // from zeros, and its state has taken no step: so its count starts again too, and SGD's
  // first momentum is the gradient, as in the fresh run the warning names (the count went on,
  // and with dampening 0.5 the first step was half a fresh run's; review, 2026-12-07).
  // communicate: update counts its local moments by the trainer's step from the step they
  // started at, which is this one then (Optimizer::local_state_origin).
  const auto absent_optimizer_sections = static_cast<std::size_t>(
      std::count_if(presence.absent.begin(), presence.absent.end(),
                    [](const std::string& section) { return section.starts_with("optim/"); }));
  const bool optimizer_state_absent =
      optimizer_sections > 0 && absent_optimizer_sections == optimizer_sections;
  optimizer_->set_steps_taken(optimizer_state_absent ? 0 : opt_steps);
  for (const auto& [name, value] : optimizer_->counters()) {
    // A checkpoint written before this counter existed leaves the optimizer's default.
    if (!f.meta.count("optimizer." + name)) continue;
    SPARQ_ASSIGN_OR_RETURN(std::int64_t saved, f.meta_int("optimizer." + name));
    optimizer_->set_counter(name, saved);
  }
  SPARQ_ASSIGN_OR_RETURN(step_, f.meta_int("step"));
  std::int64_t local_origin = 0;  // checkpoints before 2026-12-07 have none: 0, as they ran
  if (optimizer_state_absent) {
    local_origin = step_;
  } else if (f.meta.count("optimizer.local_state_origin")) {
    SPARQ_ASSIGN_OR_RETURN(local_origin, f.meta_int("optimizer.local_state_origin"));
    if (local_origin < 0 || local_origin > step_) {
      return Status::error("{}: optimizer.local_state_origin {} is outside [0, step {}]", file,
                           local_origin, step_);
    }
  }
  optimizer_->set_local_state_origin(local_origin);
  SPARQ_RETURN_IF_ERROR(optimizer_->check_resume(step_).with_context(file));
  SPARQ_ASSIGN_OR_RETURN(skipped_total_, f.meta_int("skipped_total"));
  SPARQ_ASSIGN_OR_RETURN(nonfinite_in_a_row_, f.meta_int("nonfinite_in_a_row"));
  eval_pending_ = false;
  if (f.meta.count("eval_pending")) {
    SPARQ_ASSIGN_OR_RETURN(const std::int64_t pending, f.meta_int("eval_pending"));
    eval_pending_ = pending != 0;
  }
  resumed_from_ = dir;
  start_step_ = step_;
  // Said by resume() once every rank has loaded alike: a resume another rank refused, or
  // whose replicas differ, was logged as resumed before its error (review, 2026-12-07).
  if (!elastic) messages.info.push_back(fmt::format("resumed from {} at step {}", dir, step_));
  if (f.meta.count("config")) {
    // Changing settings on resume is allowed (more steps, another lr); it is said, so that a
    // run's log tells what it continued with.
    const std::vector<std::string> changed =
        config_differences(f.meta.at("config"), config_.resolved_yaml);
    if (!changed.empty()) {
      messages.info.push_back(
          fmt::format("resumed with {} setting(s) other than the "
                      "checkpoint's: {}",
                      changed.size(), fmt::join(changed, "; ")));
    }
  }
  if (elastic && train_data_ != nullptr) {
    const data::LoaderState now = train_data_->state();
    messages.info.push_back(
        fmt::format("resumed {}-rank checkpoint step {} on {} rank(s) from {}: {}; data continues "
                    "at item {} of epoch {}",
                    world, step_, comm_.size(), dir, merged, now.position.value_or(0), now.epoch));
  }
  return Status::ok();
}

}  // namespace sparq::train
