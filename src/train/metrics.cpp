#include "train/metrics.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>

namespace sparq::train {
namespace {

// JSON has no NaN or infinity: they become null. 9 significant digits print every float
// exactly, so records of two runs can be compared bit for bit.
std::string num(double v) { return std::isfinite(v) ? fmt::format("{:.9g}", v) : "null"; }

std::string num_or_null(const std::optional<double>& v) { return v ? num(*v) : "null"; }

std::string num_list_or_null(const std::vector<double>& values) {
  if (values.empty()) return "null";
  std::vector<std::string> items;
  for (double v : values) items.push_back(num(v));
  return fmt::format("[{}]", fmt::join(items, ","));
}

std::string si(double v) {
  if (v >= 1e6) return fmt::format("{:.2f}M", v / 1e6);
  if (v >= 1e3) return fmt::format("{:.1f}k", v / 1e3);
  return fmt::format("{:.1f}", v);
}

}  // namespace

std::string format_bytes(double bytes) {
  if (bytes >= 1024.0 * 1024.0) return fmt::format("{:.2f} MiB", bytes / (1024.0 * 1024.0));
  if (bytes >= 1024.0) return fmt::format("{:.1f} KiB", bytes / 1024.0);
  return fmt::format("{:.0f} B", bytes);
}

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const auto s = static_cast<std::int64_t>(seconds + 0.5);
  if (s >= 3600) return fmt::format("{}h{:02}m", s / 3600, (s / 60) % 60);
  if (s >= 60) return fmt::format("{}m{:02}s", s / 60, s % 60);
  return fmt::format("{}s", s);
}

std::string format_progress(const StepMetrics& m) {
  const StepResult& r = m.result;
  const int width = static_cast<int>(fmt::format("{}", m.total_steps).size());
  return fmt::format(
      "step {:>{}}/{} | loss {:.4f}{} | lr {:.2e} | {} {}/s | comm {:.1f} ms exposed, {:.0f}% "
      "hidden | {} sent (x{:.1f}{}) | eta {}",
      m.step(), width, m.total_steps, static_cast<double>(r.loss), r.skipped ? " (skipped)" : "",
      r.lr, si(m.items_per_s), m.unit, r.comm.exposed_ms, 100.0 * r.comm.hidden_fraction(),
      format_bytes(static_cast<double>(r.comm.bytes_sent)), m.compression_ratio(),
      m.rel_compression_error ? fmt::format(", err {:.3f}", *m.rel_compression_error) : "",
      format_duration(m.eta_s));
}

std::string format_eval(const EvalMetrics& m) {
  std::string line = fmt::format("eval at step {} | loss {:.4f}", m.step, m.loss);
  if (m.perplexity >= 0) line += fmt::format(" | perplexity {:.2f}", m.perplexity);
  if (m.accuracy >= 0) line += fmt::format(" | accuracy {:.2f}%", 100.0 * m.accuracy);
  if (m.source_loss >= 0) line += fmt::format(" | source's own loss {:.4f}", m.source_loss);
  return line + fmt::format(" | {} targets", m.count);
}

std::string to_json(const StepMetrics& m) {
  const StepResult& r = m.result;
  return fmt::format(
      "{{\"event\":\"step\",\"step\":{},\"loss\":{},\"lr\":{},\"grad_norm\":{},"
      "\"residual_norm\":{},\"skipped\":{},\"{}_per_s\":{},\"step_ms\":{},\"forward_ms\":{},"
      "\"backward_ms\":{},\"optimizer_ms\":{},\"exposed_comm_ms\":{},\"comm_busy_ms\":{},"
      "\"hidden_fraction\":{},\"bytes_sent\":{},\"bytes_received\":{},\"payload_bytes\":{},"
      "\"dense_bytes\":{},\"compression_ratio\":{},\"rel_compression_error\":{},"
      "\"bucket_rel_error\":{},\"never_sent_share\":{},\"eta_s\":{}}}",
      m.step(), num(r.loss), num(r.lr), num(r.grad_norm), num(m.residual_norm),
      r.skipped ? "true" : "false", m.unit, num(m.items_per_s), num(r.step_ms), num(r.forward_ms),
      num(r.backward_ms), num(r.optimizer_ms), num(r.comm.exposed_ms), num(r.comm.comm_busy_ms),
      num(r.comm.hidden_fraction()), r.comm.bytes_sent, r.comm.bytes_received, m.payload_bytes,
      m.dense_bytes, num(m.compression_ratio()), num_or_null(m.rel_compression_error),
      num_list_or_null(m.bucket_rel_error), num_or_null(m.never_sent_share), num(m.eta_s));
}

std::string to_json(const EvalMetrics& m) {
  return fmt::format(
      "{{\"event\":\"eval\",\"step\":{},\"loss\":{},\"perplexity\":{},\"accuracy\":{},"
      "\"count\":{},\"source_loss\":{}}}",
      m.step, num(m.loss), m.perplexity >= 0 ? num(m.perplexity) : "null",
      m.accuracy >= 0 ? num(m.accuracy) : "null", m.count,
      m.source_loss >= 0 ? num(m.source_loss) : "null");
}

JsonlWriter::~JsonlWriter() {
  if (file_) std::fclose(file_);
}

Status JsonlWriter::open(const std::string& path, bool append) {
  const std::filesystem::path p(path);
  std::error_code ec;
  if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path(), ec);
  file_ = std::fopen(path.c_str(), append ? "a" : "w");
  if (!file_) return Status::error("log.metrics: cannot open '{}': {}", path, std::strerror(errno));
  return Status::ok();
}

void JsonlWriter::write(const std::string& line) {
  if (!file_) return;
  std::fputs(line.c_str(), file_);
  std::fputc('\n', file_);
  std::fflush(file_);
}

}  // namespace sparq::train
