#include "train/metrics.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "core/file_io.h"
#include "core/output_file.h"

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

// An interrupted run can leave its last record half written (killed mid-write, disk full).
// Appending after it would glue the next record onto it and spoil both lines (review,
// 2026-12-06), so the incomplete tail is cut at the last newline before appending.
Status drop_incomplete_last_line(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return Status::ok();  // new, or /dev/...
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return Status::ok();  // open() itself reports what is wrong with the file
  // Read backwards from the end to the last newline; `keep` is the length up to it.
  long end = -1;
  if (std::fseek(f, 0, SEEK_END) == 0) end = std::ftell(f);
  long keep = end;
  std::string chunk;
  for (long pos = end; pos > 0;) {
    const long start = std::max(0L, pos - 65536);
    chunk.resize(static_cast<std::size_t>(pos - start));
    if (std::fseek(f, start, SEEK_SET) != 0 ||
        std::fread(chunk.data(), 1, chunk.size(), f) != chunk.size()) {
      keep = end;  // unreadable: leave the file as it is
      break;
    }
    if (pos == end && chunk.back() == '\n') break;  // complete: nothing to drop
    const std::size_t newline = chunk.rfind('\n');
    if (newline != std::string::npos) {
      keep = start + static_cast<long>(newline) + 1;
      break;
    }
    keep = pos = start;
  }
  std::fclose(f);
  if (end <= 0 || keep == end) return Status::ok();
  std::filesystem::resize_file(path, static_cast<std::uintmax_t>(keep), ec);
  if (ec) {
    return Status::error("log.metrics: cannot drop the incomplete last record of '{}': {}", path,
                         ec.message());
  }
  spdlog::warn(
      "log.metrics: '{}' ended in an incomplete record ({} bytes, left by the interrupted "
      "run); it was dropped before appending",
      path, end - keep);
  return Status::ok();
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
      "step {:>{}}/{} | loss {}{} | lr {:.2e} | {} {}/s | comm {:.1f} ms exposed, {:.0f}% "
      "hidden | {} sent (x{:.1f}{}) | eta {}",
      m.step(), width, m.total_steps,
      // NaN: no counted target in this rank's micro-batches (Note [Token-weighted micro-batches])
      std::isnan(r.loss) ? std::string("n/a") : fmt::format("{:.4f}", static_cast<double>(r.loss)),
      r.skipped ? " (skipped)" : "", r.lr, si(m.items_per_s), m.unit, r.comm.exposed_ms,
      100.0 * r.comm.hidden_fraction(), format_bytes(static_cast<double>(r.comm.bytes_sent)),
      m.compression_ratio(),
      m.rel_compression_error ? fmt::format(", err {:.3f}", *m.rel_compression_error) : "",
      format_duration(m.eta_s));
}

std::string format_eval(const EvalMetrics& m) {
  std::string line = std::isnan(m.loss)
                         ? fmt::format("eval at step {} | loss n/a (no target scored)", m.step)
                         : fmt::format("eval at step {} | loss {:.4f}", m.step, m.loss);
  if (m.perplexity >= 0) line += fmt::format(" | perplexity {:.2f}", m.perplexity);
  if (m.accuracy >= 0) line += fmt::format(" | accuracy {:.2f}%", 100.0 * m.accuracy);
  if (m.source_loss >= 0) line += fmt::format(" | source's own loss {:.4f}", m.source_loss);
  line += fmt::format(" | {} targets", m.count);
  if (m.eval_ms >= 0) {
    line += m.eval_ms < 60e3 ? fmt::format(" in {:.1f} s", m.eval_ms / 1e3)
                             : " in " + format_duration(m.eval_ms / 1e3);
  }
  return line;
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
      "\"count\":{},\"source_loss\":{},\"eval_ms\":{}}}",
      m.step, num(m.loss), m.perplexity >= 0 ? num(m.perplexity) : "null",
      m.accuracy >= 0 ? num(m.accuracy) : "null", m.count,
      m.source_loss >= 0 ? num(m.source_loss) : "null", m.eval_ms >= 0 ? num(m.eval_ms) : "null");
}

JsonlWriter::~JsonlWriter() {
  if (fd_ >= 0) ::close(fd_);
}

Status JsonlWriter::open(const std::string& path, bool append) {
  const std::filesystem::path p(path);
  std::error_code ec;
  if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path(), ec);
  if (fd_ >= 0) ::close(fd_);  // an earlier open()'s
  // Standard output (or a descriptor, or the file stdout writes to): written through its own
  // descriptor, never truncated (core/output_file.h); -1 for a path to open here.
  fd_ = duplicate_stream_descriptor(path);
  if (fd_ < 0) {
    if (append) SPARQ_RETURN_IF_ERROR(drop_incomplete_last_line(path));
    fd_ =
        ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | (append ? O_APPEND : O_TRUNC), 0644);
    if (fd_ < 0)
      return Status::error("log.metrics: cannot open '{}': {}", path, std::strerror(errno));
  }
  path_ = path;
  lost_records_ = 0;
  fragment_left_ = false;
  return Status::ok();
}

void JsonlWriter::sync() {
  struct stat st {};
  if (fd_ >= 0 && ::fstat(fd_, &st) == 0 && S_ISREG(st.st_mode)) ::fdatasync(fd_);
}

void JsonlWriter::write(const std::string& line) {
  if (fd_ < 0) return;
  const std::string record = (fragment_left_ ? "\n" : "") + line + "\n";
  // Where the record starts: a regular file's end (O_APPEND writes there); -1 for a pipe or
  // a device, which cannot be cut back.
  const off_t start = ::lseek(fd_, 0, SEEK_END);
  int error = 0;
  const std::size_t done = write_fully(fd_, record, &error);
  if (done == record.size()) {
    fragment_left_ = false;
    return;
  }
  // Cut back only when the fragment is the file's last bytes: bytes another writer appended
  // after it (a log sharing the file) are not this record's to cut. A fragment left stays
  // marked until a record has started a line after it.
  if (done > 0) {
    struct stat st {};
    const bool last =
        start >= 0 && ::fstat(fd_, &st) == 0 && st.st_size == start + static_cast<off_t>(done);
    if (!last || ::ftruncate(fd_, start) != 0) fragment_left_ = true;
  }
  if (lost_records_++ == 0) {
    spdlog::warn(
        "log.metrics: cannot write to '{}': {}; training goes on, and the records "
        "that cannot be written are counted at the end",
        path_, std::strerror(error));
  }
}

}  // namespace sparq::train
