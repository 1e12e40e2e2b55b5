#include "comm/agree.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <map>

#include "comm/gather.h"

namespace sparq::comm {
namespace {

// "rank 2" or "ranks 0, 2" (ascending).
std::string rank_list(const std::vector<int>& ranks) {
  std::string s = ranks.size() == 1 ? "rank " : "ranks ";
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    if (i > 0) s += ", ";
    s += std::to_string(ranks[i]);
  }
  return s;
}

// Bounds on what ranks exchange here (allgather_bytes checks peers' sizes against them): an
// error message or a description is a few lines, a config a few KB.
constexpr std::size_t kMaxMessageBytes = std::size_t{1} << 20;
constexpr std::size_t kMaxTextBytes = std::size_t{1} << 26;

// Every rank's bytes as strings, in rank order (collective); each cut to kMaxMessageBytes.
std::vector<std::string> allgather_strings(Communicator& comm, const std::string& mine) {
  std::vector<std::uint8_t> recv;
  std::vector<std::size_t> counts, displs;
  allgather_bytes(
      comm,
      {reinterpret_cast<const std::uint8_t*>(mine.data()), std::min(mine.size(), kMaxMessageBytes)},
      std::nullopt, kMaxMessageBytes, recv, counts, displs);
  std::vector<std::string> all(counts.size());
  for (std::size_t r = 0; r < counts.size(); ++r) {
    all[r].assign(reinterpret_cast<const char*>(recv.data()) + displs[r], counts[r]);
  }
  return all;
}

// Lines of a text, without their '\n'.
std::vector<std::string_view> split_lines(std::string_view text) {
  std::vector<std::string_view> lines;
  while (!text.empty()) {
    const std::size_t end = text.find('\n');
    lines.push_back(text.substr(0, end));
    if (end == std::string_view::npos) break;
    text.remove_prefix(end + 1);
  }
  return lines;
}

// Line i of `lines` with the keys of the lines above it that enclose it (less indented):
// "optim.lr: 0.002" for "  lr: 0.002" under "optim:". Lines that are not "key: value"
// (list items, comments) keep their text under the enclosing keys.
std::string describe_yaml_line(const std::vector<std::string_view>& lines, std::size_t i) {
  if (i >= lines.size()) return "(nothing)";
  const auto indent_of = [](std::string_view l) { return l.find_first_not_of(' '); };
  std::string_view line = lines[i];
  std::size_t indent = indent_of(line);
  if (indent == std::string_view::npos) return "(an empty line)";
  std::string path(line.substr(indent));
  for (std::size_t j = i; j-- > 0 && indent > 0;) {
    const std::size_t above = indent_of(lines[j]);
    if (above == std::string_view::npos || above >= indent) continue;
    std::string_view key = lines[j].substr(above);
    const std::size_t colon = key.find(':');
    if (colon == std::string_view::npos) continue;
    path = std::string(key.substr(0, colon)) + "." + path;
    indent = above;
  }
  return path;
}

}  // namespace

int ErrorReport::failed_count() const {
  int n = 0;
  for (const auto& f : failures) n += f.has_value() ? 1 : 0;
  return n;
}

std::vector<std::string> ErrorReport::lines() const {
  // Distinct messages in order of their lowest rank, each with its ranks.
  std::vector<std::pair<std::string, std::vector<int>>> groups;
  std::map<std::string, std::size_t> index;
  for (int r = 0; r < world_size(); ++r) {
    const auto& f = failures[static_cast<std::size_t>(r)];
    if (!f) continue;
    auto [it, fresh] = index.emplace(*f, groups.size());
    if (fresh) groups.push_back({*f, {}});
    groups[it->second].second.push_back(r);
  }
  std::vector<std::string> out;
  const int n = world_size();
  for (const auto& [message, ranks] : groups) {
    if (n == 1) {
      out.push_back("error: " + message);
    } else if (static_cast<int>(ranks.size()) == n) {
      out.push_back(fmt::format("error (on all {} ranks): {}", n, message));
    } else {
      out.push_back(fmt::format("error on {} of {}: {}", rank_list(ranks), n, message));
    }
  }
  return out;
}

Status ErrorReport::status() const {
  const std::vector<std::string> all = lines();
  if (all.empty()) return Status::ok();
  std::string joined;
  for (const std::string& line : all) joined += (joined.empty() ? "" : "\n") + line;
  return Status::error("{}", joined);
}

ErrorReport gather_errors(Communicator& comm, const Status& local) {
  ErrorReport report;
  report.failures.resize(static_cast<std::size_t>(comm.size()));
  std::int32_t failed = local.is_ok() ? 0 : 1;
  comm.allreduce(&failed, &failed, 1, DType::kI32, ReduceOp::kSum);
  if (failed == 0) return report;  // the common case: one small allreduce, as before
  // A leading marker keeps a failure with an empty message apart from a success.
  const std::vector<std::string> all =
      allgather_strings(comm, local.is_ok() ? std::string() : "!" + local.message());
  for (std::size_t r = 0; r < all.size(); ++r) {
    if (!all[r].empty()) report.failures[r] = all[r].substr(1);
  }
  return report;
}

Status agree_on_errors(Communicator& comm, const Status& local) {
  const ErrorReport report = gather_errors(comm, local);
  if (report.world_size() == 1) return local;
  return report.status();
}

std::pair<std::string, std::string> first_yaml_difference(std::string_view mine,
                                                          std::string_view reference) {
  const std::vector<std::string_view> a = split_lines(mine), b = split_lines(reference);
  for (std::size_t i = 0; i < std::max(a.size(), b.size()); ++i) {
    if (i < a.size() && i < b.size() && a[i] == b[i]) continue;
    return {describe_yaml_line(a, i), describe_yaml_line(b, i)};
  }
  // Equal lines, unequal texts: they differ only in a final newline, which split_lines does
  // not keep (the message read "rank 1 has  where rank 0 has ": review, 2026-12-06).
  if (mine != reference) {
    const auto ending = [](std::string_view t) {
      return t.ends_with('\n') ? "a final newline" : "no final newline";
    };
    return {ending(mine), ending(reference)};
  }
  return {};
}

Status check_same_text(Communicator& comm, const std::string& text, std::string_view what,
                       std::string_view advice) {
  const std::size_t p = static_cast<std::size_t>(comm.size());
  if (p == 1) return Status::ok();
  // Rank 0's text itself, compared byte for byte: a 64-bit checksum64 of it was compared
  // before, and two edits in the top bytes of two 8-byte words cancel in that fold about once
  // in 256 (review: weight_decay 2.01 with cls_id 161 passed as the same config). A config is a
  // few KB, sent once at start-up.
  auto size = static_cast<std::int64_t>(text.size());
  comm.broadcast(&size, 1, DType::kI64, 0);
  // Checked on every rank, rank 0 too, so that all end together.
  const std::size_t bytes = checked_peer_size(size, kMaxTextBytes, 0, what);
  std::string reference = comm.rank() == 0 ? text : std::string(bytes, '\0');
  comm.broadcast(reference.data(), reference.size(), DType::kU8, 0);
  const std::int64_t mine_differs = text == reference ? 0 : 1;
  std::vector<std::int64_t> differs(p);
  comm.allgather(&mine_differs, differs.data(), 1, DType::kI64);
  if (std::count(differs.begin(), differs.end(), 1) == 0) return Status::ok();
  std::string description;
  if (mine_differs != 0) {
    const auto [own, theirs] = first_yaml_difference(text, reference);
    description = fmt::format("rank {} has {} where rank 0 has {}", comm.rank(), own, theirs);
  }
  std::string joined;
  for (const std::string& d : allgather_strings(comm, description)) {
    if (!d.empty()) joined += (joined.empty() ? "" : "; ") + d;
  }
  return Status::error("{} differs between ranks: {} ({})", what, joined, advice);
}

}  // namespace sparq::comm
