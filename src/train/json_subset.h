// The subset of JSON that safetensors headers use: objects (members kept in text order),
// arrays, strings (all escapes, \\u surrogate pairs decoded to UTF-8) and non-negative or
// negative integers; no floats, booleans or null. Parse errors give the byte offset in the
// text; nesting deeper than 8 levels is refused.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"

namespace sparq::train {

struct JsonMember;

struct Json {
  enum class Kind { kObject, kArray, kString, kInt };
  Kind kind = Kind::kInt;
  std::string str;
  std::int64_t num = 0;
  std::vector<Json> items;                            // arrays
  std::vector<JsonMember> members;  // objects, in text order
};

// An object member, named like std::pair's fields: a pair cannot hold the still incomplete
// Json above (clang with libstdc++ rejects it; the fuzz build is clang).
struct JsonMember {
  std::string first;
  Json second;
};

// "an object", "an array", ... for messages.
std::string_view kind_name(Json::Kind k);
// One JSON value filling the whole text (surrounding white space allowed).
Result<Json> parse_json(std::string_view text);
// Appends `s` as a quoted JSON string, escaping quotes, backslashes and control characters.
void append_json_string(std::string& out, std::string_view s);

}  // namespace sparq::train
