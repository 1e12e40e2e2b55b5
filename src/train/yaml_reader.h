// Strict, typed reading of a YAML config. Every key that is read is remembered, so that
// after a config has been read in full, unknown_keys() lists everything the user wrote that
// sparq does not understand (a typo must be an error, never a silently ignored setting).
// Every failure names the file and the dotted key: "configs/x.yaml: optim.lr: expected a
// number, got 'fast'".
//
// Usage:
//   SPARQ_ASSIGN_OR_RETURN(auto reader, YamlReader::from_file(path));
//   SPARQ_RETURN_IF_ERROR(reader.get("optim.lr", &config.lr, Bounds<double>{.min = 0}));
//   ... read every section ...
//   SPARQ_RETURN_IF_ERROR(reader.check_no_unknown_keys());
//
// `--set key=value` overrides are applied with set_override() before reading; the value is
// parsed as YAML (so "0.1", "true", "[a, b]" work) and the key must already be a known path
// or a new leaf under an existing section.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/status.h"

namespace sparq::train {

template <typename T>
struct Bounds {
  std::optional<T> min = std::nullopt;  // inclusive
  std::optional<T> max = std::nullopt;  // inclusive
};

// A --set argument, split and parsed: "a.b.c=value" with no empty key part and a value that
// parses as YAML. Its shape alone is checked (whether the key exists is the config's
// business): the train command refuses a malformed one as a bad argument before reading the
// config, and set_override() applies the same rule.
struct SetArgument {
  std::string key;
  std::vector<std::string> parts;
  YAML::Node value;
};
Result<SetArgument> parse_set_argument(const std::string& assignment);

class YamlReader {
 public:
  static Result<YamlReader> from_file(const std::string& path);
  static Result<YamlReader> from_string(const std::string& text, const std::string& origin);

  // Applies "a.b.c=value" (value parsed as YAML). Fails on a malformed override.
  Status set_override(const std::string& assignment);

  bool has(const std::string& key) const;
  // Present with no value ("lbs:" with every key below it commented out, or --set key=).
  bool is_empty(const std::string& key) const;
  // Reads key into *out when present (leaves the default otherwise).
  Status get(const std::string& key, double* out, Bounds<double> bounds = {});
  Status get(const std::string& key, std::int64_t* out, Bounds<std::int64_t> bounds = {});
  Status get(const std::string& key, int* out, Bounds<std::int64_t> bounds = {});
  Status get(const std::string& key, bool* out);
  Status get(const std::string& key, std::string* out);
  // A string that must be one of `choices`.
  Status get_choice(const std::string& key, std::string* out,
                    const std::vector<std::string>& choices);
  Status get(const std::string& key, std::vector<std::string>* out);
  // Marks a whole subtree as read (for sections handed to another module's parser) and
  // returns it as flat "key=value" strings relative to the section.
  Status take_section(const std::string& key, std::vector<std::pair<std::string, std::string>>* out);

  // Every leaf key present in the document that no get()/take_section() consumed.
  std::vector<std::string> unknown_keys() const;
  Status check_no_unknown_keys() const;

  // Every key get() was asked for, present in the document or not, and every section
  // take_section() took (as "a.b."): what this reading of the config understands.
  std::vector<std::string> keys_read() const { return {consumed_.begin(), consumed_.end()}; }

  const std::string& origin() const { return origin_; }
  // Where the resolved config came from, for the errors of checks that span keys (the
  // sections' cross-key checks): the file, and the --set keys applied over it ("x.yaml with
  // --set optim.lr, train.steps"). Such errors named the file alone for a value that came
  // from --set (review, 2026-12-06).
  std::string where() const;
  // The resolved document (after overrides), for --dry-run and checkpoints.
  std::string dump() const;

 private:
  YamlReader(YAML::Node root, std::string origin) : root_(std::move(root)), origin_(std::move(origin)) {}
  std::optional<YAML::Node> find(const std::string& key) const;
  Status fail(const std::string& key, const std::string& what) const;
  // The --set key that gave `key` its value (the key itself, or a section above it), or "".
  std::string overridden_by(const std::string& key) const;
  template <typename T>
  Status get_number(const std::string& key, T* out, Bounds<T> bounds, const char* kind);

  YAML::Node root_;
  std::string origin_;
  // Whether some key read lies under `key` ("optim" when optim.lr was read): a section.
  bool is_section_read(const std::string& key) const;
  std::set<std::string> consumed_;  // keys read, and prefixes of taken sections ("a.b.")
  // Keys set by set_override(), so that errors name the --set that holds a bad value rather
  // than the file (new-user review, 2026-12-06).
  std::set<std::string> overridden_;
};

}  // namespace sparq::train
