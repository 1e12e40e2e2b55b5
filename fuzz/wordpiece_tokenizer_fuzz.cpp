// Arbitrary bytes (any UTF-8, valid or not) -> WordPieceTokenizer::encode / tokenize.
// Properties: no crash or sanitizer report; every id < vocab_size(); tokenize() yields one
// token string per id, spelled as that id's token; decode() of the ids does not fail.
#include <cstdio>
#include <memory>

#include "data/wordpiece_tokenizer.h"
#include "tokenizer_vocab.h"

namespace {

std::unique_ptr<sparq::data::WordPieceTokenizer> tokenizer;

// Specials, single characters (ASCII, accented, CJK, Greek) and "##" pieces, so that
// greedy longest-match, [UNK] fallback and lower-casing all run.
const char kSmallVocab[] =
    "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n"
    "a\nb\nc\nd\ne\nh\ni\nl\nn\no\nr\ns\nt\nu\nw\ny\n0\n1\n2\n,\n.\n!\n'\n-\n"
    "the\nhello\nworld\nun\n##able\n##s\n##ing\n##ed\n##a\n##e\n##i\n##o\n##n\n##t\n"
    "\xc3\xa9\n\xe4\xb8\xad\n\xe6\x96\x87\n\xcf\x83\n##\xcf\x82\n\xce\xbf\xce\xb4\n";

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // Both names load_tokenizer reads: ../shared/data's, and scripts/get_data.sh's vocab.txt.
  std::string path = sparq::fuzz::real_vocab_file("bert-vocab/bert-base-uncased-vocab.txt");
  if (path.empty()) path = sparq::fuzz::real_vocab_file("bert-vocab/vocab.txt");
  const bool real = !path.empty();
  if (!real) {
    path = sparq::fuzz::scratch_path(".vocab.txt");
    sparq::fuzz::write_scratch(path, reinterpret_cast<const std::uint8_t*>(kSmallVocab),
                               sizeof(kSmallVocab) - 1);
  }
  auto loaded = sparq::data::WordPieceTokenizer::load(path);
  if (!loaded.is_ok()) sparq::fuzz::property_failed("vocabulary: " + loaded.status().message());
  tokenizer = std::move(loaded).value();
  std::fprintf(stderr, "wordpiece_tokenizer_fuzz: %s vocabulary of %u tokens\n",
               real ? "the real" : "a small", tokenizer->vocab_size());
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  std::vector<std::uint32_t> ids;
  tokenizer->encode(text, &ids);
  for (std::uint32_t id : ids) {
    if (id >= tokenizer->vocab_size()) sparq::fuzz::property_failed("id out of range");
  }
  const std::vector<std::string> tokens = tokenizer->tokenize(text);
  if (tokens.size() != ids.size()) sparq::fuzz::property_failed("tokenize() and encode() disagree");
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (tokens[i] != tokenizer->token(ids[i])) sparq::fuzz::property_failed("token spelling differs");
  }
  (void)tokenizer->decode(ids);
  return 0;
}
