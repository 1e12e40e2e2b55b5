// Note [Outputs never overwrite inputs] (output_paths.h).
#include "train/output_paths.h"

#include <filesystem>
#include <utility>
#include <vector>

#include "core/output_file.h"

namespace sparq::train {
namespace {

namespace fs = std::filesystem;

struct NamedPath {
  std::string key;  // what the user set: "log.metrics", "the config file", ...
  std::string path;
  std::string folder = {};  // the folder the key names, when the path is a file in it
};

// Whether a and b are one file: the same file system object when both exist (links, hard
// links), else the same absolute path once the links of its existing part are resolved.
bool same_file(const std::string& a_path, const std::string& b_path) {
  // Links followed first, a link to a file not written yet too: weakly_canonical stops at a
  // dangling link, and a metrics file written through one was replaced by the export (self-
  // review, 2026-12-07).
  const std::string a = resolve_links(a_path), b = resolve_links(b_path);
  std::error_code ec;
  if (fs::exists(a, ec) && fs::exists(b, ec)) return fs::equivalent(a, b, ec) && !ec;
  // Absolute first: a relative path with no existing part stays as written ("./m" and "m").
  const fs::path wa = fs::weakly_canonical(fs::absolute(a, ec), ec);
  if (ec) return false;
  const fs::path wb = fs::weakly_canonical(fs::absolute(b, ec), ec);
  return !ec && wa == wb;
}

// The files a run reads: a CIFAR-10 folder (data.train) stands for the batch files its loader
// opens, not for every file in it (a metrics file kept there refused the run's own resume:
// self-review, 2026-12-07).
std::vector<NamedPath> inputs_of(const TrainConfig& c) {
  std::vector<NamedPath> inputs;
  std::error_code ec;
  if (fs::is_regular_file(c.origin, ec)) inputs.push_back({"the config file", c.origin});
  for (const auto& [key, path] :
       {std::pair{"data.train", c.data.train_path}, std::pair{"data.eval", c.data.eval_path},
        std::pair{"train.init_from", c.train.init_from}}) {
    if (path.empty()) continue;
    if (fs::is_directory(path, ec)) {
      for (const char* name : {"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin",
                               "data_batch_4.bin", "data_batch_5.bin", "test_batch.bin"}) {
        inputs.push_back({key, (fs::path(path) / name).string(), path});
      }
    } else {
      inputs.push_back({key, path});
    }
  }
  return inputs;
}

}  // namespace

Status check_outputs_spare_inputs(const TrainConfig& c, const std::string& export_path) {
  std::vector<NamedPath> outputs;
  for (const auto& [key, path] :
       {std::pair{"log.metrics", c.log.metrics_path}, std::pair{"log.trace", c.log.trace_path},
        std::pair{"export_safetensors (--export-safetensors)", export_path}}) {
    std::error_code ec;
    // A stream is written in place and replaces nothing; a folder is refused where it is opened.
    if (path.empty() || is_special_file(path) || fs::is_directory(path, ec)) continue;
    outputs.push_back({key, path});
  }
  const std::vector<NamedPath> inputs = inputs_of(c);
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    const NamedPath& out = outputs[i];
    for (const NamedPath& in : inputs) {
      if (!same_file(out.path, in.path)) continue;
      return Status::error(
          "{} '{}' is a file the run reads ({}{}): writing it would destroy it; name another "
          "file (Note [Outputs never overwrite inputs])",
          out.key, out.path, in.key,
          in.folder.empty() ? fmt::format(" '{}'", in.path)
                            : fmt::format(" '{}': its file '{}'", in.folder, in.path));
    }
    for (std::size_t j = 0; j < i; ++j) {
      if (same_file(out.path, outputs[j].path)) {
        return Status::error(
            "{} '{}' and {} '{}' name the same file: one would overwrite the "
            "other; name two files",
            outputs[j].key, outputs[j].path, out.key, out.path);
      }
    }
  }
  return Status::ok();
}

}  // namespace sparq::train
