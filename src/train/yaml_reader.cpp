#include "train/yaml_reader.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <optional>
#include <set>
#include <sstream>

#include "core/bool_words.h"
#include "core/file_io.h"
#include "train/key_suggestion.h"
#include "train/yaml_document.h"

namespace sparq::train {
namespace {

// Every part, empty ones included ("a..b", "a.", ".a"), for the callers to refuse:
// std::getline dropped a trailing empty part, so "train.steps.=7" set train.steps (review).
std::vector<std::string> split_key(const std::string& key) {
  std::vector<std::string> parts;
  std::size_t begin = 0;
  for (;;) {
    const std::size_t dot = key.find('.', begin);
    parts.push_back(key.substr(begin, dot == std::string::npos ? std::string::npos : dot - begin));
    if (dot == std::string::npos) return parts;
    begin = dot + 1;
  }
}

// What a value error quotes: the value's text, or "no value" for an empty one ("steps:" or
// --set train.steps=), which yaml-cpp reads as null and writes as '~'.
std::string quoted_value(const YAML::Node& n) {
  if (n.IsNull()) return "no value";
  return fmt::format("'{}'", scalar_text(n));
}

void collect_leaves(const YAML::Node& node, const std::string& prefix, std::vector<std::string>* out) {
  if (node.IsMap()) {
    for (const auto& kv : node) {
      // A complex key ("? [a, b]: 1") has no string form: as<std::string>() would throw
      // (fuzzing); its flow text still names it in the unknown-key error.
      const std::string k = scalar_text(kv.first);
      collect_leaves(kv.second, prefix.empty() ? k : prefix + "." + k, out);
    }
  } else {
    out->push_back(prefix);
  }
}

// A decimal integer, as YAML 1.2's core schema reads one: optional sign, digits, leading
// zeros allowed ("0100" is 100). yaml-cpp's own conversion guesses the base, so "0100" was 64
// and "08" an error (review, 2026-12-05); hex, octal and exponents are refused.
// An integer key's text: a decimal integer that fits int64 (kOutOfRange: one that does not).
struct Decimal {
  enum { kOk, kNotAnInteger, kOutOfRange } kind = kNotAnInteger;
  std::int64_t value = 0;
};
Decimal parse_decimal(const std::string& text) {
  const char* first = text.data();
  const char* last = text.data() + text.size();
  if (first != last && *first == '+') {
    ++first;
    if (first != last && *first == '-') return {};
  }
  Decimal d;
  const auto [end, error] = std::from_chars(first, last, d.value);
  if (end != last) return {};
  if (error == std::errc::result_out_of_range) d.kind = Decimal::kOutOfRange;
  if (error == std::errc()) d.kind = Decimal::kOk;
  return d;
}

}  // namespace

Result<YamlReader> YamlReader::from_file(const std::string& path) {
  // read_file, not YAML::LoadFile: a directory or an unreadable file is a Status, never an
  // exception out of the reader.
  auto text = read_file(path);
  if (!text.is_ok()) {
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) {
      return Status::error("{}: cannot open config file", path);
    }
    return Status::error("{}: cannot open config file: {}", path, text.status().message());
  }
  // A file with no document (empty, or only comments) trained the defaults without a word: a
  // config cut to 0 bytes by a full disk ran another job (review, 2026-12-07). Defaults on
  // purpose are one line: `train: {}`.
  SPARQ_ASSIGN_OR_RETURN(const YAML::Node parsed, load_one_document_with_marks(*text, path));
  if (parsed.IsNull()) {
    // Standard input or a pipe: under mpirun only rank 0 gets standard input, and the other
    // ranks were told to write `train: {}` (review, 2026-12-08).
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec)) {
      return Status::error(
          "{}: the config holds no settings, and it is not a file (standard input or a pipe?): "
          "under mpirun only rank 0 gets standard input and no rank gets the shell's pipes; "
          "write the config to a file, or change keys with --set",
          path);
    }
    return Status::error(
        "{}: the config file holds no settings (it is empty or only comments: a truncated "
        "copy?); for every default on purpose, write `train: {{}}`",
        path);
  }
  return from_string(*text, path);
}

Result<YamlReader> YamlReader::from_string(const std::string& text, const std::string& origin) {
  SPARQ_ASSIGN_OR_RETURN(const YAML::Node parsed, load_one_document_with_marks(text, origin));
  if (parsed.IsNull()) return YamlReader(YAML::Node(YAML::NodeType::Map), origin);
  if (!parsed.IsMap()) return Status::error("{}: a config must be a YAML mapping", origin);
  SPARQ_RETURN_IF_ERROR(check_keys(parsed, "", origin));  // before the copy: it quotes lines
  return YamlReader(unshared_copy(parsed), origin);
}

Status YamlReader::fail(const std::string& key, const std::string& what) const {
  const std::string set = overridden_by(key);
  if (set == key) return Status::error("--set {}: {}", key, what);
  if (!set.empty()) return Status::error("--set {}: {}: {}", set, key, what);
  return Status::error("{}: {}: {}", origin_, key, what);
}

std::optional<YAML::Node> YamlReader::find(const std::string& key) const {
  // Walk through const nodes: yaml-cpp's non-const operator[] would insert missing keys, and
  // plain Node assignment would overwrite content instead of rebinding (hence reset()).
  YAML::Node walk;
  walk.reset(root_);
  for (const std::string& part : split_key(key)) {
    if (!walk.IsMap()) return std::nullopt;
    const YAML::Node& current = walk;
    const YAML::Node next = current[part];
    if (!next.IsDefined()) return std::nullopt;
    walk.reset(next);
  }
  return walk;
}

Result<SetArgument> parse_set_argument(const std::string& assignment) {
  const auto eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0) {
    return Status::error("--set '{}': expected key=value", assignment);
  }
  SetArgument a;
  a.key = assignment.substr(0, eq);
  a.parts = split_key(a.key);
  if (std::any_of(a.parts.begin(), a.parts.end(), [](const auto& p) { return p.empty(); })) {
    return Status::error("--set '{}': the key has an empty part", assignment);
  }
  const std::string text = assignment.substr(eq + 1);
  SPARQ_RETURN_IF_ERROR(check_set_value_text(a.key, text));
  SPARQ_ASSIGN_OR_RETURN(a.value, load_one_document(text, "--set " + a.key + " (the value)"));
  SPARQ_RETURN_IF_ERROR(check_set_value_read(a.key, text, a.value));
  SPARQ_RETURN_IF_ERROR(check_keys(a.value, a.key, "--set"));
  return a;
}

Status YamlReader::set_override(const std::string& assignment) {
  SPARQ_ASSIGN_OR_RETURN(const SetArgument argument, parse_set_argument(assignment));
  const std::string& key = argument.key;
  const std::vector<std::string>& parts = argument.parts;
  const YAML::Node& value = argument.value;
  YAML::Node walk = root_;
  for (std::size_t i = 0; i + 1 < parts.size(); ++i) {
    // A section header with every key commented out ("log:") is an empty section.
    if (!walk[parts[i]].IsDefined() || walk[parts[i]].IsNull()) {
      walk[parts[i]] = YAML::Node(YAML::NodeType::Map);
    }
    YAML::Node next = walk[parts[i]];
    if (!next.IsMap()) return Status::error("--set {}: '{}' is not a section", key, parts[i]);
    walk.reset(next);
  }
  // A section replaced by a scalar or by nothing: `--set optim=` emptied the whole section,
  // and the run went on with every optim key at its default without a word (review,
  // 2026-12-06). A map replaces it, as documented (--set optim={lr: 1}).
  const YAML::Node& existing = walk;
  const YAML::Node current = existing[parts.back()];
  if (current.IsDefined() && current.IsMap() && current.size() > 0 && !value.IsMap()) {
    return Status::error(
        "--set {}: '{}' is a section; set its keys (--set {}.<key>=...), or replace it "
        "whole with a map (--set {}={{...}})",
        key, key, key, key);
  }
  walk[parts.back()] = value;
  overridden_.insert(key);
  return Status::ok();
}

std::string YamlReader::overridden_by(const std::string& key) const {
  // The longest: with --set optim={lr: 1} --set optim.lr=fast, optim.lr's value is the second's.
  std::string found;
  for (const std::string& o : overridden_) {
    if ((key == o || key.starts_with(o + ".")) && o.size() > found.size()) found = o;
  }
  return found;
}

std::string YamlReader::where() const {
  if (overridden_.empty()) return origin_;
  return fmt::format("{} with --set {}", origin_, fmt::join(overridden_, ", "));
}

bool YamlReader::has(const std::string& key) const { return find(key).has_value(); }

bool YamlReader::is_empty(const std::string& key) const {
  const auto node = find(key);
  return node && node->IsNull();
}

template <typename T>
Status YamlReader::get_number(const std::string& key, T* out, Bounds<T> bounds, const char* kind) {
  consumed_.insert(key);
  const auto node = find(key);
  if (!node) return Status::ok();
  if (!node->IsScalar())
    return fail(key, fmt::format("expected {}, got {}", kind, quoted_value(*node)));
  T value;
  if constexpr (std::is_integral_v<T>) {
    const Decimal parsed = parse_decimal(node->Scalar());
    if (parsed.kind == Decimal::kOutOfRange) {
      return fail(key, fmt::format("{} is beyond the range of a 64-bit integer", node->Scalar()));
    }
    if (parsed.kind != Decimal::kOk) {
      return fail(key, fmt::format("expected {}, got '{}'", kind, node->Scalar()));
    }
    value = parsed.value;
  } else {
    try {
      value = node->as<T>();
    } catch (const YAML::Exception&) {
      return fail(key, fmt::format("expected {}, got '{}'", kind, node->Scalar()));
    }
  }
  if constexpr (std::is_floating_point_v<T>) {
    if (!std::isfinite(value)) return fail(key, fmt::format("must be finite, got {}", node->Scalar()));
  }
  if (bounds.min && value < *bounds.min) {
    return fail(key, fmt::format("must be >= {}, got {}", *bounds.min, node->Scalar()));
  }
  if (bounds.max && value > *bounds.max) {
    return fail(key, fmt::format("must be <= {}, got {}", *bounds.max, node->Scalar()));
  }
  *out = value;
  return Status::ok();
}

Status YamlReader::get(const std::string& key, double* out, Bounds<double> bounds) {
  return get_number(key, out, bounds, "a number");
}

Status YamlReader::get(const std::string& key, std::int64_t* out, Bounds<std::int64_t> bounds) {
  return get_number(key, out, bounds, "an integer");
}

Status YamlReader::get(const std::string& key, int* out, Bounds<std::int64_t> bounds) {
  std::int64_t v = *out;
  if (!bounds.min) bounds.min = INT32_MIN;
  if (!bounds.max) bounds.max = INT32_MAX;
  SPARQ_RETURN_IF_ERROR(get_number(key, &v, bounds, "an integer"));
  *out = static_cast<int>(v);
  return Status::ok();
}

Status YamlReader::get(const std::string& key, bool* out) {
  consumed_.insert(key);
  const auto node = find(key);
  if (!node) return Status::ok();
  // Note [Boolean words]: the words every boolean in sparq accepts (yaml-cpp's own, and 1/0).
  const std::optional<bool> value =
      node->IsScalar() ? parse_bool_word(node->Scalar()) : std::nullopt;
  if (!value) {
    return fail(key,
                fmt::format("expected a boolean ({}), got {}", kBoolWords, quoted_value(*node)));
  }
  *out = *value;
  return Status::ok();
}

Status YamlReader::get(const std::string& key, std::string* out) {
  consumed_.insert(key);
  const auto node = find(key);
  if (!node) return Status::ok();
  if (node->IsNull()) {  // "key:" or "--set key=" means empty (a path switched off)
    out->clear();
    return Status::ok();
  }
  if (!node->IsScalar())
    return fail(key, fmt::format("expected a string, got {}", quoted_value(*node)));
  *out = node->Scalar();
  return Status::ok();
}

Status YamlReader::get_choice(const std::string& key, std::string* out,
                              const std::vector<std::string>& choices) {
  std::string value = *out;
  SPARQ_RETURN_IF_ERROR(get(key, &value));
  for (const auto& c : choices) {
    if (c == value) {
      *out = value;
      return Status::ok();
    }
  }
  return fail(key, fmt::format("'{}' is not one of {}", value, fmt::join(choices, ", ")));
}

Status YamlReader::get(const std::string& key, std::vector<std::string>* out) {
  consumed_.insert(key);
  const auto node = find(key);
  if (!node) return Status::ok();
  if (!node->IsSequence())
    return fail(key, fmt::format("expected a list, got {}", quoted_value(*node)));
  std::vector<std::string> values;
  for (const auto& item : *node) {
    if (!item.IsScalar()) return fail(key, "list items must be strings");
    values.push_back(item.Scalar());
  }
  *out = std::move(values);
  return Status::ok();
}

Status YamlReader::take_section(const std::string& key,
                                std::vector<std::pair<std::string, std::string>>* out) {
  consumed_.insert(key + ".");
  out->clear();
  const auto node = find(key);
  // A header whose keys are all commented out is an empty section (docs/config.md), as get()
  // reads it for the other sections; it was refused here (review, 2026-12-05).
  if (!node || node->IsNull()) return Status::ok();
  if (!node->IsMap()) return fail(key, "expected a section (a mapping)");
  std::vector<std::string> leaves;
  collect_leaves(*node, "", &leaves);
  for (const auto& leaf : leaves) {
    // An empty key or one holding a '.' cannot be reached as a dotted path (fuzzing found
    // the unchecked lookup of one).
    const auto value = find(key + "." + leaf);
    if (!value) return fail(key + "." + leaf, "keys must be non-empty and must not contain '.'");
    out->emplace_back(leaf, scalar_text(*value));
  }
  return Status::ok();
}

bool YamlReader::is_section_read(const std::string& key) const {
  return std::any_of(consumed_.begin(), consumed_.end(),
                     [&](const std::string& c) { return c.rfind(key + ".", 0) == 0; });
}

std::vector<std::string> YamlReader::unknown_keys() const {
  std::vector<std::string> leaves, unknown;
  collect_leaves(root_, "", &leaves);
  for (const auto& leaf : leaves) {
    if (consumed_.count(leaf)) continue;
    // A section header with every key commented out ("log:") is an empty section, not a key.
    const auto node = find(leaf);
    if (node && node->IsNull() && is_section_read(leaf)) continue;
    bool in_section = false;
    for (const auto& c : consumed_) {
      if (!c.empty() && c.back() == '.' && leaf.rfind(c, 0) == 0) in_section = true;
    }
    if (!in_section) unknown.push_back(leaf);
  }
  return unknown;
}

Status YamlReader::check_no_unknown_keys() const {
  const auto unknown = unknown_keys();
  if (unknown.empty()) return Status::ok();
  // A known section written as a value ("optim: 3", --set data.markov=3) is not an unknown
  // key: it was reported as one, which sent the user looking for a misspelling (review,
  // 2026-12-05).
  for (const std::string& leaf : unknown) {
    const auto node = find(leaf);
    if (node && is_section_read(leaf)) {
      return fail(leaf, "expected a section (a mapping), got " + quoted_value(*node));
    }
  }
  // Each named where it was given: the file, or a --set.
  std::vector<std::string> in_file, in_set;
  for (const std::string& leaf : unknown) {
    (overridden_by(leaf).empty() ? in_file : in_set).push_back(leaf);
  }
  // Each with the key it most likely meant (train.batch_size: train.micro_batch), which only
  // compressor keys offered (review, 2026-12-08).
  const std::vector<std::string> known = keys_read();
  const auto with_hint = [&](const std::string& leaf) {
    const std::string meant = nearest_known_key(leaf, known);
    return meant.empty() ? leaf : fmt::format("{} (did you mean {}?)", leaf, meant);
  };
  std::string text;
  for (const auto& [where, keys] :
       {std::pair{origin_, &in_file}, std::pair{std::string("--set"), &in_set}}) {
    if (keys->empty()) continue;
    std::vector<std::string> said;
    for (const std::string& leaf : *keys) said.push_back(with_hint(leaf));
    text += fmt::format("{}{}: unknown key{} {}", text.empty() ? "" : "; ", where,
                        keys->size() > 1 ? "s" : "", fmt::join(said, ", "));
  }
  return Status::error("{}", text);
}

std::string YamlReader::dump() const {
  YAML::Emitter e;
  e << root_;
  return e.c_str();
}

}  // namespace sparq::train
