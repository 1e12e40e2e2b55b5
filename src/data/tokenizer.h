// The common interface of sparq's tokenizers (GPT-2 byte-level BPE and BERT WordPiece), used
// by prepare_data and the loaders. Token ids are u32. Implementations are immutable after
// loading, and encode/decode are safe to call from several threads at once.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace sparq::data {

// Per-thread scratch that lets a tokenizer skip work it has done before (GPT-2's piece
// cache). Used by one thread at a time; opaque to callers.
class EncodeCache {
 public:
  virtual ~EncodeCache() = default;
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Short identifier stored in shard headers: "gpt2" or "bert-uncased".
  virtual std::string name() const = 0;
  virtual std::uint32_t vocab_size() const = 0;
  // Appends the ids of `text` (plain text: special-token spellings are not recognised).
  virtual void encode(std::string_view text, std::vector<std::uint32_t>* out) const = 0;
  // A fresh cache for one thread, or nullptr when the tokenizer has no use for one.
  virtual std::unique_ptr<EncodeCache> new_cache() const { return nullptr; }
  // encode() with a cache from new_cache() (or null) that only the calling thread uses: no
  // shared state is touched, so threads that each hold a cache scale.
  virtual void encode_cached(std::string_view text, std::vector<std::uint32_t>* out,
                             EncodeCache* cache) const {
    encode(text, out);
  }
  // The text of `ids`; ids >= vocab_size() are a programming error.
  virtual std::string decode(std::span<const std::uint32_t> ids) const = 0;
  // The id written between documents in a shard (<|endoftext|> for GPT-2, [SEP] for BERT).
  virtual std::uint32_t document_separator() const = 0;
};

// kind "gpt2": `dir` holds encoder.json and vocab.bpe.
// kind "wordpiece": `dir` holds vocab.txt (or bert-base-uncased-vocab.txt).
Result<std::unique_ptr<Tokenizer>> load_tokenizer(const std::string& kind, const std::string& dir);

}  // namespace sparq::data
