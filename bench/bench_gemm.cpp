// GEMM throughput of every available backend of core/gemm.h (Note [GEMM backends]) on the
// shapes of one training step of GPT-2 124M (B=4, T=256), BERT-base (B=8, T=128), VGG-16
// (B=32, 32x32 images) and GPT-2 tiny (B=8, T=128, vocab 50257), printed side by side next to
// the measured FMA peak, for each thread count asked for; then each model's GEMM time per
// step (sum over its products) per backend. Backends are timed interleaved, best of the
// repetitions, so machine noise hits them alike.
//
//   bench_gemm [--threads 1,2] [--seconds S] [--backends eigen,openblas,blis,avx512]
//              [--models gpt2,bert,vgg,gpt2tiny]
//
// Shapes the layers run inside a parallel region (Conv2d's per-image products and its dW
// column blocks) are timed that way: every thread runs its own product at once ("xT" rows).
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "bench_args.h"
#include "core/cli_args.h"
#include "core/gemm.h"
#include "core/rng.h"
#include "core/threading.h"
#include "core/timer.h"
#include "fma_peak.h"
#include "layers/tied_head_loss.h"

namespace {

using sparq::GemmBackend;
using sparq::GemmShape;

struct Case {
  std::string model, what;
  GemmShape shape;
  float beta = 0.0f;
  bool per_thread = false;  // the layer calls it from inside a parallel region
  double per_step = 1;      // how many times one training step runs it
};

std::vector<std::string> split(const std::string& list) {
  std::vector<std::string> out;
  for (std::size_t start = 0; start <= list.size();) {
    const std::size_t end = std::min(list.find(',', start), list.size());
    if (end > start) out.push_back(list.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

// A Linear [rows, in] -> [rows, out] (linear.cpp): forward Y = X W^T, dX = dY W, dW += dY^T X.
void add_linear(std::vector<Case>& v, const std::string& model, const std::string& name,
                std::int64_t rows, std::int64_t in, std::int64_t out, double count) {
  v.push_back({model, name + " fwd", {false, true, rows, out, in}, 0.0f, false, count});
  v.push_back({model, name + " dX", {false, false, rows, in, out}, 0.0f, false, count});
  v.push_back({model, name + " dW", {true, false, out, in, rows}, 1.0f, false, count});
}

// A transformer: fused QKV, attention output projection, MLP, and the tied vocabulary head
// (tied_head_loss.cpp's logits, dx and dtable products have a Linear's three shapes) on the
// `head_rows` rows it computes and the `vocab` real columns (not the padding): the fused CPU
// head multiplies only the rows with a target (BERT's labelled 15%, gathered; every row of
// GPT-2).
void add_transformer(std::vector<Case>& v, const std::string& model, std::int64_t rows,
                     std::int64_t c, std::int64_t ffn, std::int64_t vocab, int layers,
                     bool mlm_transform, std::int64_t head_rows) {
  add_linear(v, model, "attn.qkv", rows, c, 3 * c, layers);
  add_linear(v, model, "attn.proj", rows, c, c, layers);
  add_linear(v, model, "mlp.fc", rows, c, ffn, layers);
  add_linear(v, model, "mlp.proj", rows, ffn, c, layers);
  if (mlm_transform) add_linear(v, model, "mlm.transform", rows, c, c, 1);
  // The head runs chunk by chunk (TiedHeadLoss::default_chunk_rows): GPT-2's 1024 rows of
  // 50257 columns are a 667-row and a 357-row product. Until 2026-12-06 priced as one
  // product of 1024 rows by the padded 50304 columns, which the head never runs (review).
  const std::int64_t chunk = sparq::TiedHeadLoss::default_chunk_rows(vocab);
  for (std::int64_t first = 0; first < head_rows; first += chunk) {
    const std::int64_t rows_here = std::min(chunk, head_rows - first);
    add_linear(v, model, fmt::format("head {}x{}", rows_here, vocab), rows_here, c, vocab, 1);
  }
}

// VGG-16's 3x3 convolutions as im2col products: one forward and one dX product per image
// (inside the per-image parallel loop), dW over chunks of images in column blocks. Since
// Winograd F(2x2, 3x3) (conv3x3_winograd.h) conv2d.cpp runs im2col only for the first layer
// (fewer than 16 input channels); the other twelve run Winograd's a^2 smaller GEMMs per
// tile chunk, which these rows do not model (review, 2026-12-06): the vgg rows compare GEMM
// backends on im2col shapes, not VGG's step as it now runs.
void add_vgg(std::vector<Case>& v, std::int64_t batch) {
  const char* layout = "64,64,M,128,128,M,256,256,256,M,512,512,512,M,512,512,512,M";
  std::int64_t channels = 3, size = 32;
  for (const std::string& item : split(layout)) {
    if (item == "M") {
      size /= 2;
      continue;
    }
    const std::int64_t k = std::atoi(item.c_str()), crs = 9 * channels, hw = size * size;
    const std::string name = fmt::format("conv {}->{} {}x{}", channels, k, size, size);
    v.push_back(
        {"vgg", name + " fwd", {false, false, k, hw, crs}, 0.0f, true, static_cast<double>(batch)});
    if (channels != 3) {  // the first layer's input needs no gradient
      v.push_back(
          {"vgg", name + " dX", {true, false, crs, hw, k}, 0.0f, true, static_cast<double>(batch)});
    }
    const std::int64_t images = std::min(std::max<std::int64_t>(256 / hw, 1), batch);
    const std::int64_t ld = images * hw, chunks = (batch + images - 1) / images;
    const std::int64_t blocks = std::max<std::int64_t>(crs / 256, 1);
    const std::int64_t width =
        std::min(((crs + blocks - 1) / blocks + 15) & ~std::int64_t{15}, crs);
    v.push_back({"vgg",
                 name + " dW",
                 {false, true, k, width, ld, ld, ld, crs},
                 1.0f,
                 blocks > 1,
                 static_cast<double>(chunks * blocks)});
    channels = k;
  }
}

std::vector<Case> all_cases(const std::vector<std::string>& models) {
  std::vector<Case> v;
  for (const std::string& m : models) {
    if (m == "gpt2") add_transformer(v, m, 4 * 256, 768, 3072, 50257, 12, false, 4 * 256);
    // BERT's head: the 154 labelled rows of bench_models' batch (round(0.15 * 1024)) by its
    // 30522 tokens (vocab_pad 1). Until 2026-12-06 priced at all 1024 rows and 30528 columns,
    // 6.6 times the products the fused head runs (review).
    else if (m == "bert")
      add_transformer(v, m, 8 * 128, 768, 3072, 30522, 12, true, 154);
    else if (m == "gpt2tiny")
      add_transformer(v, m, 8 * 128, 128, 512, 50257, 4, false, 8 * 128);
    else if (m == "vgg")
      add_vgg(v, 32);
    else {
      fmt::print(stderr, "bench_gemm: unknown model '{}' (gpt2, bert, vgg, gpt2tiny)\n", m);
      std::exit(2);
    }
  }
  return v;
}

// Operands for one shape; each thread of a per-thread case writes its own C.
struct Operands {
  std::vector<float> a, b;
  std::vector<std::vector<float>> c;
  Operands(const GemmShape& s, int copies) {
    const std::int64_t lda = s.lda ? s.lda : (s.trans_a ? s.m : s.k);
    const std::int64_t ldb = s.ldb ? s.ldb : (s.trans_b ? s.k : s.n);
    const std::int64_t ldc = s.ldc ? s.ldc : s.n;
    a.resize((s.trans_a ? s.k : s.m) * lda);
    b.resize((s.trans_b ? s.n : s.k) * ldb);
    sparq::fill_uniform(a.data(), a.size(), -1, 1, 1, 1);
    sparq::fill_uniform(b.data(), b.size(), -1, 1, 1, 2);
    c.assign(copies, std::vector<float>(s.m * ldc, 0.0f));
  }
};

double run_once(const Case& c, Operands& ops, int threads) {
  sparq::Stopwatch sw;
  if (c.per_thread && threads > 1) {
#pragma omp parallel num_threads(threads)
    sparq::gemm(c.shape, 1.0f, ops.a.data(), ops.b.data(), c.beta,
                ops.c[sparq::thread_index()].data());
  } else {
    sparq::gemm(c.shape, 1.0f, ops.a.data(), ops.b.data(), c.beta, ops.c[0].data());
  }
  return sw.seconds();
}

// Best seconds per backend for one case, the backends taking turns.
std::vector<double> time_case(const Case& c, const std::vector<GemmBackend>& backends, int threads,
                              double min_seconds) {
  Operands ops(c.shape, threads);
  std::vector<double> best(backends.size(), 1e30);
  for (std::size_t i = 0; i < backends.size(); ++i) {  // warm-up (loads, packs, pages)
    sparq::set_gemm_backend(backends[i]);
    run_once(c, ops, threads);
  }
  sparq::Stopwatch total;
  for (int rep = 0; rep < 2 || total.seconds() < min_seconds * backends.size(); ++rep) {
    for (std::size_t i = 0; i < backends.size(); ++i) {
      sparq::set_gemm_backend(backends[i]);
      best[i] = std::min(best[i], run_once(c, ops, threads));
    }
  }
  return best;
}

double flops(const Case& c, int threads) {
  return 2.0 * c.shape.m * c.shape.n * c.shape.k * (c.per_thread ? threads : 1);
}

void bench_threads(int threads, const std::vector<Case>& cases,
                   const std::vector<GemmBackend>& backends, double seconds) {
  sparq::set_num_threads(threads);
  // The peak is measured before and after the products and the higher figure kept: on a
  // shared machine one measurement alone is often taken while another process holds a core.
  double peak = sparq::bench::measure_fma_peak_gflops(threads);
  std::string header = fmt::format("{:<9} {:<27} {:>21} {:>5} {:>6}", "model", "product",
                                   "M x N x K (T=trans)", "xT", "/step");
  for (GemmBackend b : backends) header += fmt::format(" {:>9}", sparq::gemm_backend_name(b));
  std::vector<std::pair<std::string, double>> rows;  // text, best GFLOP/s (for %peak)
  // Identical products (GPT-2 and BERT share most) are timed once.
  std::map<std::tuple<bool, bool, std::int64_t, std::int64_t, std::int64_t, std::int64_t, bool>,
           std::vector<double>>
      measured;
  std::map<std::string, std::vector<double>> step_seconds;
  std::vector<std::string> model_order;
  for (const Case& c : cases) {
    const GemmShape& s = c.shape;
    const auto key = std::make_tuple(s.trans_a, s.trans_b, s.m, s.n, s.k, s.ldc, c.per_thread);
    if (!measured.count(key)) measured[key] = time_case(c, backends, threads, seconds);
    const std::vector<double>& best = measured[key];
    const std::string dims =
        fmt::format("{}{}x{}x{}{}", s.trans_a ? "T " : "", s.m, s.n, s.k, s.trans_b ? " T" : "");
    std::string text =
        fmt::format("{:<9} {:<27} {:>21} {:>5} {:>6}", c.model, c.what, dims,
                    c.per_thread && threads > 1 ? fmt::format("x{}", threads) : "", c.per_step);
    double top = 0;
    for (double t : best) {
      text += fmt::format(" {:>9.1f}", flops(c, threads) / t / 1e9);
      top = std::max(top, flops(c, threads) / t / 1e9);
    }
    rows.emplace_back(std::move(text), top);
    if (!step_seconds.count(c.model)) {
      step_seconds[c.model].assign(backends.size(), 0.0);
      model_order.push_back(c.model);
    }
    // A per-thread product runs `threads` at once: per_step of them take per_step/threads turns.
    const double turns = c.per_thread && threads > 1 ? c.per_step / threads : c.per_step;
    for (std::size_t i = 0; i < best.size(); ++i) step_seconds[c.model][i] += turns * best[i];
  }
  peak = std::max(peak, sparq::bench::measure_fma_peak_gflops(threads));
  fmt::print("\n== {} thread(s); measured FMA peak {:.1f} GFLOP/s; GFLOP/s per backend ==\n",
             threads, peak);
  fmt::print("{} {:>6}\n", header, "%peak");
  for (const auto& [text, top] : rows) fmt::print("{} {:>5.0f}%\n", text, 100.0 * top / peak);
  fmt::print("\nGEMM ms per training step ({} thread(s); lower is better; vs = eigen / backend)\n",
             threads);
  for (const std::string& m : model_order) {
    const std::vector<double>& t = step_seconds[m];
    fmt::print("{:<9}", m);
    for (std::size_t i = 0; i < t.size(); ++i) {
      fmt::print("  {} {:8.1f} ms (vs {:.2f})", sparq::gemm_backend_name(backends[i]), 1e3 * t[i],
                 t[0] / t[i]);
    }
    fmt::print("\n");
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string thread_list = "1,2", backend_list = "eigen,openblas,blis,avx512",
              model_list = "gpt2,bert,vgg,gpt2tiny";
  double seconds = 0.2;
  for (int i = 1; i < argc; i += 2) {
    if (i + 1 >= argc) {  // a trailing option was dropped without a word (review, 2026-12-06)
      fmt::print(stderr, "bench_gemm: {} needs a value\n", argv[i]);
      return 2;
    }
    if (!std::strcmp(argv[i], "--threads"))
      thread_list = argv[i + 1];
    else if (!std::strcmp(argv[i], "--seconds")) {
      char* end = nullptr;
      seconds = std::strtod(argv[i + 1], &end);
      if (end == argv[i + 1] || *end != '\0') seconds = -1;  // refused below
    } else if (!std::strcmp(argv[i], "--backends"))
      backend_list = argv[i + 1];
    else if (!std::strcmp(argv[i], "--models"))
      model_list = argv[i + 1];
    else {
      fmt::print(stderr,
                 "unknown option {}\nusage: bench_gemm [--threads 1,2] [--seconds S] "
                 "[--backends eigen,openblas,blis,avx512] [--models gpt2,bert,vgg,gpt2tiny]\n",
                 argv[i]);
      return 2;
    }
  }
  for (const auto& [flag, list] :
       {std::pair<const char*, const std::string*>{"--models", &model_list},
        {"--backends", &backend_list},
        {"--threads", &thread_list}}) {
    if (const std::string twice = sparq::cli::first_repeated(split(*list)); !twice.empty()) {
      fmt::print(stderr, "bench_gemm: {} lists '{}' twice\n", flag, twice);
      return 2;
    }
  }
  // Eigen first: the "vs" column compares against it.
  std::vector<GemmBackend> backends = {GemmBackend::kEigen};
  for (const std::string& name : split(backend_list)) {
    const GemmBackend b = sparq::parse_gemm_backend(name, "--backends");
    if (b == GemmBackend::kEigen) continue;
    std::string why;
    if (!sparq::gemm_backend_available(b, &why)) {
      fmt::print("bench_gemm: {} skipped, not installed ({})\n", name, why);
      continue;
    }
    fmt::print("bench_gemm: {} from {}\n", name, sparq::gemm_backend_library(b));
    backends.push_back(b);
  }
  // Thread counts and --seconds checked whole: "1,x" ran the 1-thread table twice and
  // "--seconds abc" timed for 0 s (review, 2026-12-06).
  std::vector<int> thread_counts;
  for (const std::string& t : split(thread_list)) {
    const auto count = sparq::bench::whole_arg(t, 1);  // bench_args.h
    if (!count || *count > 4096) {
      fmt::print(stderr, "bench_gemm: --threads: '{}' is not a list of counts >= 1\n", thread_list);
      return 2;
    }
    thread_counts.push_back(static_cast<int>(*count));
  }
  if (thread_counts.empty() || !(seconds > 0 && seconds < 1e6)) {
    fmt::print(stderr, "bench_gemm: --threads needs a count and --seconds a positive time\n");
    return 2;
  }
  const GemmBackend active = sparq::gemm_backend();
  const std::vector<Case> cases = all_cases(split(model_list));
  for (const int threads : thread_counts) bench_threads(threads, cases, backends, seconds);
  sparq::set_gemm_backend(active);
  return 0;
}
