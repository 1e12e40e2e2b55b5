// CompressConfig: a compressor's settings as plain key/value text, the form a YAML mapping or a
// `--set compress.density=0.01` override arrives in. ConfigReader turns it into typed values
// and reports every problem as a Status that names the offending key with its prefix
// ("compress.density: must be in (0, 1], got 1.5"), so apps/ can print one clear line.
//
// Each compressor's Options::parse() reads its keys through a ConfigReader and finishes with
// reader.finish(), which rejects any key nobody asked for (typos must not silently default).
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "core/status.h"

namespace sparq::compress {

struct CompressConfig {
  std::string name = "none";                     // a stable compressor name (registry.h)
  std::map<std::string, std::string> params;     // compressor-specific keys, e.g. density=0.01
  std::string prefix = "compress";               // how keys are named in error messages

  // compress.name: none is the switch that turns compression off: every bucket is averaged
  // dense and no compressor is built (gradient_exchange.h, and the simulator alike). A config
  // value, not a compressor property: `none` as a compressor is a dense f32 cast.
  bool compression_off() const { return name == "none"; }
};

class ConfigReader {
 public:
  ConfigReader(const std::map<std::string, std::string>& params, std::string prefix)
      : params_(params), prefix_(std::move(prefix)) {}
  // `declared`: the only keys a getter may ask for (a compressor's registered keys,
  // registry.h); an undeclared one is reported by finish() as a registration bug.
  ConfigReader(const std::map<std::string, std::string>& params, std::string prefix,
               const std::vector<std::string>& declared)
      : params_(params), prefix_(std::move(prefix)), declared_(declared.begin(), declared.end()),
        check_declared_(true) {}

  // Each getter returns `fallback` when the key is absent and an error naming the key when the
  // text does not parse or the value is outside the stated range.
  Result<double> real(const std::string& key, double fallback, double lo, double hi,
                      bool lo_open = false);
  Result<std::int64_t> integer(const std::string& key, std::int64_t fallback, std::int64_t lo,
                               std::int64_t hi);
  Result<std::int64_t> integer_in(const std::string& key, std::int64_t fallback,
                                  const std::vector<std::int64_t>& allowed);
  Result<std::string> choice(const std::string& key, const std::string& fallback,
                             const std::vector<std::string>& allowed);
  Result<bool> boolean(const std::string& key, bool fallback);

  // A key that existed once: an error naming it and what replaced it when it is given.
  Status removed(const std::string& key, const std::string& instead);
  // Rejects keys that no getter consumed (naming the declared keys, or else the ones read)
  // and getters of undeclared keys.
  Status finish() const;

  std::string full_key(const std::string& key) const { return prefix_ + "." + key; }

 private:
  const std::string* lookup(const std::string& key);
  const std::map<std::string, std::string>& params_;
  std::string prefix_;
  std::set<std::string> used_;
  std::set<std::string> declared_;
  bool check_declared_ = false;
};

}  // namespace sparq::compress
