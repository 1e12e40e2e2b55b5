// Checkpoint files and the checkpoint directory layout.
//
// A checkpoint FILE is a list of named binary sections (parameters, optimizer moments,
// error-feedback residuals, loader state, ...) plus string metadata (step, world size,
// config, ...). What goes into the sections is the trainer's business; this layer only
// guarantees that what is read back is exactly what was written, or a clear error.
//
// File format, version 1 (all integers little-endian):
//   offset size  field
//   0      8     magic "SPARQCKP"
//   8      4     format version (kCheckpointVersion)
//   12     4     section count S
//   16     4     metadata count M
//   20     4     zero (reserved)
//   24     8     total file size in bytes (the file ends exactly there)
//   32     8     data offset D: where the first section begins (multiple of 64)
//   40     ...   section table, S entries: u32 name length, name bytes, u64 offset (from the
//                start of the file, multiple of 64), u64 size, u64 checksum64 of the bytes
//                then M metadata entries: u32 key length, key, u32 value length, value
//                (sorted by key), then zero padding up to D
//   D      ...   the sections' bytes, in table order, each starting on a 64-byte boundary
//                (zero padding between them), so float sections can be mapped in place
//   end-8  8     checksum64 (core/checksum.h) of every byte before it
//
// Writing is atomic and durable (core/file_io.h): readers, crashes and power cuts see the old
// file or the new one; a full disk is an error naming the file and leaves the old one intact.
// Reading verifies magic, version, exact size, every section's checksum and the whole-file
// checksum; every error names the file.
//
// Directory layout for the trainer (one file per rank, one directory per saved step):
//   <root>/step-00001000/rank-00000.ckpt
//   <root>/step-00001000/rank-00001.ckpt
//   <root>/step-00001000/COMPLETE        written last, by rank 0, after every rank's file
// A step directory without COMPLETE is an interrupted save and is never resumed from. Before a
// rank (re)writes its file it removes a COMPLETE left by an earlier save of the same step, so
// a re-save killed part-way cannot pass for complete with a mix of old and new files.
// Fault points (core/fault.h, docs/reliability.md): "checkpoint.write" before each 1 MiB chunk
// of a file, "checkpoint.rename" before a file's rename, "checkpoint.complete" before the
// marker; all report the checkpoint's step.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"

namespace sparq::train {

inline constexpr char kCheckpointMagic[8] = {'S', 'P', 'A', 'R', 'Q', 'C', 'K', 'P'};
inline constexpr std::uint32_t kCheckpointVersion = 1;
inline constexpr char kCheckpointCompleteMarker[] = "COMPLETE";

// The in-memory image of one checkpoint file. Owns copies of all bytes (the whole file is
// held in memory while writing and reading).
struct CheckpointFile {
  std::map<std::string, std::string> meta;
  // Unique names, in file order. Prefer the helpers below to pushing directly.
  std::vector<std::pair<std::string, std::string>> sections;
  // Set by read_checkpoint_file(); only used to name the file in error messages.
  std::string path;

  // Appends a section; a duplicate name is a programming error (fatal).
  void add_bytes(std::string name, std::string_view bytes);
  void add_floats(std::string name, std::span<const float> values);  // raw little-endian f32

  bool has_section(std::string_view name) const;
  // The section's bytes, valid while this object lives and is not modified. Error names the
  // section and the file.
  Result<std::string_view> section(std::string_view name) const;
  // Copies a float section into `out`, whose size must match exactly; errors name the
  // section, the expected and the actual element counts, and the file.
  Status read_floats(std::string_view name, std::span<float> out) const;
  // A metadata value; error when absent (names the key and the file).
  Result<std::string> meta_value(const std::string& key) const;
  // The value, or `fallback` when absent.
  std::string meta_or(const std::string& key, const std::string& fallback) const;
  // A decimal integer value, the whole text; error when absent or not one (names the file).
  Result<std::int64_t> meta_int(const std::string& key) const;
};

// Writes `file` (its `path` member is ignored) to `path` atomically, in chunks of
// kCheckpointWriteChunk bytes; `step` is what the fault points report (-1: none).
inline constexpr std::size_t kCheckpointWriteChunk = std::size_t{1} << 20;
Status write_checkpoint_file(const std::string& path, const CheckpointFile& file,
                             std::int64_t step = -1);
// Reads and fully verifies a checkpoint file; errors say "not a sparq checkpoint",
// "truncated: N bytes, header says M", "corrupt: checksum mismatch in section X", ...
Result<CheckpointFile> read_checkpoint_file(const std::string& path);

// The training checkpoint's rank file `path` must say it was written by `rank` (its "rank"
// metadata): files renamed or copied across ranks loaded another rank's residual and optimizer
// state without a word (review, 2026-12-07). A file without the key passes.
Status check_file_rank(const CheckpointFile& file, const std::string& path, int rank);

// "<root>/step-<step, 8 digits>" (step >= 0; more digits when step >= 10^8).
std::string checkpoint_dir(const std::string& root, std::int64_t step);
// "<dir>/rank-<rank, 5 digits>.ckpt".
std::string checkpoint_rank_file(const std::string& dir, int rank);
// The step of a "step-<digits>" directory (the last path component; a trailing '/' is
// allowed); an error for any other name.
Result<std::int64_t> parse_step(const std::string& dir);
// Whether `dir` holds the COMPLETE marker.
bool is_complete(const std::string& dir);
// Writes the COMPLETE marker into `dir` (atomically), after fsyncing `dir` so that every
// rank file's entry is durable before the marker that vouches for it. Call it only after
// every rank's file of that step has been written (for example after a barrier).
// world_size > 0: the marker records it ("world_size W"), and rank files of ranks >= W (left
// by an earlier save of this step by a bigger world) are removed first, so the marker vouches
// for exactly the files of one save (Note [One save per complete directory]).
Status mark_complete(const std::string& dir, int world_size = 0);
// The world size a COMPLETE marker records; 0 when it records none (markers written before
// it did). An error when the marker is missing or unreadable.
Result<int> complete_world_size(const std::string& dir);
// Creates `dir` and its missing parents (std::filesystem::create_directories) and fsyncs the
// parent of every directory it made, and `dir`'s parent in any case, so that the new entries
// survive a power cut along with the files later synced into them. The error names `dir`.
Status create_directories_durably(const std::string& dir);
// Removes a COMPLETE marker from `dir` (none is fine) and makes the removal durable. Every
// rank calls it before writing its file into a step directory that may be complete already.
Status clear_complete(const std::string& dir);
// Retention (train.keep_checkpoints): keeps the `keep` newest complete step directories of
// `root` and `just_written`, removes every other complete one and every incomplete one older
// than the newest complete one; newer incomplete ones and foreign entries are left alone.
// keep = 0 removes nothing. A complete directory loses its marker first, so one whose removal
// is interrupted is never taken for complete. Returns one message per failed removal
// (warnings for the caller to log; a failed cleanup must not fail the save).
std::vector<std::string> prune_checkpoints(const std::string& root, std::int64_t keep,
                                           const std::string& just_written);
// The complete step directory of `root` with the highest step (below `below`, when given:
// the step before a damaged one). An error when `root` cannot be read or holds no such
// checkpoint (the message says which, and names `root`).
Result<std::string> latest_checkpoint(
    const std::string& root, std::int64_t below = std::numeric_limits<std::int64_t>::max());
// What --resume PATH names: a step directory itself (an error when it does not exist or is
// incomplete), a complete directory under another name (a step set aside as
// "<step dir>.superseded"), or a checkpoint root's latest_checkpoint().
Result<std::string> resolve_checkpoint_dir(const std::string& path);
// Whether `a` and `b` name one existing directory (false when either does not exist).
bool same_directory(const std::string& a, const std::string& b);
// Renames every complete step directory of `root` at or after `step` to "<name>.superseded"
// (".superseded.2", ... when taken), except `resumed_from`, and every one below `step` too
// when `resumed_from` is not a step directory of `root` (a step set aside, another root);
// incomplete ones are left to prune_checkpoints() or to be rewritten. A run calls it before its
// first save with the step it started at (resumed from, or 0): every complete step from there on,
// but the directory it resumed from, is another history's (it resumed from an earlier step, a step
// set aside or another directory, or started afresh in a used `root`), which the run's saves would
// otherwise overwrite in place, latest_checkpoint() resume, and prune_checkpoints() count as
// this run's steps and remove. Nothing is deleted. Returns one message per directory moved
// or not (for the caller to log); none when `root` does not exist yet.
std::vector<std::string> set_aside_checkpoints_from(const std::string& root, std::int64_t step,
                                                    const std::string& resumed_from = "");
// A fresh start whose `root` holds complete steps sets them aside (above); their step records
// in the metrics file `metrics` are set aside with them, to "<metrics>.superseded" (".2", ...
// when taken), instead of being truncated away (review, 2026-12-06). Nothing happens when
// `root` holds no complete step or `metrics` is missing, empty, a symbolic link or not a
// regular file. Returns
// a message saying what was moved, or why not (for the caller to log); none when nothing was
// to move.
std::vector<std::string> set_aside_metrics(const std::string& metrics, const std::string& root);

}  // namespace sparq::train
