// Arbitrary bytes -> Gpt2Tokenizer::encode / encode_cached / encode_with_special.
// Properties: decode(encode(x)) == x for EVERY byte string x (invalid UTF-8 included), the
// same through a per-thread cache and with "<|endoftext|>" recognised, and every id is
// < vocab_size(). Vocabulary: tokenizer_vocab.h (small and generated, or the real one).
#include <cstdio>
#include <memory>

#include "tokenizer_vocab.h"

namespace {

std::unique_ptr<sparq::data::Gpt2Tokenizer> tokenizer;
std::unique_ptr<sparq::data::EncodeCache> cache;

void check_ids(const std::vector<std::uint32_t>& ids, std::string_view text, const char* how) {
  for (std::uint32_t id : ids) {
    if (id >= tokenizer->vocab_size()) sparq::fuzz::property_failed(std::string(how) + ": id out of range");
  }
  if (tokenizer->decode(ids) != text) {
    sparq::fuzz::property_failed(std::string(how) + ": decode(encode(x)) != x for x of " +
                                 std::to_string(text.size()) + " bytes");
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  std::string encoder = sparq::fuzz::real_vocab_file("gpt2-bpe/encoder.json");
  std::string vocab = sparq::fuzz::real_vocab_file("gpt2-bpe/vocab.bpe");
  const bool real = !encoder.empty() && !vocab.empty();
  if (!real) std::tie(encoder, vocab) = sparq::fuzz::write_small_gpt2_vocab();
  auto loaded = sparq::data::Gpt2Tokenizer::load(encoder, vocab);
  if (!loaded.is_ok()) sparq::fuzz::property_failed("vocabulary: " + loaded.status().message());
  tokenizer = std::move(loaded).value();
  cache = tokenizer->new_cache();
  std::fprintf(stderr, "gpt2_tokenizer_fuzz: %s vocabulary of %u tokens\n",
               real ? "the real" : "a small generated", tokenizer->vocab_size());
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  std::vector<std::uint32_t> ids;
  tokenizer->encode(text, &ids);
  check_ids(ids, text, "encode");
  ids.clear();
  tokenizer->encode_cached(text, &ids, cache.get());
  check_ids(ids, text, "encode_cached");
  ids.clear();
  tokenizer->encode_with_special(text, &ids);
  check_ids(ids, text, "encode_with_special");
  return 0;
}
