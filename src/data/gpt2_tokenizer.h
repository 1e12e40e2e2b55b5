// GPT-2 byte-level BPE, token for token equal to OpenAI's encoder.py:
//  1. pre-tokenize (gpt2_pretokenize.h);
//  2. each piece is a byte string; every byte starts as its own symbol;
//  3. repeatedly merge every occurrence (left to right) of the adjacent pair with the
//     lowest rank in vocab.bpe, until no adjacent pair has a rank;
//  4. look the symbols up in encoder.json.
// Files: encoder.json maps token strings to ids; vocab.bpe lists the merges in rank order
// after a "#version" line (a line may end in "\r\n": encoder.py's split() drops the '\r'
// too). Load errors name the file and line ("vocab.bpe:17: ..."). Both spell bytes through GPT-2's
// byte-to-unicode table: bytes
// '!'..'~', U+00A1..U+00AC and U+00AE..U+00FF stand for themselves, the remaining 68 bytes
// become U+0100.. in increasing byte order. Internally tokens are plain byte strings, so
// decode(encode(x)) == x for every byte string x (invalid UTF-8 included).
//
// Thread safety: encode() may run concurrently; its shared piece cache is lock-striped.
// Threads that encode a lot should each use their own cache (new_cache + encode_cached):
// common words would otherwise make every thread contend for the same stripe.
#pragma once

#include <array>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "data/tokenizer.h"

namespace sparq::data {

class Gpt2Tokenizer final : public Tokenizer {
 public:
  static constexpr const char* kEndOfText = "<|endoftext|>";

  // Reads and cross-checks both files (every merge's parts and result must be tokens).
  static Result<std::unique_ptr<Gpt2Tokenizer>> load(const std::string& encoder_json_path,
                                                     const std::string& vocab_bpe_path);

  std::string name() const override { return "gpt2"; }
  std::uint32_t vocab_size() const override {
    return static_cast<std::uint32_t>(id_to_bytes_.size());
  }
  void encode(std::string_view text, std::vector<std::uint32_t>* out) const override;
  std::unique_ptr<EncodeCache> new_cache() const override;
  void encode_cached(std::string_view text, std::vector<std::uint32_t>* out,
                     EncodeCache* cache) const override;
  std::string decode(std::span<const std::uint32_t> ids) const override;
  std::uint32_t document_separator() const override { return eot_id_; }

  // Like encode(), but the literal text "<|endoftext|>" becomes the end-of-text token.
  void encode_with_special(std::string_view text, std::vector<std::uint32_t>* out) const;
  // Id of a token given as raw bytes, or -1 if it is not in the vocabulary.
  long token_id(std::string_view bytes) const;
  std::uint32_t eot_id() const { return eot_id_; }
  std::size_t merge_count() const { return merges_.size(); }

 private:
  Gpt2Tokenizer() = default;
  // Appends the ids of one piece, through `local` when given, else the shared cache.
  void bpe(std::string_view piece, std::vector<std::uint32_t>* out, EncodeCache* local) const;
  // The merges themselves (no caching): merge_rounds for short pieces (a rescan of the word
  // per round, as encoder.py), merge_long above kLongPiece bytes (gpt2_merge_long.cpp; the same
  // result in O(n log n), Note [Long pieces]).
  void merge(std::string_view piece, std::vector<std::uint32_t>* word) const;
  void merge_rounds(std::string_view piece, std::vector<std::uint32_t>* word) const;
  void merge_long(std::string_view piece, std::vector<std::uint32_t>* word) const;
  static constexpr std::size_t kLongPiece = 128;

  struct MergeInfo {
    std::uint32_t rank;
    std::uint32_t merged;
  };
  std::vector<std::string> id_to_bytes_;
  std::unordered_map<std::string, std::uint32_t> bytes_to_id_;
  std::unordered_map<std::uint64_t, MergeInfo> merges_;  // key: left id << 32 | right id
  std::array<std::uint32_t, 256> byte_ids_{};
  std::uint32_t eot_id_ = 0;

  // Piece -> ids cache (GPT-2 text repeats words constantly), striped to limit contention.
  static constexpr int kCacheStripes = 64;
  static constexpr std::size_t kMaxEntriesPerStripe = 1 << 14;
  // Transparent hashing lets string_view pieces be looked up without a copy.
  struct PieceHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  struct alignas(64) CacheStripe {  // own cache line: stripes must not share one
    std::mutex mutex;
    std::unordered_map<std::string, std::vector<std::uint32_t>, PieceHash, std::equal_to<>> map;
  };
  mutable std::array<CacheStripe, kCacheStripes> cache_;

 public:
  // The per-thread cache (exposed only so that the .cpp can define it).
  struct LocalCache;
};

// GPT-2's byte-to-unicode table: the code point that spells byte b in the vocab files.
std::array<std::uint32_t, 256> gpt2_byte_to_unicode();

}  // namespace sparq::data
