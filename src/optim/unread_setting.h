// The notes for settings that the chosen optimizer, mode or schedule never reads
// (OptimConfig::unread_settings, LrScheduleConfig::unread_settings): said, not refused, since
// a study cell that switches optim.name or optim.schedule keeps the base config's others.
#pragma once

#include <fmt/format.h>

#include <initializer_list>
#include <string>
#include <vector>

namespace sparq::optim {

struct UnreadSetting {
  const char* key;
  bool changed;        // differs from its default
  bool read;           // read by this run's choice
  const char* reader;  // "sgd reads it"
};

// "<prefix><key> is ignored: only <reader>, and this run has <run>" for each setting that
// was changed and is not read.
inline std::vector<std::string> unread_notes(std::initializer_list<UnreadSetting> settings,
                                             const std::string& prefix, const std::string& run) {
  std::vector<std::string> notes;
  for (const UnreadSetting& s : settings) {
    if (s.changed && !s.read) {
      notes.push_back(fmt::format("{}{} is ignored: only {}, and this run has {}", prefix, s.key,
                                  s.reader, run));
    }
  }
  return notes;
}

}  // namespace sparq::optim
