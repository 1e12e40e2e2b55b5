// embed_trainer: trains a tiny GPT-2 on sparq's synthetic Markov source with low-bit sparsified
// gradients, from a config built in code, and reads every step's metrics through the
// callback: a table of loss and bytes on the wire every 10 steps, and a CSV of all steps.
//
//   mpirun -np 2 ./embed_trainer [steps] [metrics.csv]      (defaults: 60, embed_metrics.csv)
#include <sparq/sparq.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

namespace {

int fail(const sparq::Status& s) {
  std::fprintf(stderr, "embed_trainer: %s\n", s.message().c_str());
  return 1;
}

// The whole argument a positive count ("12x" is refused, not read as 12).
sparq::Result<std::int64_t> parse_steps(const char* text) {
  std::int64_t value = 0;
  const char* end = text + std::strlen(text);
  const auto [stop, error] = std::from_chars(text, end, value);
  if (error != std::errc() || stop != end || value < 1) {
    return sparq::Status::error("steps: expected a positive whole number, got '{}'", text);
  }
  return value;
}

// Before training: a CSV path that cannot be written fails now, not after the run.
sparq::Status check_csv_path(const std::string& path) {
  const std::filesystem::path p(path);
  std::error_code ec;
  if (std::filesystem::is_directory(p, ec)) {
    return sparq::Status::error("{}: is a directory, not a file for the metrics", path);
  }
  const std::filesystem::path parent = p.has_parent_path() ? p.parent_path() : ".";
  if (!std::filesystem::is_directory(parent, ec)) {
    return sparq::Status::error("{}: its folder '{}' does not exist", path, parent.string());
  }
  // A folder or an existing file this process may not write passed, and the run trained to
  // fail at the end (review, 2026-12-07).
  if (::access(parent.c_str(), W_OK | X_OK) != 0) {
    return sparq::Status::error("{}: cannot create files in '{}': {}", path, parent.string(),
                                std::strerror(errno));
  }
  if (std::filesystem::exists(p, ec) && ::access(path.c_str(), W_OK) != 0) {
    return sparq::Status::error("{}: cannot be written: {}", path, std::strerror(errno));
  }
  return sparq::Status::ok();
}

struct Row {
  std::int64_t step;
  double loss, lr, grad_norm, compression;
  std::uint64_t payload_bytes;
};

// Every row, then a check of every write and of the close: a full disk left a truncated CSV
// and exit status 0 (review, 2026-12-06). A plain regular file is written under a temporary
// name and renamed over the old one once complete, keeping its permission bits, so that a
// failed write leaves an earlier CSV as it was (it was truncated first: review, 2026-12-07).
// Anything else that exists (a symbolic link such as /dev/stdout, a device, a pipe) is written
// in place, through the link: a rename would put a plain file where the link was.
sparq::Status write_csv(const std::string& path, const std::vector<Row>& rows) {
  std::error_code ec;
  const std::filesystem::file_status own = std::filesystem::symlink_status(path, ec);
  const bool in_place = std::filesystem::exists(own) && !std::filesystem::is_regular_file(own);
  const std::string written = in_place ? path : path + ".tmp";
  std::FILE* csv = std::fopen(written.c_str(), "w");
  if (!csv) return sparq::Status::error("cannot write {}: {}", written, std::strerror(errno));
  bool ok = std::fprintf(csv, "step,loss,lr,grad_norm,compression,payload_bytes\n") > 0;
  for (const Row& r : rows) {
    ok = ok && std::fprintf(csv, "%lld,%.6f,%.6e,%.6f,%.3f,%llu\n", static_cast<long long>(r.step),
                            r.loss, r.lr, r.grad_norm, r.compression,
                            static_cast<unsigned long long>(r.payload_bytes)) > 0;
  }
  const int write_errno = ok ? 0 : errno;
  const bool closed = std::fclose(csv) == 0;
  const int close_errno = errno;
  if (!ok || !closed) {
    if (!in_place) std::remove(written.c_str());
    return sparq::Status::error("cannot write {}: {}", path,
                                std::strerror(ok ? close_errno : write_errno));
  }
  if (!in_place && std::filesystem::exists(own)) {
    std::filesystem::permissions(written, own.permissions(), ec);
  }
  if (!in_place && std::rename(written.c_str(), path.c_str()) != 0) {
    const int rename_errno = errno;
    std::remove(written.c_str());
    return sparq::Status::error("cannot replace {}: {}", path, std::strerror(rename_errno));
  }
  return sparq::Status::ok();
}

}  // namespace

int main(int argc, char** argv) {
  std::int64_t steps = 60;
  if (argc > 1) {
    auto parsed = parse_steps(argv[1]);
    if (!parsed.is_ok()) return fail(parsed.status());
    steps = *parsed;
  }
  const std::string csv_path = argc > 2 ? argv[2] : "embed_metrics.csv";

  // Every field starts at its documented default (docs/config.md); edit what differs.
  auto base = sparq::train::default_train_config();
  if (!base.is_ok()) return fail(base.status());
  sparq::train::TrainConfig config = *base;
  auto model = sparq::make_model_config("gpt2-tiny", {{"vocab_size", "256"}, {"n_ctx", "64"}});
  if (!model.is_ok()) return fail(model.status());
  config.model = *model;
  config.data.source = "markov";
  config.data.seq_len = 64;
  config.data.markov.order = 1;
  config.data.markov.vocab_size = 256;
  config.schedule.kind = "cosine";
  config.schedule.lr = 3e-3;
  // Ten warm-up steps, fewer in a shorter run (the warm-up must end before the last step).
  config.schedule.warmup_steps = std::min<std::int64_t>(10, steps - 1);
  config.schedule.min_lr = 3e-4;
  config.train.steps = steps;
  config.train.micro_batch = 8;
  config.train.eval_batches = 8;
  config.log.progress_interval = 0;  // the callback prints instead
  config.compress.compress.name = "lbs";  // top-1% of gradient + residual, 4-bit values
  config.compress.compress.params = {{"density", "0.01"}, {"bits", "4"}};
  config.comm.plan.dense_patterns = {"*.bias", "*ln_*"};

  // The same checks a YAML file gets; errors name the dotted key.
  auto validated = sparq::train::validate_train_config(config);
  if (!validated.is_ok()) return fail(validated.status());
  auto comm = sparq::train::make_communicator(validated->comm, &argc, &argv);
  if (!comm.is_ok()) return fail(comm.status());
  const bool root = (*comm)->rank() == 0;
  // Rank 0 writes the CSV, so rank 0 checks its path, before training; every rank then stops
  // together (a rank that went on alone would wait for the others in the first step).
  std::int32_t refused = 0;
  if (root) {
    if (auto checked = check_csv_path(csv_path); !checked.is_ok()) refused = fail(checked);
  }
  (*comm)->allreduce(&refused, &refused, 1, sparq::DType::kI32, sparq::comm::ReduceOp::kSum);
  if (refused != 0) return 1;

  std::vector<Row> rows;
  sparq::train::RunOptions options;
  options.trainer.on_step = [&](const sparq::train::StepMetrics& m) {
    rows.push_back({m.step(), m.result.loss, m.result.lr, m.result.grad_norm,
                    m.compression_ratio(), m.payload_bytes});
    if (root && (m.step() % 10 == 0 || m.step() == 1)) {
      std::printf("step %4lld  loss %.4f  lr %.2e  sent %6llu B per rank (x%.1f)\n",
                  static_cast<long long>(m.step()), m.result.loss, m.result.lr,
                  static_cast<unsigned long long>(m.payload_bytes), m.compression_ratio());
    }
  };
  options.trainer.on_eval = [&](const sparq::train::EvalMetrics& e) {
    if (root) std::printf("eval at step %lld: loss %.4f, perplexity %.2f\n",
                          static_cast<long long>(e.step), e.loss, e.perplexity);
  };
  auto summary = sparq::train::run_training(*validated, **comm, options);
  if (!summary.is_ok()) return root ? fail(summary.status()) : 1;

  if (root) {
    if (auto written = write_csv(csv_path, rows); !written.is_ok()) return fail(written);
    std::printf("embed_trainer: %zu steps through the callback, loss %.4f -> %.4f, final eval "
                "loss %.4f (entropy rate %.4f), metrics in %s\n",
                rows.size(), rows.front().loss, rows.back().loss, summary->eval.loss,
                summary->data.entropy_rate, csv_path.c_str());
  }
  return 0;
}
