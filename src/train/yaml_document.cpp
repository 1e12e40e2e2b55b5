#include "train/yaml_document.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <string_view>

namespace sparq::train {

namespace {

// Whether `line` holds content: not blank, not only a comment, not a directive (%YAML).
bool holds_content(std::string_view line) {
  const std::size_t first = line.find_first_not_of(" \t\r");
  return first != std::string_view::npos && line[first] != '#' && line[0] != '%';
}

// A document marker: "---" or "..." at column 0, then the line's end or a space or tab.
bool is_document_marker(std::string_view line, std::string_view marker) {
  return line.starts_with(marker) &&
         (line.size() == 3 || line[3] == ' ' || line[3] == '\t' || line[3] == '\r');
}

}  // namespace

// The line (1-based) where a second document's content begins, or 0 for one document.
// Found in the text, not by yaml-cpp's LoadAll: 0.7 loops forever on some inputs (a config
// that is just "," grew to gigabytes; jbeder/yaml-cpp#1040, found by fuzzing). A marker at
// column 0 is always a marker (no scalar's content can begin there), so the split is exact.
// yaml-cpp's Load reads the FIRST document, empty or not: the first ends at a "..." or at
// the "---" that opens another one after it was opened ("---" or content). Content after that
// is in another document, so "---\n---\ntrain: ..." and "...\ntrain: ..." were read as an
// empty config, every key dropped without a word (review, 2026-12-06).
int second_document_line(const std::string& text) {
  bool open = false;         // the first document has been opened (a "---" or content)
  bool first_ended = false;  // ... and has ended
  int number = 0;
  for (std::size_t begin = 0; begin <= text.size();) {
    const std::size_t end = std::min(text.find('\n', begin), text.size());
    const std::string_view line(text.data() + begin, end - begin);
    ++number;
    begin = end + 1;
    std::string_view rest = line;
    if (is_document_marker(line, "---")) {
      if (open) first_ended = true;
      open = true;
      rest = line.substr(3);
    } else if (is_document_marker(line, "...")) {
      first_ended = true;
      rest = std::string_view();
    }
    if (holds_content(rest)) {
      if (first_ended) return number;
      open = true;
    }
  }
  return 0;
}

Result<YAML::Node> load_one_document_with_marks(const std::string& text,
                                                const std::string& origin) {
  if (const int line = second_document_line(text); line > 0) {
    return Status::error(
        "{}: holds more than one YAML document (the second one's content begins at line {}); "
        "a config is one document: merge the files into one, or give the second one's keys "
        "as --set key=value",
        origin, line);
  }
  try {
    return YAML::Load(text);  // the first document, the only one with content
  } catch (const YAML::Exception& e) {
    return Status::error("{}: invalid YAML: {}", origin, e.what());
  }
}

Result<YAML::Node> load_one_document(const std::string& text, const std::string& origin) {
  SPARQ_ASSIGN_OR_RETURN(const YAML::Node document, load_one_document_with_marks(text, origin));
  return unshared_copy(document);
}

YAML::Node unshared_copy(const YAML::Node& node) {
  YAML::Node copy;
  switch (node.Type()) {
    case YAML::NodeType::Undefined:
      return copy;
    case YAML::NodeType::Null:
      copy = YAML::Node(YAML::NodeType::Null);
      break;
    case YAML::NodeType::Scalar:
      copy = YAML::Node(node.Scalar());
      break;
    case YAML::NodeType::Sequence:
      copy = YAML::Node(YAML::NodeType::Sequence);
      for (const YAML::Node& item : node) copy.push_back(unshared_copy(item));
      break;
    case YAML::NodeType::Map:
      copy = YAML::Node(YAML::NodeType::Map);
      // force_insert keeps a repeated key as the original holds it, for check_keys to name.
      for (const auto& entry : node) {
        copy.force_insert(unshared_copy(entry.first), unshared_copy(entry.second));
      }
      break;
  }
  // The tag tells a quoted "~" or "true" (a string) from a plain one; the style keeps flow
  // lists as the user wrote them when the resolved config is printed.
  copy.SetTag(node.Tag());
  copy.SetStyle(node.Style());
  return copy;
}

std::string scalar_text(const YAML::Node& n) {
  if (n.IsScalar()) return n.Scalar();
  YAML::Emitter e;
  e << YAML::Flow << n;
  return e.c_str();
}

Status check_keys(const YAML::Node& node, const std::string& prefix, const std::string& origin,
                  DottedKeys dotted) {
  if (node.IsMap()) {
    std::set<std::string> seen;
    for (const auto& entry : node) {
      if (!entry.first.IsScalar()) {
        return Status::error("{}: {}: a key that is not text (line {})", origin,
                             prefix.empty() ? "top level" : prefix, entry.first.Mark().line + 1);
      }
      const std::string key = entry.first.Scalar();
      const std::string path = prefix.empty() ? key : prefix + "." + key;
      if (dotted == DottedKeys::refused && (key.empty() || key.find('.') != std::string::npos)) {
        return Status::error(
            "{}: '{}' (line {}): a key must be one plain name; write nested sections "
            "(compress: {{name: topk}}) or --set compress.name=topk",
            origin, path, entry.first.Mark().line + 1);
      }
      if (!seen.insert(key).second) {
        return Status::error("{}: {}: set twice (again at line {}); give each key once", origin,
                             path, entry.first.Mark().line + 1);
      }
      SPARQ_RETURN_IF_ERROR(check_keys(entry.second, path, origin, dotted));
    }
  } else if (node.IsSequence()) {
    for (std::size_t i = 0; i < node.size(); ++i) {
      SPARQ_RETURN_IF_ERROR(check_keys(node[i], fmt::format("{}[{}]", prefix, i), origin, dotted));
    }
  }
  return Status::ok();
}

Status check_set_value_text(const std::string& key, const std::string& text) {
  char quote = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quote) {
      if (c == quote) quote = 0;
    } else if (c == '\'' || c == '"') {
      quote = c;
    } else if (c == '#' && (i == 0 || text[i - 1] == ' ' || text[i - 1] == '\t')) {
      return Status::error(
          "--set {}: the value '{}' holds a YAML comment (' #'), which would drop the rest; "
          "quote the value (--set '{}=\"{}\"')",
          key, text, key, text);
    }
  }
  const auto first = text.find_first_not_of(" \t");
  if (first != std::string::npos &&
      (text.compare(first, 3, "---") == 0 || text.compare(first, 3, "...") == 0) &&
      (first + 3 == text.size() || text[first + 3] == ' ' || text[first + 3] == '\t' ||
       text[first + 3] == '\n')) {
    return Status::error(
        "--set {}: the value '{}' is a YAML document marker, which reads as no value; quote "
        "it (--set '{}=\"{}\"')",
        key, text, key, text);
  }
  // A glob ("*.bias") is a YAML alias: "invalid YAML: ... the referenced anchor is not
  // defined" said nothing of the quoting it needs (review, 2026-12-08).
  if (first != std::string::npos && text[first] == '*') {
    return Status::error(
        "--set {}: the value '{}' begins with '*', which YAML reads as an alias; quote it "
        "(--set '{}=\"{}\"', or a list: --set '{}=[\"{}\"]')",
        key, text, key, text, key, text.substr(first));
  }
  return Status::ok();
}

Status check_set_value_read(const std::string& key, const std::string& text,
                            const YAML::Node& value) {
  const std::size_t first = text.find_first_not_of(" \t");
  const std::string trimmed = first == std::string::npos
                                  ? std::string()
                                  : text.substr(first, text.find_last_not_of(" \t") - first + 1);
  const auto quote_it = [&](std::string_view reads_as) {
    return Status::error("--set {}: YAML reads the value '{}' as {}; quote it (--set '{}=\"{}\"')",
                         key, text, reads_as, key, text);
  };
  if (value.IsNull()) {
    for (const char* none : {"", "~", "null", "Null", "NULL"}) {
      if (trimmed == none) return Status::ok();
    }
    return quote_it("no value");
  }
  // Text the user quoted, or tagged with a YAML tag ("!!str 5"), is YAML on purpose; any
  // other scalar must read as its own text ("! x" read as "x", "!x" as "": review).
  const bool quoted = trimmed.starts_with('\'') || trimmed.starts_with('"');
  if (value.IsScalar() && !quoted && !trimmed.starts_with("!!") && value.Scalar() != trimmed) {
    return quote_it("'" + value.Scalar() + "'");
  }
  return Status::ok();
}

}  // namespace sparq::train
