// Checkpoint directories (train/checkpoint.h): step directory names, the COMPLETE marker,
// the latest complete step, retention, and setting aside another history's steps.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <vector>

#include "core/check.h"
#include "core/fault.h"
#include "core/file_io.h"
#include "core/output_file.h"
#include "train/checkpoint.h"

namespace sparq::train {

std::string checkpoint_dir(const std::string& root, std::int64_t step) {
  SPARQ_CHECK(step >= 0, "checkpoint step {} is negative", step);
  return (std::filesystem::path(root) / fmt::format("step-{:08d}", step)).string();
}

std::string checkpoint_rank_file(const std::string& dir, int rank) {
  SPARQ_CHECK(rank >= 0, "rank {} is negative", rank);
  return (std::filesystem::path(dir) / fmt::format("rank-{:05d}.ckpt", rank)).string();
}

Result<std::int64_t> parse_step(const std::string& dir) {
  std::filesystem::path p(dir);
  if (!p.has_filename()) p = p.parent_path();  // "root/step-00000010/"
  const std::string name = p.filename().string();
  constexpr std::string_view kPrefix = "step-";
  std::int64_t step = -1;
  if (name.size() > kPrefix.size() && name.starts_with(kPrefix)) {
    const char* begin = name.data() + kPrefix.size();
    const char* end = name.data() + name.size();
    const auto [ptr, ec] = std::from_chars(begin, end, step);
    if (ec != std::errc() || ptr != end || *begin == '-' || *begin == '+') step = -1;
  }
  if (step < 0) {
    return Status::error("'{}' is not a checkpoint step directory (expected step-<digits>)", dir);
  }
  return step;
}

namespace {

// Removes "rank-<r>.ckpt" files with r >= world_size from `dir`.
Status remove_rank_files_from(const std::string& dir, int world_size) {
  std::error_code ec;
  std::vector<std::filesystem::path> beyond;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.size() <= 10 || !name.starts_with("rank-") || !name.ends_with(".ckpt")) continue;
    const char* digits_end = name.data() + name.size() - 5;
    int rank = -1;
    const auto [ptr, parse] = std::from_chars(name.data() + 5, digits_end, rank);
    if (parse == std::errc() && ptr == digits_end && rank >= world_size)
      beyond.push_back(it->path());
  }
  for (const auto& path : beyond) {
    if (ec) break;
    std::filesystem::remove(path, ec);
  }
  if (ec) {
    return Status::error("cannot remove the rank files beyond rank {} from '{}': {}",
                         world_size - 1, dir, ec.message());
  }
  return Status::ok();
}

}  // namespace

bool is_complete(const std::string& dir) {
  std::error_code ec;
  return std::filesystem::is_regular_file(std::filesystem::path(dir) / kCheckpointCompleteMarker,
                                          ec);
}

// Note [One save per complete directory]: a step directory can be saved more than once (a
// run resumed from an earlier step saves it again, perhaps on another world size), and each
// rank only replaces its own file. A rank file of a rank beyond the new world would survive
// the new save and, on a later resume of the old world size, be read by its rank next to the
// other ranks' new files: replicas silently diverge. So the marker names the world size of
// the save it vouches for, files beyond it are removed before it is written, and a resume
// takes the world size from the marker, never from whichever files happen to exist.
Status mark_complete(const std::string& dir, int world_size) {
  auto step = parse_step(dir);
  std::string text = step.is_ok() ? fmt::format("step {}\n", *step) : std::string("\n");
  if (world_size > 0) {
    SPARQ_RETURN_IF_ERROR(remove_rank_files_from(dir, world_size));
    text += fmt::format("world_size {}\n", world_size);
  }
  SPARQ_RETURN_IF_ERROR(sync_directory(dir));
  if (fault::point("checkpoint.complete", step.is_ok() ? *step : -1)) {
    return Status::error(
        "cannot mark '{}' complete: injected fault (SPARQ_FAULT "
        "checkpoint.complete)",
        dir);
  }
  return write_file_atomic((std::filesystem::path(dir) / kCheckpointCompleteMarker).string(), text);
}

Result<int> complete_world_size(const std::string& dir) {
  const std::string marker = (std::filesystem::path(dir) / kCheckpointCompleteMarker).string();
  SPARQ_ASSIGN_OR_RETURN(const std::string text, read_file(marker));
  constexpr std::string_view kKey = "world_size ";
  const std::size_t at = text.find(kKey);
  if (at == std::string::npos) return 0;
  const char* begin = text.data() + at + kKey.size();
  const char* end = text.data() + text.size();
  int world = 0;
  const auto [ptr, ec] = std::from_chars(begin, end, world);
  if (ec != std::errc() || world < 1 || (ptr != end && *ptr != '\n')) {
    return Status::error("{}: bad world_size line", marker);
  }
  return world;
}

Status create_directories_durably(const std::string& dir) {
  namespace fs = std::filesystem;
  fs::path target = fs::path(dir).lexically_normal();
  if (!target.has_filename()) target = target.parent_path();  // "root/step-00000010/"
  // The directories about to be made, deepest first: up to the first that exists.
  std::vector<fs::path> missing;
  std::error_code ec;
  for (fs::path p = target; !p.empty() && !fs::exists(p, ec) && !ec; p = p.parent_path()) {
    missing.push_back(p);
    if (p == p.parent_path()) break;  // "/"
  }
  fs::create_directories(dir, ec);
  if (ec) return Status::error("cannot create '{}': {}", dir, ec.message());
  // A directory's entry lives in its parent: each parent of a new directory is fsynced, or a
  // power cut could lose a new checkpoint root (and everything under it) although every file
  // in it was synced. `dir`'s own parent in any case: a save killed after making `dir` but
  // before this fsync left an entry that may not be durable yet.
  SPARQ_RETURN_IF_ERROR(sync_directory(target.parent_path().string()));
  for (std::size_t i = 1; i < missing.size(); ++i) {
    SPARQ_RETURN_IF_ERROR(sync_directory(missing[i].parent_path().string()));
  }
  return Status::ok();
}

Status clear_complete(const std::string& dir) {
  const std::string marker = (std::filesystem::path(dir) / kCheckpointCompleteMarker).string();
  if (::unlink(marker.c_str()) != 0) {
    if (errno == ENOENT) return Status::ok();
    return Status::error("cannot remove the old '{}': {}", marker, std::strerror(errno));
  }
  return sync_directory(dir);
}

namespace {

struct StepDir {
  std::int64_t step;
  std::filesystem::path dir;
  bool complete;
};

// The step directories of `root` (anything else in it is ignored), in no particular order.
Result<std::vector<StepDir>> list_step_dirs(const std::string& root) {
  std::vector<StepDir> dirs;
  std::error_code ec;
  std::filesystem::directory_iterator it(root, ec);
  for (; !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    if (!it->is_directory(ec)) continue;
    const std::string dir = it->path().string();
    auto step = parse_step(dir);
    if (step.is_ok()) dirs.push_back({*step, it->path(), is_complete(dir)});
  }
  if (ec) return Status::error("cannot list checkpoint directory '{}': {}", root, ec.message());
  return dirs;
}

}  // namespace

Result<std::string> latest_checkpoint(const std::string& root, std::int64_t below) {
  SPARQ_ASSIGN_OR_RETURN(const std::vector<StepDir> dirs, list_step_dirs(root));
  const StepDir* best = nullptr;
  for (const StepDir& d : dirs) {
    if (d.complete && d.step < below && (best == nullptr || d.step > best->step)) best = &d;
  }
  if (best == nullptr) return Status::error("no complete checkpoint in '{}'", root);
  return best->dir.string();
}

Result<std::string> resolve_checkpoint_dir(const std::string& path) {
  std::error_code ec;
  // A rank file given for its step directory was "cannot list checkpoint directory
  // '.../rank-00000.ckpt': No such file or directory" (review, 2026-12-08).
  if (!parse_step(path).is_ok() && std::filesystem::is_regular_file(path, ec)) {
    const std::string parent = std::filesystem::path(path).parent_path().string();
    return Status::error(
        "checkpoint '{}' is a file: pass the step directory that holds it ('{}') or the "
        "checkpoint root (its newest complete step)",
        path, parent.empty() ? std::string(".") : parent);
  }
  // A complete directory under another name is a step set aside by a branching run
  // ("step-00000006.superseded", set_aside_checkpoints_from): named by hand to go back to
  // that history, it resumes like any step (the step comes from the file, not the name).
  if (!parse_step(path).is_ok() && !is_complete(path)) return latest_checkpoint(path);
  if (!std::filesystem::is_directory(path, ec)) {
    // "step-100" for "step-00000100" is a typo, not an interrupted save (review).
    if (std::filesystem::exists(path, ec)) {
      return Status::error("checkpoint '{}' is not a directory", path);
    }
    // A step pruned since (train.keep_checkpoints): the newest one there is named
    // (review, 2026-12-08).
    std::string named = path;
    while (named.size() > 1 && named.back() == '/') named.pop_back();  // "step-2/"
    const std::string root = std::filesystem::path(named).parent_path().string();
    const Result<std::string> newest = latest_checkpoint(root.empty() ? "." : root);
    return Status::error("checkpoint '{}' does not exist{}", path,
                         newest.is_ok()
                             ? fmt::format(" (the newest complete step beside it: {})", *newest)
                             : std::string());
  }
  if (!is_complete(path)) {
    return Status::error(
        "checkpoint '{}' is incomplete (no {} marker): its save was "
        "interrupted; resume from an earlier step",
        path, kCheckpointCompleteMarker);
  }
  return path;
}

namespace {

// `dir` normalised for comparison ("a/./step-1/" == "a/step-1").
std::filesystem::path same_dir_key(const std::string& dir) {
  std::filesystem::path p = std::filesystem::path(dir).lexically_normal();
  return p.has_filename() ? p : p.parent_path();
}

// Removes one step directory; a complete one loses its marker (durably) first.
Status remove_step_dir(const std::string& dir, bool complete) {
  if (complete) SPARQ_RETURN_IF_ERROR(clear_complete(dir));
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  if (ec) return Status::error("cannot remove old checkpoint '{}': {}", dir, ec.message());
  return Status::ok();
}

}  // namespace

std::vector<std::string> prune_checkpoints(const std::string& root, std::int64_t keep,
                                           const std::string& just_written) {
  std::vector<std::string> warnings;
  if (keep <= 0) return warnings;
  auto listed = list_step_dirs(root);
  if (!listed.is_ok()) {
    warnings.push_back(listed.status().message() + "; old checkpoints were not removed");
    return warnings;
  }
  std::vector<StepDir> dirs = std::move(listed).value();
  std::sort(dirs.begin(), dirs.end(),
            [](const StepDir& a, const StepDir& b) { return a.step > b.step; });
  const std::filesystem::path keep_path = same_dir_key(just_written);
  std::int64_t newest_complete = -1, complete_seen = 0;
  for (const StepDir& d : dirs) {
    if (d.complete && newest_complete < 0) newest_complete = d.step;
    const bool is_new = same_dir_key(d.dir.string()) == keep_path;
    bool remove = false;
    if (d.complete)
      remove = ++complete_seen > keep && !is_new;
    else
      remove = newest_complete >= 0 && d.step < newest_complete && !is_new;
    if (!remove) continue;
    if (Status s = remove_step_dir(d.dir.string(), d.complete); !s.is_ok()) {
      warnings.push_back(s.message());
    }
  }
  return warnings;
}

bool same_directory(const std::string& a, const std::string& b) {
  std::error_code ec;
  const bool same = std::filesystem::equivalent(a, b, ec);
  return !ec && same;
}

std::vector<std::string> set_aside_checkpoints_from(const std::string& root, std::int64_t step,
                                                    const std::string& resumed_from) {
  std::vector<std::string> messages;
  std::error_code missing;
  // The first save into a new train.checkpoint_dir: nothing there yet, nothing to set aside.
  if (!std::filesystem::exists(root, missing) && !missing) return messages;
  auto listed = list_step_dirs(root);
  if (!listed.is_ok()) {
    messages.push_back(listed.status().message() + "; other histories' steps were not set aside");
    return messages;
  }
  // The steps below `step` are this run's own history only when it resumed from a step
  // directory of `root` itself. Resumed from a step set aside ("<step dir>.superseded") or
  // from another root, every complete step here is another history's: retention removed
  // them as this run's older steps (review, 2026-12-07).
  if (!resumed_from.empty()) {
    // Resolved first (a trailing '/', "/.", a link such as "root/latest" -> step-00000003):
    // the name as given is no step directory, and the run's own steps were set aside.
    std::error_code ec;
    const std::filesystem::path from = std::filesystem::canonical(resumed_from, ec);
    if (ec || !parse_step(from.string()).is_ok() ||
        !same_directory(from.parent_path().string(), root)) {
      step = 0;
    }
  }
  std::vector<std::filesystem::path> others;
  for (const StepDir& d : *listed) {
    // From `step` on, the step the run started at included (a save would overwrite another
    // history's step of its own number in place: review, 2026-12-05), unless it is the
    // directory the run came from.
    if (d.complete && d.step >= step && !same_directory(d.dir.string(), resumed_from)) {
      others.push_back(d.dir);
    }
  }
  std::sort(others.begin(), others.end());
  std::error_code ec;
  for (const std::filesystem::path& dir : others) {
    // The first free name of "<step dir>.superseded[.N]": never a step directory (parse_step).
    std::filesystem::path to = dir;
    to += ".superseded";
    for (int n = 2; std::filesystem::exists(to, ec); ++n) {
      to = dir;
      to += fmt::format(".superseded.{}", n);
    }
    std::filesystem::rename(dir, to, ec);
    if (ec) {
      messages.push_back(
          fmt::format("cannot set aside '{}' (step {} or later, from another run): "
                      "{}; a later --resume of '{}' would pick it",
                      dir.string(), step, ec.message(), root));
    } else {
      messages.push_back(
          fmt::format("'{}' is a step of another history (this run resumed "
                      "from an earlier step or from elsewhere, or started afresh, here): "
                      "moved to '{}', so that resuming '{}' and keep_checkpoints "
                      "find this run's steps",
                      dir.string(), to.string(), root));
    }
  }
  if (!others.empty()) {
    if (Status s = sync_directory(root); !s.is_ok()) messages.push_back(s.message());
  }
  return messages;
}

std::vector<std::string> set_aside_metrics(const std::string& metrics, const std::string& root) {
  std::error_code ec;
  // Standard output or a descriptor (/dev/stdout, a link to the shell's file) is the user's
  // stream, never moved; a link to a file moves the file it names, the link kept (renaming the
  // link left the next records in a new file in its place: self-reviews, 2026-12-06).
  if (metrics.empty() || is_special_file(metrics)) return {};
  const std::string file = resolve_links(metrics);
  if (!std::filesystem::is_regular_file(file, ec) || std::filesystem::file_size(file, ec) == 0 ||
      ec || !latest_checkpoint(root).is_ok()) {
    return {};
  }
  std::string to = file + ".superseded";
  for (int n = 2; std::filesystem::exists(to, ec); ++n) {
    to = fmt::format("{}.superseded.{}", file, n);
  }
  std::filesystem::rename(file, to, ec);
  if (ec) {
    return {
        fmt::format("cannot set aside '{}' (the step records of the checkpoints this fresh "
                    "start sets aside): {}; it is overwritten",
                    file, ec.message())};
  }
  return {
      fmt::format("'{}' holds the step records of the checkpoints in '{}', which this fresh "
                  "start sets aside: kept as '{}'",
                  file, root, to)};
}

}  // namespace sparq::train
