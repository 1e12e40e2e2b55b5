// YAML text -> parse_train_config (the reader, every section's keys and TrainConfig
// validation). Bytes after the first NUL are `--set` overrides, one per line.
// Properties: no crash or sanitizer report; an accepted config's effective YAML reads back
// to the same effective YAML (what --dry-run prints and checkpoints store).
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_util.h"
#include "train/train_config.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const std::size_t nul = input.find('\0');
  const std::string yaml(input.substr(0, nul));
  std::vector<std::string> overrides;
  if (nul != std::string_view::npos) {
    std::string_view rest = input.substr(nul + 1);
    while (!rest.empty()) {
      const std::size_t eol = rest.find('\n');
      overrides.emplace_back(rest.substr(0, eol));
      rest = eol == std::string_view::npos ? std::string_view() : rest.substr(eol + 1);
    }
  }
  auto config = sparq::train::parse_train_config(yaml, "fuzz.yaml", overrides);
  if (!config.is_ok()) {
    if (config.status().message().empty()) sparq::fuzz::property_failed("an error without a message");
    return 0;
  }
  auto again = sparq::train::parse_train_config(config->resolved_yaml, "fuzz.yaml", {});
  if (!again.is_ok()) {
    sparq::fuzz::property_failed("the effective YAML of an accepted config is rejected: " +
                                 again.status().message() + "\n" + config->resolved_yaml);
  }
  if (again->resolved_yaml != config->resolved_yaml) {
    sparq::fuzz::property_failed("the effective YAML does not read back to itself:\n" +
                                 config->resolved_yaml + "\n--- read back as ---\n" +
                                 again->resolved_yaml);
  }
  return 0;
}
