#include "core/fault.h"

#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include "core/check.h"

namespace sparq::fault {
namespace {

enum class Action { kExit, kKill, kStall, kFail };

struct Spec {
  std::string point;
  int rank = -1;           // -1: any
  std::int64_t step = -1;  // -1: any
  std::int64_t hit = 1;
  Action action = Action::kExit;
  std::int64_t seen = 0;   // matching calls so far
};

std::atomic<int> g_rank{0};
std::atomic<int> g_state{0};  // 0: not parsed, 1: no faults, 2: faults armed
std::mutex g_mutex;
std::vector<Spec> g_specs;

std::int64_t parse_int(const std::string& text, const std::string& spec) {
  try {
    std::size_t used = 0;
    const long long v = std::stoll(text, &used);
    if (used == text.size()) return v;
  } catch (const std::exception&) {
  }
  SPARQ_FATAL("SPARQ_FAULT: '{}' in '{}' is not an integer", text, spec);
}

Spec parse_spec(const std::string& spec) {
  Spec s;
  std::size_t begin = 0;
  bool first = true;
  while (begin <= spec.size()) {
    std::size_t end = spec.find(',', begin);
    if (end == std::string::npos) end = spec.size();
    const std::string field = spec.substr(begin, end - begin);
    begin = end + 1;
    if (first) {
      SPARQ_CHECK(!field.empty(), "SPARQ_FAULT: '{}' has no point name", spec);
      s.point = field;
      first = false;
      continue;
    }
    const std::size_t eq = field.find('=');
    SPARQ_CHECK(eq != std::string::npos, "SPARQ_FAULT: '{}' in '{}' is not key=value", field,
                spec);
    const std::string key = field.substr(0, eq), value = field.substr(eq + 1);
    if (key == "rank") {
      s.rank = static_cast<int>(parse_int(value, spec));
    } else if (key == "step") {
      s.step = parse_int(value, spec);
    } else if (key == "hit") {
      s.hit = parse_int(value, spec);
      SPARQ_CHECK(s.hit >= 1, "SPARQ_FAULT: hit must be >= 1 in '{}'", spec);
    } else if (key == "action") {
      if (value == "exit") s.action = Action::kExit;
      else if (value == "kill") s.action = Action::kKill;
      else if (value == "stall") s.action = Action::kStall;
      else if (value == "fail") s.action = Action::kFail;
      else SPARQ_FATAL("SPARQ_FAULT: unknown action '{}' in '{}' (exit, kill, stall, fail)",
                       value, spec);
    } else {
      SPARQ_FATAL("SPARQ_FAULT: unknown key '{}' in '{}' (rank, step, hit, action)", key, spec);
    }
  }
  return s;
}

void parse_environment() {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_state.load() != 0) return;
  const char* env = std::getenv("SPARQ_FAULT");
  const std::string text = env ? env : "";
  std::size_t begin = 0;
  while (begin < text.size()) {
    std::size_t end = text.find(';', begin);
    if (end == std::string::npos) end = text.size();
    if (end > begin) g_specs.push_back(parse_spec(text.substr(begin, end - begin)));
    begin = end + 1;
  }
  g_state.store(g_specs.empty() ? 1 : 2);
}

}  // namespace

void set_rank(int rank) { g_rank.store(rank, std::memory_order_relaxed); }

bool point(std::string_view name, std::int64_t step) {
  int state = g_state.load(std::memory_order_relaxed);
  if (state == 1) return false;
  if (state == 0) {
    parse_environment();
    state = g_state.load();
    if (state == 1) return false;
  }
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
