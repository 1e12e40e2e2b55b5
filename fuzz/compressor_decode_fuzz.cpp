// Every compressor of the registry (several configurations each), several bucket sizes,
// arbitrary message bytes. Input: byte 0 picks the configuration, byte 1 the size, byte 2
// the decode mode (bit 0), the sender's rank (bits 1-2), a matrix layout (bit 3: for
// compressors that take one, set_layout() with several matrices and dense floats between
// them instead of the default plan) and the step (bits 4-7), byte 3 the step's density (0:
// the configured one); the rest is the message.
// Each input gets a fresh compressor, warmed up by encoding a fixed non-zero span (powersgd
// plans its layout and its warm-started Q holds a real power-iteration factor, not the zeros
// an all-zero span would leave), so that every input reproduces on its own: no state carries
// over from earlier inputs.
// Properties:
//   1. check_message() OK => decode() neither aborts nor touches memory outside the message
//      and the output span (ASan; both are exactly-sized heap buffers). For blockquant and
//      lbs, whose values are f16-scaled codes, the output is also finite. (Other messages
//      carry raw floats, where inf/NaN are legitimate: see Compressor::check_message.)
//   2. The rest of the input as floats (non-finite ones zeroed), encoded: check_message()
//      of that message passes, and it decodes.
// The largest valid input (none at n = 4099) is 4 + 16396 bytes: scripts/fuzz.sh raises
// libFuzzer's -max_len for this target, and the seeds include n = 4099.
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "compress/registry.h"
#include "fuzz_util.h"

namespace {

using sparq::compress::Compressor;
using sparq::compress::DecodeMode;
using sparq::compress::EncodeContext;
using Params = std::map<std::string, std::string>;

struct Case {
  std::string name;
  Params params;
  bool finite_output = false;  // property 1's finiteness holds
};

const std::vector<Case>& cases() {
  static const std::vector<Case> all = {
      {"none", {}},
      {"fp16", {}},
      {"bf16", {}},
      {"topk", {{"density", "0.05"}}},
      {"topk", {{"density", "0.9"}}},  // bitmap indices
      {"topk_sampled", {{"density", "0.1"}}},
      {"gtopk", {{"density", "0.05"}}},
      {"randomk", {{"density", "0.1"}}},
      {"threshold", {{"threshold", "0.5"}}},
      {"qsgd", {{"levels", "7"}, {"chunk", "64"}}},
      {"qsgd", {{"levels", "127"}, {"chunk", "8"}}},
      {"terngrad", {}},
      {"signsgd", {}},
      {"onebit", {}},
      {"powersgd", {{"rank", "2"}, {"min_compress_numel", "16"}}},
      {"dgc", {{"density", "0.05"}}},
      {"blockquant", {{"bits", "4"}}, true},
      {"blockquant", {{"bits", "2"}, {"block", "8"}}, true},
      {"blockquant", {{"bits", "3"}, {"block", "64"}, {"rounding", "stochastic"}}, true},
      {"blockquant", {{"bits", "8"}, {"block", "16"}}, true},
      {"lbs", {}, true},
      {"lbs", {{"density", "0.5"}, {"bits", "2"}, {"selection", "sampled"}}, true},
      {"lbs", {{"density", "0.3"}, {"bits", "8"}, {"rounding", "stochastic"}}, true}};
  return all;
}

constexpr std::size_t kSizes[] = {1, 7, 8, 64, 1000, 4099};
constexpr std::size_t kNumSizes = sizeof(kSizes) / sizeof(kSizes[0]);

// The context of the warm-up encode and of the seeds.
EncodeContext base_context() {
  EncodeContext ctx;
  ctx.seed = 12345;
  ctx.bucket_id = 3;
  ctx.world_size = 4;
  return ctx;
}

// A fixed non-zero span of n floats, different for each configuration.
std::vector<float> wave(std::size_t c, std::size_t n) {
  std::vector<float> a(n);
  for (std::size_t i = 0; i < n; ++i) a[i] = std::sin(0.37f * static_cast<float>(i + c));
  return a;
}

// A layout of n floats: one dense float, matrix A [n/2 as a near square], B [2, 3] (below
// powersgd's min_compress_numel here: sent dense), a dense float, C [k, 2k] in about half of
// the rest, then a dense tail. Segments that do not fit are left out; listed out of order.
std::vector<sparq::compress::MatrixSegment> fuzz_layout(std::size_t n) {
  std::vector<sparq::compress::MatrixSegment> segments;
  std::size_t pos = 1;
  const auto add = [&](std::size_t rows, std::size_t cols, std::size_t gap) {
    if (rows == 0 || cols == 0 || pos + gap + rows * cols > n) return;
    segments.insert(segments.begin(),
                    {"m" + std::to_string(segments.size()), pos + gap, rows, cols});
    pos += gap + rows * cols;
  };
  const std::size_t c = static_cast<std::size_t>(std::sqrt(static_cast<double>(n / 2)));
  if (c > 0) add(n / 2 / c, c, 0);
  add(2, 3, 0);
  const std::size_t k = n > pos + 1 ? static_cast<std::size_t>(std::sqrt((n - pos - 1) / 4.0)) : 0;
  add(k, 2 * k, 1);
  return segments;
}

// A fresh instance of configuration c for n floats (every compressor serves one bucket and
// may keep state, compressor.h), with the layout above when `layout` and it takes one.
std::unique_ptr<Compressor> make(std::size_t c, std::size_t n, bool layout) {
  sparq::compress::CompressConfig config;
  config.name = cases()[c].name;
  config.params = cases()[c].params;
  auto result = sparq::compress::make_compressor(config);
  if (!result.is_ok()) sparq::fuzz::property_failed("config: " + result.status().message());
  std::unique_ptr<Compressor> made = std::move(result).value();
  if (layout && made->capabilities().needs_matrix_layout) {
    const sparq::Status s = made->set_layout(n, fuzz_layout(n));
    if (!s.is_ok()) sparq::fuzz::property_failed("set_layout: " + s.message());
  }
  sparq::compress::Message msg;
  made->encode(wave(c, n), base_context(), msg);
  return made;
}

std::string label(std::size_t c, std::size_t n) {
  std::string s = cases()[c].name;
  for (const auto& [k, v] : cases()[c].params) s += " " + k + "=" + v;
  return s + " n=" + std::to_string(n);
}

}  // namespace

// With SPARQ_FUZZ_WRITE_SEEDS=DIR: writes one seed per configuration and size (7, 64, 1000
// and 4099 floats; compressors that take a matrix layout also with it, "_layout"), an
// encoded message behind its 4 selector bytes (fuzz/make_corpus.py): the warm-up's span
// encoded again, as the fuzzer's property 2 encodes on a warmed-up instance.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const char* dir = std::getenv("SPARQ_FUZZ_WRITE_SEEDS");
  if (!dir || !*dir) return 0;
  for (std::size_t ci = 0; ci < cases().size(); ++ci) {
    for (std::size_t si : {1, 3, 4, 5}) {
      const std::size_t n = kSizes[si];
      for (const bool layout : {false, true}) {
        auto c = make(ci, n, layout);
        if (layout && !c->capabilities().needs_matrix_layout) continue;
        sparq::compress::Message msg;
        c->encode(wave(ci, n), base_context(), msg);
        std::vector<std::uint8_t> seed = {static_cast<std::uint8_t>(ci),
                                          static_cast<std::uint8_t>(si),
                                          static_cast<std::uint8_t>(layout ? 8 : 0), 0};
        seed.insert(seed.end(), msg.begin(), msg.end());
        const std::string path = std::string(dir) + "/" + cases()[ci].name + "_" +
                                 std::to_string(ci) + "_n" + std::to_string(n) +
                                 (layout ? "_layout" : "");
        sparq::fuzz::write_scratch(path, seed.data(), seed.size());
      }
    }
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 4) return 0;
  const std::size_t ci = data[0] % cases().size(), si = data[1] % kNumSizes;
  const std::size_t n = kSizes[si];
  const std::unique_ptr<Compressor> made = make(ci, n, (data[2] & 8) != 0);
  Compressor& c = *made;
  EncodeContext ctx = base_context();
  ctx.step = data[2] >> 4;
  ctx.rank = (data[2] >> 1) & 3;
  if (data[3] != 0 && c.density()) ctx.density = data[3] / 256.0;
  const DecodeMode mode = (data[2] & 1) ? DecodeMode::kAdd : DecodeMode::kSet;
  // Exactly-sized copies, so that ASan sees any access past the message or the output.
  const std::vector<std::uint8_t> msg(data + 4, data + size);
  std::vector<float> out(n, 0.25f);

  if (c.check_message(msg, n, ctx).is_ok()) {
    c.decode(msg, out, 0.5f, mode, ctx);
    if (cases()[ci].finite_output) {
      for (float v : out) {
        if (!std::isfinite(v)) {
          sparq::fuzz::property_failed(label(ci, n) + ": an accepted message decodes to " +
                                       std::to_string(v));
        }
      }
    }
  }

  // Property 2: what encode() makes is always accepted.
  std::vector<float> a(n, 0.0f);
  for (std::size_t i = 0; i < n && !msg.empty(); ++i) {
    std::uint8_t word[4];
    for (std::size_t b = 0; b < 4; ++b) word[b] = msg[(4 * i + b) % msg.size()];
    float x;
    std::memcpy(&x, word, 4);
    a[i] = std::isfinite(x) ? x : 0.0f;
  }
  sparq::compress::Message encoded;
  c.encode(a, ctx, encoded);
  const sparq::Status s = c.check_message(encoded, n, ctx);
  if (!s.is_ok()) {
    sparq::fuzz::property_failed(label(ci, n) +
                                 ": check_message rejects encode()'s own message: " + s.message());
  }
  c.decode(encoded, out, 1.0f, DecodeMode::kSet, ctx);
  return 0;
}
