#include "train/yaml_document.h"

#include <vector>

namespace sparq::train {

Result<YAML::Node> load_one_document_with_marks(const std::string& text,
                                                const std::string& origin) {
  try {
    std::vector<YAML::Node> documents = YAML::LoadAll(text);
    if (documents.empty()) return YAML::Node(YAML::NodeType::Null);
    if (documents.size() > 1) {
      // Mark() of an empty document is unknown (-1): name its position among the documents.
      const YAML::Mark second = documents[1].Mark();
      const std::string where =
          second.line >= 0 ? fmt::format("line {}", second.line + 1) : "its end";
      return Status::error(
          "{}: holds {} YAML documents (the second one's content begins at {}); a config is one document: "
          "merge the files into one, or give the second one's keys as --set key=value",
          origin, documents.size(), where);
    }
    return documents.front();
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
  return Status::ok();
}

}  // namespace sparq::train
