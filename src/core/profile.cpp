#include "core/profile.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <string_view>
#include <thread>

namespace sparq::profile {
namespace {

// Every thread's Scope reads both (only the owner records), so both are atomic: a plain
// g_owner written by set_enabled while another thread read it was a data race (review,
// 2026-12-06). The owner is stored before g_enabled is released, so a thread that sees the
// profile on also sees its owner.
std::atomic<bool> g_enabled{false};
std::atomic<std::thread::id> g_owner;  // the thread that enabled recording
Scope* g_current = nullptr;  // innermost open scope of the owner thread
struct Totals {
  std::int64_t ns = 0;
  std::int64_t calls = 0;
};
std::map<std::string_view, Totals>& totals() {
  static std::map<std::string_view, Totals> t;
  return t;
}

std::int64_t now_ns() {
  using namespace std::chrono;
  return duration_cast<nanoseconds>(steady_clock::now().time_since_epoch()).count();
}

}  // namespace

void set_enabled(bool on) {
  if (on) reset();  // switching off keeps the rows for rows()
  g_owner.store(std::this_thread::get_id(), std::memory_order_relaxed);
  g_enabled.store(on, std::memory_order_release);
}

bool enabled() { return g_enabled.load(std::memory_order_relaxed); }

void reset() {
  totals().clear();
  g_current = nullptr;
}

std::vector<Row> rows() {
  std::vector<Row> out;
  for (const auto& [name, t] : totals()) {
    out.push_back({std::string(name), static_cast<double>(t.ns) * 1e-9, t.calls});
  }
  std::sort(out.begin(), out.end(), [](const Row& a, const Row& b) { return a.seconds > b.seconds; });
  return out;
}

Scope::Scope(const char* name) {
  if (!g_enabled.load(std::memory_order_acquire) ||
      std::this_thread::get_id() != g_owner.load(std::memory_order_relaxed)) {
    return;
  }
  name_ = name;
  parent_ = g_current;
  g_current = this;
  start_ns_ = now_ns();
}

Scope::~Scope() {
  if (name_ == nullptr) return;
  const std::int64_t total = now_ns() - start_ns_;
  Totals& t = totals()[name_];
  t.ns += total - child_ns_;
  t.calls += 1;
  if (parent_ != nullptr) parent_->child_ns_ += total;
  g_current = parent_;
}

}  // namespace sparq::profile
