#include "bench_models_measure.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>

namespace sparq::bench {

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n == 0 ? 0 : n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

Measurement pool(const std::vector<Measurement>& rounds) {
  Measurement m;
  if (rounds.empty()) return m;
  m = rounds.front();
  m.steps.clear();
  for (const Measurement& r : rounds) {
    m.ok = m.ok && r.ok;
    m.peak_rss_mib = std::max(m.peak_rss_mib, r.peak_rss_mib);
    // A child without a STEPS line (none should be) counts its median step once.
    if (r.steps.empty()) m.steps.push_back(r.step_s);
    m.steps.insert(m.steps.end(), r.steps.begin(), r.steps.end());
  }
  if (!m.ok) return m;
  const double items = rounds.front().items_per_s * rounds.front().step_s;  // per step
  m.step_s = median_of(m.steps);
  m.best_step_s = *std::min_element(m.steps.begin(), m.steps.end());
  m.worst_step_s = *std::max_element(m.steps.begin(), m.steps.end());
  m.items_per_s = items / m.step_s;
  return m;
}

bool listed(const std::string& list, const std::string& key) {
  std::stringstream in(list);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (item == key) return true;
  }
  return false;
}

Measurement run_measured(const std::string& command) {
  Measurement m;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return m;
  // Whole lines, however long: a STEPS line of 30 PyTorch step times (repr, ~20 characters
  // each) passed a fixed 512-byte buffer, and the cut-off times, half a number included,
  // were lost or misread (review, 2026-12-06).
  char* buffer = nullptr;
  std::size_t capacity = 0;
  while (getline(&buffer, &capacity, pipe) != -1) {  // POSIX getline: grows `buffer`
    const std::string line(buffer);
    std::istringstream in(line);
    std::string tag;
    in >> tag;
    if (tag == "RESULT") {
      m.ok = static_cast<bool>(in >> m.items_per_s >> m.peak_rss_mib >> m.step_s >> m.best_step_s);
      if (m.ok && !(in >> m.flops_per_item)) m.flops_per_item = 0;  // PyTorch prints four
    } else if (tag == "STEPS") {
      for (double s = 0; in >> s;) m.steps.push_back(s);
    } else if (tag == "BLAS") {
      std::getline(in >> std::ws, m.blas);
    } else if (tag == "PROFILE") {
      profile::Row row;
      if (in >> row.name >> row.seconds >> row.calls) m.profile.push_back(row);
    } else {
      std::fputs(line.c_str(), stderr);  // the child's log (e.g. the model summary)
    }
  }
  std::free(buffer);
  // A child that printed its RESULT and then failed (exit status not 0) measured nothing
  // trustworthy (its status went unread: review, 2026-12-06).
  if (pclose(pipe) != 0) m.ok = false;
  return m;
}

}  // namespace sparq::bench
