// Forward+backward time of every layer at GPT-2-124M shapes (B=4, T=256, C=768, 12 heads,
// vocab 50304; cross_entropy: contiguous [1024, 50257] logits on both sides, GPT-2's real
// vocabulary; attention_padded: BERT-base's B=8, T=128 with a key-padding mask) and VGG-16
// shapes (B=32; 64 channels at 32x32 for every layer kind, and the deeper convolutions: 128
// at 16x16 down to 512 at 2x2), next to PyTorch's
// time for the same op measured by bench/bench_layers_torch.py on the same machine. The
// ratio is sparq's time / PyTorch's (below 1: sparq is faster).
//
//   /usr/bin/python3 bench/bench_layers_torch.py --threads 2 --out torch.txt
//   bench_layers --threads 2 [--torch-results torch.txt] [--seconds 1]
//
// torch.txt starts with a header line saying how it was made (bench_layers_torch.py's
// kHeaderTag line: threads, seconds, torch version and the shapes), and bench_layers refuses a
// file without one or made with another thread count or other shapes (review, 2026-12-06).
#include <fmt/format.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "bench_args.h"
#include "core/rng.h"
#include "core/threading.h"
#include "core/timer.h"
#include "layers/activation.h"
#include "layers/attention.h"
#include "layers/batch_norm.h"
#include "layers/conv2d.h"
#include "layers/cross_entropy.h"
#include "layers/dropout.h"
#include "layers/embedding.h"
#include "layers/layer_norm.h"
#include "layers/linear.h"
#include "layers/pooling.h"
#include "layers/residual.h"

namespace {

using namespace sparq;

constexpr std::int64_t kB = 4, kT = 256, kC = 768, kH = 12, kV = 50304;
constexpr std::int64_t kValidV = 50257;  // GPT-2's real tokens: cross_entropy's logits' width
constexpr std::int64_t kN = 32, kCh = 64, kHW = 32;
constexpr std::int64_t kBertB = 8, kBertT = 128;

// The shapes word of torch.txt's header: bench_layers_torch.py writes the same from its own
// constants, so a file made for other shapes is refused.
std::string shapes_word() {
  return fmt::format("B={},T={},C={},H={},V={},ce={}x{},N={},CH={},HW={},bertB={},bertT={}", kB, kT,
                     kC, kH, kV, kB * kT, kValidV, kN, kCh, kHW, kBertB, kBertT);
}
constexpr const char* kHeaderTag = "#bench_layers_torch";

// Reads torch.txt: the header (checked against `threads` and the shapes; its words are
// returned in `made`), then "name ms" lines. False with a message on stderr when refused.
bool read_torch_results(const std::string& path, int threads, std::map<std::string, double>* ms,
                        std::string* made) {
  std::ifstream in(path);
  if (!in) {
    fmt::print(stderr, "cannot read torch results '{}'\n", path);
    return false;
  }
  const std::string remake = fmt::format(
      "make it again: /usr/bin/python3 bench/bench_layers_torch.py --threads {} --out {}", threads,
      path);
  std::string header;
  std::getline(in, header);
  std::istringstream words(header);
  std::string tag;
  words >> tag;
  if (tag != kHeaderTag) {
    fmt::print(stderr,
               "bench_layers: '{}' has no '{}' header line (a file from before "
               "2026-12-06, or not bench_layers_torch.py's): how it was made is unknown; {}\n",
               path, kHeaderTag, remake);
    return false;
  }
  std::map<std::string, std::string> keys;
  for (std::string word; words >> word;) {
    const std::size_t eq = word.find('=');
    if (eq != std::string::npos) keys[word.substr(0, eq)] = word.substr(eq + 1);
  }
  if (keys["threads"] != std::to_string(threads)) {
    fmt::print(stderr, "bench_layers: '{}' was made with threads={}, this run has {}; {}\n", path,
               keys["threads"].empty() ? "?" : keys["threads"], threads, remake);
    return false;
  }
  if (keys["shapes"] != shapes_word()) {
    fmt::print(stderr, "bench_layers: '{}' was made for shapes {}, this binary times {}; {}\n",
               path, keys["shapes"].empty() ? "?" : keys["shapes"], shapes_word(), remake);
    return false;
  }
  // The peer's BLAS as it loaded it (bench/torch_blas.py): on the reference BLAS its times
  // are 20-40x too slow and every ratio flatters sparq (review, 2026-12-07).
  if (keys["blas"].empty()) {
    fmt::print(stderr,
               "bench_layers: '{}' does not record the BLAS PyTorch ran on (a file from before "
               "2026-12-07); {}\n",
               path, remake);
    return false;
  }
  // As bench_models does: the reference BLAS, or one not identified, is no comparison.
  if (keys["blas"].starts_with("reference") || keys["blas"].starts_with("unknown")) {
    fmt::print(
        stderr,
        "bench_layers: '{}' was timed on {} ({}), where PyTorch may run 20-40x below "
        "its speed; install libopenblas0-pthread (or select OpenBLAS or BLIS as "
        "libblas.so.3) and {}\n",
        path,
        keys["blas"].starts_with("reference") ? "the reference BLAS" : "a BLAS not identified",
        keys["blas"], remake);
    return false;
  }
  *made = header.substr(tag.size() + 1);
  std::string name;
  double value;
  while (in >> name >> value) (*ms)[name] = value;
  return true;
}

struct Arena {  // one vector per tensor, filled with N(0, 1)
  std::vector<std::vector<float>> store;
  Tensor make(Shape s) {
    store.emplace_back(s.numel());
    fill_normal(store.back().data(), store.back().size(), 0, 1, 7, store.size());
    return Tensor(store.back().data(), DType::kF32, s);
  }
};

double time_ms(const std::function<void()>& step, double seconds) {
  step();  // warm-up
  double best = 1e30;
  Stopwatch total;
  int reps = 0;
  while (total.seconds() < seconds || reps < 3) {
    Stopwatch sw;
    step();
    best = std::min(best, sw.millis());
    ++reps;
  }
  return best;
}

template <typename L>
ParamStore bind(L& layer) {
  ParamStore store;
  layer.declare(store);
  store.allocate();
  store.initialize(1);
  layer.bind(store);
  return store;
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 2;
  double seconds = 1.0;
  std::string torch_file;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--threads" && i + 1 < argc) {
      const auto n = sparq::bench::whole_arg(argv[++i], 1);
      if (!n || *n > 4096) return sparq::bench::refuse_arg("bench_layers", a, argv[i], "1 to 4096");
      threads = static_cast<int>(*n);
    } else if (a == "--seconds" && i + 1 < argc) {
      const auto s = sparq::bench::positive_arg(argv[++i]);
      if (!s)
        return sparq::bench::refuse_arg("bench_layers", a, argv[i], "a number of seconds > 0");
      seconds = *s;
    } else if (a == "--torch-results" && i + 1 < argc)
      torch_file = argv[++i];
    else {
      fmt::print(stderr,
                 "usage: bench_layers [--threads N] [--seconds S] [--torch-results FILE]\n");
      return 2;
    }
  }
  set_num_threads(threads);
  std::map<std::string, double> torch_ms;
  std::string torch_made;
  if (!torch_file.empty() && !read_torch_results(torch_file, threads, &torch_ms, &torch_made)) {
    return 1;
  }

  Arena a;
  const Shape tok{kB, kT, kC}, img{kN, kCh, kHW, kHW};
  const DropoutStep step{1, 0, 0, true};
  std::vector<std::pair<std::string, std::function<void()>>> cases;

  Linear qkv("qkv", {kC, 3 * kC}), fc("fc", {kC, 4 * kC}), proj("proj", {4 * kC, kC});
  ParamStore s1 = bind(qkv), s2 = bind(fc), s3 = bind(proj);
  Tensor x = a.make(tok), dx = a.make(tok), y3 = a.make({kB, kT, 3 * kC}),
         y4 = a.make({kB, kT, 4 * kC}), dy4 = a.make({kB, kT, 4 * kC}),
         dx4 = a.make({kB, kT, 4 * kC}), y = a.make(tok), dy = a.make(tok);
  cases.push_back({"linear_768x2304", [&] {
                     qkv.forward(x, y3);
                     qkv.backward(x, y3, dx);
                   }});
  cases.push_back({"linear_768x3072", [&] {
                     fc.forward(x, y4);
                     fc.backward(x, dy4, dx);
                   }});
  cases.push_back({"linear_3072x768", [&] {
                     proj.forward(y4, y);
                     proj.backward(y4, dy, dx4);
                   }});
  LayerNorm ln("ln", {kC, 1e-5f, kB * kT});
  ParamStore s4 = bind(ln);
  cases.push_back({"layernorm", [&] {
                     ln.forward(x, y);
                     ln.backward(x, dy, dx);
                   }});
  Gelu gelu(GeluKind::kTanh);
  cases.push_back({"gelu_tanh", [&] {
                     gelu.forward(y4, dx4);
                     gelu.backward(y4, dy4, dx4);
                   }});
  Dropout drop("drop", 0.1f, 1);
  cases.push_back({"dropout", [&] {
                     drop.forward(x, y, step);
                     drop.backward(dy, dx, step);
                   }});
  Residual res;
  cases.push_back({"residual", [&] {
                     res.forward(x, dy, y);
                     res.backward(dy, dx, y);
                   }});
  MultiHeadAttention mha("attn", {kC, kH, kT, kB, true, 0.0f, 2});
  ParamStore s5 = bind(mha);
  cases.push_back({"attention_causal", [&] {
                     mha.forward(x, y, Tensor(), step);
                     mha.backward(x, dy, dx, step);
                   }});
  // BERT-base's attention (B=8, T=128, bidirectional), sequence b padded after T - 13 b tokens.
  MultiHeadAttention bert_mha("bert_attn", {kC, kH, kBertT, kBertB, false, 0.0f, 3});
  ParamStore s5b = bind(bert_mha);
  const Shape bert_tok{kBertB, kBertT, kC};
  Tensor xb = a.make(bert_tok), yb = a.make(bert_tok), dyb = a.make(bert_tok),
         dxb = a.make(bert_tok);
  std::vector<std::uint8_t> bert_valid(kBertB * kBertT, 1);
  for (std::int64_t b = 0; b < kBertB; ++b) {
    for (std::int64_t j = kBertT - 13 * b; j < kBertT; ++j) bert_valid[b * kBertT + j] = 0;
  }
  const Tensor bert_mask(bert_valid.data(), DType::kU8, {kBertB, kBertT});
  cases.push_back({"attention_padded", [&] {
                     bert_mha.forward(xb, yb, bert_mask, step);
                     bert_mha.backward(xb, dyb, dxb, step);
                   }});
  Embedding wte("wte", {kV, kC});
  ParamStore s6 = bind(wte);
  std::vector<std::int32_t> ids(kB * kT);
  for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<std::int32_t>((i * 7919) % kV);
  const Tensor idv(ids.data(), DType::kI32, {kB, kT});
  cases.push_back({"embedding", [&] {
                     wte.forward(idv, y);
                     wte.backward(idv, dy);
                   }});
  // Contiguous [rows, 50257] logits, as PyTorch's side has them: until 2026-12-06 sparq read
  // 50257 columns of [rows, 50304] and PyTorch paid for a strided slice's copy (review).
  Tensor logits = a.make({kB * kT, kValidV}), dlogits = a.make({kB * kT, kValidV});
  CrossEntropy ce("ce", {kValidV, kValidV, -100, kB * kT});
  std::vector<std::int32_t> tgt(ids);
  for (auto& t : tgt) t %= kValidV;
  const Tensor targets(tgt.data(), DType::kI32, {kB * kT});
  cases.push_back({"cross_entropy", [&] { ce.forward_backward(logits, targets, dlogits); }});

  Conv2d conv("conv", {kCh, kCh, 3, 3, 1, 1, 1, true, kHW, kHW});
  ParamStore s7 = bind(conv);
  Tensor xi = a.make(img), yi = a.make(img), dyi = a.make(img), dxi = a.make(img);
  cases.push_back({"conv3x3_64", [&] {
                     conv.forward(xi, yi);
                     conv.backward(xi, dyi, dxi);
                   }});
  // VGG-16's deeper convolutions (B=32): where small maps and many channels meet.
  std::vector<std::unique_ptr<Conv2d>> deep_convs;
  std::vector<ParamStore> deep_stores;
  deep_stores.reserve(4);
  for (const auto& [ch, hw] : {std::pair{128, 16}, {256, 8}, {512, 4}, {512, 2}}) {
    deep_convs.push_back(std::make_unique<Conv2d>(
        "conv" + std::to_string(ch), Conv2d::Config{ch, ch, 3, 3, 1, 1, 1, true, hw, hw}));
    Conv2d& c = *deep_convs.back();
    deep_stores.push_back(bind(c));
    const Shape s{kN, ch, hw, hw};
    Tensor cx = a.make(s), cy = a.make(s), cdy = a.make(s), cdx = a.make(s);
    cases.push_back({fmt::format("conv3x3_{}_{}x{}", ch, hw, hw), [&c, cx, cy, cdy, cdx] {
                       c.forward(cx, cy);
                       c.backward(cx, cdy, cdx);
                     }});
  }
  BatchNorm2d bn("bn", {kCh});
  ParamStore s8 = bind(bn);
  cases.push_back({"batchnorm2d", [&] {
                     bn.forward(xi, yi, true);
                     bn.backward(xi, dyi, dxi);
                   }});
  Relu relu;
  cases.push_back({"relu", [&] {
                     relu.forward(xi, yi);
                     relu.backward(yi, dyi, dxi);
                   }});
  MaxPool2d pool("pool", {kCh, kHW, kHW, 2, 2, 0, kN});
  Tensor yp = a.make({kN, kCh, kHW / 2, kHW / 2}), dyp = a.make({kN, kCh, kHW / 2, kHW / 2});
  cases.push_back({"maxpool2x2", [&] {
                     pool.forward(xi, yp);
                     pool.backward(dyp, dxi);
                   }});

  fmt::print("sparq layers, forward+backward, best of >= {:.1f} s, {} threads\n", seconds, threads);
  if (!torch_file.empty()) fmt::print("torch ms from {}: {}\n", torch_file, torch_made);
  fmt::print("ratio = sparq ms / torch ms (below 1: sparq faster)\n");
  fmt::print("{:<18} {:>11} {:>11} {:>8}\n", "layer", "sparq ms", "torch ms", "ratio");
  for (auto& [name, fn] : cases) {
    const double ms = time_ms(fn, seconds);
    auto it = torch_ms.find(name);
    if (it == torch_ms.end()) {
      fmt::print("{:<18} {:>11.3f} {:>11} {:>8}\n", name, ms, "-", "-");
    } else {
      fmt::print("{:<18} {:>11.3f} {:>11.3f} {:>7.2f}x\n", name, ms, it->second, ms / it->second);
    }
  }
  return 0;
}
