// Small vocabularies for the tokenizer targets, written to scratch files at start-up, so the
// targets need nothing from ../shared/data. With SPARQ_FUZZ_DATA set to a directory holding
// gpt2-bpe/{encoder.json,vocab.bpe} and bert-vocab/bert-base-uncased-vocab.txt (or
// vocab.txt, scripts/get_data.sh's name) (scripts/fuzz.sh sets it to ../shared/data when that
// exists) the real ones are used.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "data/gpt2_tokenizer.h"
#include "data/unicode.h"
#include "fuzz_util.h"

namespace sparq::fuzz {

// Words whose left-to-right merge chains form the small GPT-2 vocabulary: every prefix of
// every word becomes a token, so merges of several lengths, leading spaces (" the"),
// digits, punctuation and multi-byte UTF-8 are all exercised.
inline const std::vector<std::string>& small_vocab_words() {
  static const std::vector<std::string> words = {
      " the", " and", "ing", "tion", " of", " to", "er", "in", "re", " a", "ed", " is",
      " in", "'s", "'t", " 2026", "12", "...", "\n\n", "  ", " \xc3\xa9t\xc3\xa9", "\xe4\xb8\xad",
      " \xf0\x9f\x98\x80", "ation", " international"};
  return words;
}

inline std::string gpt2_spelling(const std::string& bytes) {
  static const auto table = data::gpt2_byte_to_unicode();
  std::string out;
  for (unsigned char b : bytes) data::append_utf8(table[b], &out);
  return out;
}

inline std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

// Writes encoder.json and vocab.bpe of the small vocabulary; returns their paths.
inline std::pair<std::string, std::string> write_small_gpt2_vocab() {
  std::vector<std::string> tokens;  // byte strings, in id order
  for (int b = 0; b < 256; ++b) tokens.emplace_back(1, static_cast<char>(b));
  std::string bpe = "#version: 0.2\n";
  for (const std::string& w : small_vocab_words()) {
    for (std::size_t len = 2; len <= w.size(); ++len) {
      const std::string merged = w.substr(0, len);
      bool known = false;
      for (const auto& t : tokens) known = known || t == merged;
      if (known) continue;
      bpe += gpt2_spelling(w.substr(0, len - 1)) + " " + gpt2_spelling(w.substr(len - 1, 1)) + "\n";
      tokens.push_back(merged);
    }
  }
  std::string json = "{";
  for (std::size_t id = 0; id < tokens.size(); ++id) {
    json += json_string(gpt2_spelling(tokens[id])) + ": " + std::to_string(id) + ", ";
  }
  json += json_string(data::Gpt2Tokenizer::kEndOfText) + ": " + std::to_string(tokens.size()) + "}";
  const std::string encoder = scratch_path(".encoder.json"), vocab = scratch_path(".vocab.bpe");
  write_scratch(encoder, reinterpret_cast<const std::uint8_t*>(json.data()), json.size());
  write_scratch(vocab, reinterpret_cast<const std::uint8_t*>(bpe.data()), bpe.size());
  return {encoder, vocab};
}

// A real vocabulary file under $SPARQ_FUZZ_DATA, or "" when unset or absent.
inline std::string real_vocab_file(const std::string& relative) {
  const char* dir = std::getenv("SPARQ_FUZZ_DATA");
  if (!dir || !*dir) return "";
  const std::string path = std::string(dir) + "/" + relative;
  return std::filesystem::exists(path) ? path : "";
}

}  // namespace sparq::fuzz
