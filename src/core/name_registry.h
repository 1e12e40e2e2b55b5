// NameRegistry: the thread-safe table behind every extension registry (compressors,
// aggregation strategies, models; Note [One registration path], compress/registry.h).
// Entries are kept in registration order and looked up by their `name` member. An optional
// `builtins` function fills the table on first use, through add() like any later entry; it
// runs once, and its own add() calls do not wait for it.
#pragma once

#include <algorithm>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace sparq {

// The rule every registry's error states after its pattern.
inline constexpr std::string_view kNotNullRule = "and not 'null', which YAML reads as no value";

// [a-z][a-z0-9_]* plus the characters in `extra` after the first, and not `null`: a name is
// written unquoted in configs (effective_yaml too), where YAML reads `null` as no value, so
// such a registration could never be selected and its error listed 'null' as known (review,
// 2026-12-07). YAML's other plain words (true, off, yes) are read back as the same text.
inline bool is_registry_name(std::string_view name, std::string_view extra = "") {
  if (name.empty() || !(name[0] >= 'a' && name[0] <= 'z') || name == "null") return false;
  return std::all_of(name.begin(), name.end(), [&](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
           extra.find(c) != std::string_view::npos;
  });
}

template <typename Entry>
class NameRegistry {
 public:
  explicit NameRegistry(std::function<void()> builtins = {}) : builtins_(std::move(builtins)) {}

  // `what` names the registering function in the error ("register_compressor").
  Status add(Entry entry, std::string_view what) {
    if (!filling_) ensure_builtins();  // built-in names are taken first
    std::lock_guard lock(mutex_);
    for (const Entry& e : entries_) {
      if (e.name == entry.name) {
        return Status::error("{}: '{}' is already registered", what, entry.name);
      }
    }
    entries_.push_back(std::move(entry));
    return Status::ok();
  }

  // A copy: the table may grow meanwhile.
  std::optional<Entry> find(std::string_view name) {
    ensure_builtins();
    std::lock_guard lock(mutex_);
    for (const Entry& e : entries_) {
      if (e.name == name) return e;
    }
    return std::nullopt;
  }

  std::vector<std::string> names() {
    ensure_builtins();
    std::lock_guard lock(mutex_);
    std::vector<std::string> out;
    for (const Entry& e : entries_) out.push_back(e.name);
    return out;
  }

 private:
  void ensure_builtins() {
    std::call_once(once_, [this] {
      if (!builtins_) return;
      filling_ = true;
      builtins_();
      filling_ = false;
    });
  }

  std::function<void()> builtins_;
  std::once_flag once_;
  // True on the thread running builtins_ (inside call_once): its add() calls must not wait
  // for the call_once they run in.
  static thread_local bool filling_;
  std::mutex mutex_;
  std::vector<Entry> entries_;
};

template <typename Entry>
thread_local bool NameRegistry<Entry>::filling_ = false;

}  // namespace sparq
