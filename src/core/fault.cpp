#include "core/fault.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <charconv>
#include <csignal>
#include <cstdlib>
#include <limits>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/check.h"

namespace sparq::fault {
namespace {

// Every name passed to point(), the table of docs/reliability.md ("Fault injection"), with
// what its callers pass: whether a step (the others pass -1), and whether only rank 0 ever
// reaches it. A spec that cannot match would never fire and the trial would pass without its
// fault, so it is refused: a name missing here, step= for a point without steps, rank= other
// than 0 for a rank-0 point. point() refuses a name missing here while faults are armed.
struct PointInfo {
  std::string_view name;
  bool has_step;
  bool rank0_only;  // checkpoint.complete (rank 0 marks); prepare_data is one process
  bool can_fail;    // the caller has a failure path for action=fail (else it never fires)
  std::string_view app;  // the job that reaches it (check_job)
};
constexpr std::array<PointInfo, 8> kPoints = {{
    {"checkpoint.write", true, false, true, "train"},
    {"checkpoint.rename", true, false, true, "train"},
    {"checkpoint.complete", true, true, true, "train"},
    {"gradient.nonfinite", true, false, true, "train"},
    {"exchange.compressed", true, false, false, "train"},
    {"shard.close", false, true, true, "prepare_data"},
    {"shard.rename", false, true, true, "prepare_data"},
    {"comm.collective", false, false, false, "train"},
}};

enum class Action { kExit, kKill, kStall, kFail };

struct Spec {
  std::string point;
  int rank = -1;           // -1: any
  std::int64_t step = -1;  // -1: any
  std::int64_t hit = 1;
  Action action = Action::kExit;
  std::int64_t seen = 0;   // matching calls so far
  // Its action ran. Reaching the hit is not enough: two specs that reach theirs on the same
  // call (one for any rank, one for rank 1) apply the first's action only, and the second
  // passed as fired (review, 2026-12-07).
  bool fired = false;
  std::string text;  // as given, for messages
};

std::atomic<int> g_rank{0};
std::atomic<int> g_state{0};  // 0: not parsed, 1: no faults, 2: faults armed
std::mutex g_mutex;
std::vector<Spec> g_specs;
std::string g_error;  // why SPARQ_FAULT was refused (state 1 then)
// check_environment() returned g_error: its caller reports it (train agrees on it across
// ranks through collectives that pass the comm.collective point), so point() stops there.
std::atomic<bool> g_error_returned{false};

const PointInfo* find_point(std::string_view name) {
  for (const PointInfo& p : kPoints) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

std::string point_names() {
  std::string names;
  for (const PointInfo& p : kPoints) names += (names.empty() ? "" : ", ") + std::string(p.name);
  return names;
}

// `text` as an integer in [lo, hi], or an error naming `key` and the spec. Digits after an
// optional '-' only: stoll took " 3" and "+1" (review, 2026-12-06).
Result<std::int64_t> parse_int(const std::string& key, const std::string& text,
                               const std::string& spec, std::int64_t lo, std::int64_t hi) {
  const std::string_view magnitude =
      std::string_view(text).substr(!text.empty() && text[0] == '-' ? 1 : 0);
  const bool digits =
      !magnitude.empty() &&
      std::all_of(magnitude.begin(), magnitude.end(), [](char c) { return c >= '0' && c <= '9'; });
  std::int64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (!digits || end != text.data() + text.size() ||
      (ec != std::errc() && ec != std::errc::result_out_of_range)) {
    return Status::error("SPARQ_FAULT: {}='{}' in '{}' is not an integer", key, text, spec);
  }
  if (ec == std::errc::result_out_of_range || v < lo || v > hi) {
    return Status::error("SPARQ_FAULT: {}={} in '{}' is outside [{}, {}]", key, text, spec, lo, hi);
  }
  return v;
}

Result<Spec> parse_spec(const std::string& spec) {
  Spec s;
  std::size_t begin = 0;
  bool first = true;
  std::set<std::string> seen;
  while (begin <= spec.size()) {
    std::size_t end = spec.find(',', begin);
    if (end == std::string::npos) end = spec.size();
    const std::string field = spec.substr(begin, end - begin);
    begin = end + 1;
    if (first) {
      if (field.empty()) return Status::error("SPARQ_FAULT: '{}' has no point name", spec);
      if (find_point(field) == nullptr) {
        return Status::error("SPARQ_FAULT: unknown point '{}' in '{}' (points: {})", field, spec,
                             point_names());
      }
      s.point = field;
      first = false;
      continue;
    }
    const std::size_t eq = field.find('=');
    if (eq == std::string::npos) {
      return Status::error("SPARQ_FAULT: '{}' in '{}' is not key=value", field, spec);
    }
    const std::string key = field.substr(0, eq), value = field.substr(eq + 1);
    // A key given twice was taken from its last value: "action=fail,action=exit" exited.
    if (!seen.insert(key).second) {
      return Status::error("SPARQ_FAULT: {} is given twice in '{}'", key, spec);
    }
    constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
    if (key == "rank") {
      SPARQ_ASSIGN_OR_RETURN(const std::int64_t rank,
                             parse_int(key, value, spec, 0, std::numeric_limits<int>::max()));
      s.rank = static_cast<int>(rank);
    } else if (key == "step") {
      SPARQ_ASSIGN_OR_RETURN(s.step, parse_int(key, value, spec, 0, kMax));
    } else if (key == "hit") {
      SPARQ_ASSIGN_OR_RETURN(s.hit, parse_int(key, value, spec, 1, kMax));
    } else if (key == "action") {
      if (value == "exit") s.action = Action::kExit;
      else if (value == "kill") s.action = Action::kKill;
      else if (value == "stall") s.action = Action::kStall;
      else if (value == "fail") s.action = Action::kFail;
      else
        return Status::error("SPARQ_FAULT: unknown action '{}' in '{}' (exit, kill, stall, fail)",
                             value, spec);
    } else {
      return Status::error("SPARQ_FAULT: unknown key '{}' in '{}' (rank, step, hit, action)", key,
                           spec);
    }
  }
  const PointInfo& info = *find_point(s.point);
  if (s.step >= 0 && !info.has_step) {
    return Status::error(
        "SPARQ_FAULT: step={} in '{}': {} is reached without a step, so the "
        "spec would never fire (use hit=N)",
        s.step, spec, s.point);
  }
  if (s.action == Action::kFail && !info.can_fail) {
    // The caller ignored point()'s answer: the trial ran unfaulted and passed (review,
    // 2026-12-06).
    return Status::error(
        "SPARQ_FAULT: action=fail in '{}': {} has no failure path, so the spec would never "
        "fire (exit, kill or stall)",
        spec, s.point);
  }
  if (s.rank > 0 && info.rank0_only) {
    return Status::error(
        "SPARQ_FAULT: rank={} in '{}': only rank 0 reaches {}, so the spec "
        "would never fire",
        s.rank, spec, s.point);
  }
  return s;
}

Result<std::vector<Spec>> parse_specs(std::string_view text) {
  std::vector<Spec> specs;
  std::vector<std::string_view> texts;
  std::size_t begin = 0;
  while (begin < text.size()) {
    std::size_t end = text.find(';', begin);
    if (end == std::string_view::npos) end = text.size();
    if (end > begin) {
      const std::string_view one = text.substr(begin, end - begin);
      SPARQ_ASSIGN_OR_RETURN(Spec s, parse_spec(std::string(one)));
      // Every matching spec counts a call and the first to reach its hit decides (point()):
      // a second spec of the same point, rank, step and hit is decided by the first and never
      // fires (review, 2026-12-06: taken without a word).
      for (std::size_t i = 0; i < specs.size(); ++i) {
        const Spec& e = specs[i];
        if (e.point == s.point && e.rank == s.rank && e.step == s.step && e.hit == s.hit) {
          return Status::error(
              "SPARQ_FAULT: '{}' matches the same call as '{}', which decides it, so it would "
              "never fire (give it another hit=)",
              one, texts[i]);
        }
      }
      s.text = std::string(one);
      specs.push_back(std::move(s));
      texts.push_back(one);
    }
    begin = end + 1;
  }
  // Separators alone arm nothing: a trial run with SPARQ_FAULT=';' passed without its fault.
  if (specs.empty() && !text.empty()) {
    return Status::error(
        "SPARQ_FAULT '{}' holds no spec (point[,rank=R][,step=S][,hit=N]"
        "[,action=A], separated by ';')",
        text);
  }
  return specs;
}

void parse_environment() {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_state.load() != 0) return;
  const char* env = std::getenv("SPARQ_FAULT");
  auto specs = parse_specs(env ? env : "");
  if (specs.is_ok()) {
    g_specs = std::move(specs).value();
  } else {
    g_error = specs.status().message();
  }
  g_state.store(g_specs.empty() ? 1 : 2);
}

}  // namespace

Status check_spec(std::string_view text) { return parse_specs(text).status(); }

Status check_environment() {
  if (g_state.load() == 0) parse_environment();
  std::lock_guard<std::mutex> lock(g_mutex);
  if (!g_error.empty()) {
    g_error_returned.store(true);
    return Status::error("{}", g_error);
  }
  return Status::ok();
}

Status check_job(const Job& job) {
  SPARQ_RETURN_IF_ERROR(check_environment());
  std::lock_guard<std::mutex> lock(g_mutex);
  const auto never = [](const Spec& s, std::string_view why) {
    return Status::error("SPARQ_FAULT: '{}': {}, so the spec would never fire", s.text, why);
  };
  for (const Spec& s : g_specs) {
    const PointInfo& info = *find_point(s.point);
    if (s.point == "comm.collective" && !job.mpi) {
      return never(s,
                   "only MPI calls reach comm.collective, and this job's communicator is "
                   "not MPI's");
    }
    if (info.app != job.app) {
      return never(s, fmt::format("{} never reaches {} ({} does)", job.app, s.point, info.app));
    }
    if (s.rank >= job.world_size) {
      return never(s, fmt::format("rank={}: the job has {} rank(s)", s.rank, job.world_size));
    }
    const bool checkpoint_point = s.point.starts_with("checkpoint.");
    if (checkpoint_point && !job.checkpoints) {
      return never(s, "the run writes no checkpoints (train.checkpoint_dir is not set)");
    }
    if (s.point == "exchange.compressed" && !job.compresses) {
      return never(s, "the run compresses no bucket (compress.name: none)");
    }
    // Training steps are 0..steps-1; a checkpoint is numbered by the steps done, 1..steps.
    const std::int64_t last_step = checkpoint_point ? job.steps : job.steps - 1;
    if (info.has_step && s.step >= 0 && job.steps >= 0 && s.step > last_step) {
      return never(s, fmt::format("step={}: the run's last {} is {}", s.step,
                                  checkpoint_point ? "checkpoint step" : "step index", last_step));
    }
  }
  return Status::ok();
}

Status check_all_fired(std::int64_t first_step) {
  if (g_state.load(std::memory_order_acquire) != 2) return Status::ok();
  std::lock_guard<std::mutex> lock(g_mutex);
  std::vector<std::string> unfired;
  const int rank = g_rank.load(std::memory_order_relaxed);
  for (const Spec& s : g_specs) {
    if (s.rank >= 0 && s.rank != rank) continue;
    // Training points count step indices (first_step is the first this run takes); a
    // checkpoint is numbered by the steps done, and first_step's own is not rewritten.
    const bool checkpoint_point = s.point.starts_with("checkpoint.");
    if (s.step >= 0 && (checkpoint_point ? s.step <= first_step : s.step < first_step)) continue;
    if (s.seen < s.hit) {
      unfired.push_back(fmt::format("'{}' ({} of {} matching call(s))", s.text, s.seen, s.hit));
    } else if (!s.fired) {
      unfired.push_back(fmt::format(
          "'{}' (its call {} was taken by an earlier spec's action: give it another hit= or "
          "step=)",
          s.text, s.hit));
    }
  }
  if (unfired.empty()) return Status::ok();
  return Status::error(
      "SPARQ_FAULT: {} never fired: the run did not reach it (or an earlier spec's action took "
      "its call), so the trial did not inject its "
      "fault",
      fmt::join(unfired, ", "));
}

void set_rank(int rank) { g_rank.store(rank, std::memory_order_relaxed); }

bool point(std::string_view name, std::int64_t step) {
  int state = g_state.load(std::memory_order_acquire);
  if (state == 1) {
    // A refused SPARQ_FAULT that no caller checked must not let a trial pass unfaulted; one
    // that check_environment() returned is its caller's to report, after collectives that
    // pass through here (train's start-up agreement, every rank together).
    if (g_error.empty() || g_error_returned.load()) return false;
    SPARQ_FATAL("{}", g_error);
  }
  if (state == 0) {
    parse_environment();
    return point(name, step);
  }
  SPARQ_CHECK(find_point(name) != nullptr,
              "fault point '{}' is not listed in core/fault.cpp's kPoints", name);
  Action action;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    // Every matching spec counts the call, so two specs for one point fire on their own
    // hit counts (hit=1 and hit=2: the first and second calls); the first that reaches its
    // count decides the action.
    Spec* fired = nullptr;
    for (Spec& s : g_specs) {
      if (s.point != name) continue;
      if (s.rank >= 0 && s.rank != g_rank.load(std::memory_order_relaxed)) continue;
      if (s.step >= 0 && s.step != step) continue;
      if (++s.seen == s.hit && fired == nullptr) fired = &s;
    }
    if (fired == nullptr) return false;
    fired->fired = true;
    action = fired->action;
  }
  switch (action) {
    case Action::kFail:
      return true;
    case Action::kKill:
      std::raise(SIGKILL);
      break;
    case Action::kStall:
      for (;;) pause();
    case Action::kExit:
      break;
  }
  _exit(3);
}

}  // namespace sparq::fault
