// Loading the text of a config (or of a --set value) as exactly one YAML document whose nodes
// are all its own, and the check of a --set value's text for what YAML would cut from it.
// Internal to the config reader (train/yaml_reader.cpp); the machine profiles' reader
// (sim/profile.cpp) shares the one-document rule.
#pragma once

#include <yaml-cpp/yaml.h>

#include <string>

#include "core/status.h"

namespace sparq::train {

// The one document of `text`, with every alias (*name) replaced by a copy of what its anchor
// holds. `origin` names the text in errors (a config path, "--set train.steps").
//   * One document: yaml-cpp's Load reads the first and drops the rest unparsed, so two
//     configs joined with `cat` (each opening with ---) trained on the first one's settings
//     alone, and anything after a second --- was never checked (review, 2026-12-06).
//   * No shared nodes: an alias is the anchored node itself in yaml-cpp, so --set on a key
//     that an alias also named changed both ("lr: &x 0.25", "timeout_s: *x", then --set
//     comm.timeout_s=600 trained at lr 600; review, 2026-12-06). A config is a tree of values:
//     anchors are a way of writing it, and each key is set on its own.
// Line numbers (Mark()) do not survive the copy: callers that quote a line check the document
// returned by load_one_document_with_marks() first.
Result<YAML::Node> load_one_document(const std::string& text, const std::string& origin);

// The one document of `text` as yaml-cpp parsed it (aliases still shared, line numbers kept),
// for checks that quote lines before the copy; load_one_document() is this, then the copy.
Result<YAML::Node> load_one_document_with_marks(const std::string& text, const std::string& origin);

// The line (1-based) where a second YAML document's content begins in `text`, or 0 for one
// document (load_one_document_with_marks refuses a second one; machine profiles too).
int second_document_line(const std::string& text);

// A copy of `node` whose every node is new: aliases become values of their own.
YAML::Node unshared_copy(const YAML::Node& node);

// A scalar's text, or the node written as flow YAML (a complex key has no string form).
std::string scalar_text(const YAML::Node& n);

// Every mapping key must be reachable as one part of a dotted path, once:
//   * yaml-cpp keeps both entries of a repeated key and a lookup finds the first, so a setting
//     appended at the end of a config to change an earlier one would be silently ignored;
//   * a key holding a '.' ("compress.name: topk" at the top level) is never looked up, and
//     the unknown-key check, which joins paths with '.', would take it for the key it spells
//     (review, 2026-12-05: such a config trained uncompressed without a word);
//   * a complex key ("? [a, b]\n: 3") has no text to look up.
// Machine profiles (sim/profile.cpp) share the rule but read their keys with their own
// reader, which refuses unknown keys one mapping at a time: a '.' there is only unknown.
enum class DottedKeys { refused, unknown_only };
Status check_keys(const YAML::Node& node, const std::string& prefix, const std::string& origin,
                  DottedKeys dotted = DottedKeys::refused);

// What YAML would silently cut from a --set value: a comment ("run #1.jsonl" read as "run")
// or a document marker ("---" read as no value, which turned log.metrics off); the shell has
// already removed the user's own quotes, so a '#' the user meant is never a comment here
// unless quoted again (review, 2026-12-06).
Status check_set_value_text(const std::string& key, const std::string& text);

// After the parse: an unquoted scalar must read as its own text, and no value only from an
// empty text, "~" or "null". A quote inside a word ("run's #1.jsonl" read as "run's") and a
// leading '%', '!' or '&' (a directive, a tag, an anchor: read as no value, which turned
// log.metrics off) changed the value without a word (review, 2026-12-07).
Status check_set_value_read(const std::string& key, const std::string& text,
                            const YAML::Node& value);

}  // namespace sparq::train
