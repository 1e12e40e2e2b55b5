// Per-layer-kind wall-clock profile: where a training step's compute time goes
// (`bench_models --profile`). Off by default; when off a scope costs one (acquire) load.
//
// Note [Profile scopes]
// ~~~~~~~~~~~~~~~~~~~~~
// Each layer's public forward/backward entry opens SPARQ_PROFILE_SCOPE("<kind>.<phase>")
// (e.g. "linear.forward", "attention.backward"). Times are SELF times: a scope nested in
// another (a layer that calls another layer) is subtracted from its parent, so the rows of
// a profile add up to the profiled wall time without double counting. Only the thread that
// enabled the profile records (layers are called from one thread; OpenMP runs inside them),
// so the bookkeeping needs no locks. On CUDA the times are host time to enqueue, not kernel
// time, unless the caller synchronizes; bench_models profiles the CPU only.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace sparq::profile {

struct Row {
  std::string name;
  double seconds = 0;  // self time
  std::int64_t calls = 0;
};

// Starts recording on the calling thread (clearing earlier rows), or stops (keeping them).
void set_enabled(bool enabled);
bool enabled();
// The rows recorded so far, largest self time first.
std::vector<Row> rows();
void reset();

class Scope {
 public:
  explicit Scope(const char* name);
  ~Scope();
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

 private:
  const char* name_ = nullptr;  // null: not recording
  std::int64_t start_ns_ = 0;
  std::int64_t child_ns_ = 0;  // time spent in nested scopes
  Scope* parent_ = nullptr;
};

}  // namespace sparq::profile

#define SPARQ_PROFILE_CONCAT2(a, b) a##b
#define SPARQ_PROFILE_CONCAT(a, b) SPARQ_PROFILE_CONCAT2(a, b)
// Note [Profile scopes]. `name` must be a string literal (it is kept by pointer).
#define SPARQ_PROFILE_SCOPE(name) \
  ::sparq::profile::Scope SPARQ_PROFILE_CONCAT(sparq_profile_scope_, __LINE__)(name)
