// GEMM throughput of sparq's CPU path (core/gemm.h) on the shapes of a GPT-2 124M step
// (B=4, T=256, so 1024 token rows), printed next to the measured FMA peak of this machine.
//
//   bench_gemm [--threads N] [--seconds S]
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/gemm.h"
#include "core/rng.h"
#include "core/threading.h"
#include "core/timer.h"
#include "fma_peak.h"

namespace {

struct Case {
  const char* what;
  sparq::GemmShape shape;
};

double time_gemm(const sparq::GemmShape& s, double min_seconds) {
  const std::size_t rows_a = s.trans_a ? s.k : s.m, rows_b = s.trans_b ? s.n : s.k;
  std::vector<float> a(rows_a * (s.trans_a ? s.m : s.k)), b(rows_b * (s.trans_b ? s.k : s.n)),
      c(s.m * s.n);
  sparq::fill_uniform(a.data(), a.size(), -1, 1, 1, 1);
  sparq::fill_uniform(b.data(), b.size(), -1, 1, 1, 2);
  sparq::gemm(s, 1.0f, a.data(), b.data(), 0.0f, c.data());  // warm-up
  double best = 1e30;
  sparq::Stopwatch total;
  int reps = 0;
  while (total.seconds() < min_seconds || reps < 3) {
    sparq::Stopwatch sw;
    sparq::gemm(s, 1.0f, a.data(), b.data(), 0.0f, c.data());
    best = std::min(best, sw.seconds());
    ++reps;
  }
  return 2.0 * s.m * s.n * s.k / best / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  int threads = sparq::max_threads();
  double seconds = 1.0;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--threads")) threads = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--seconds")) seconds = std::atof(argv[i + 1]);
    else {
      fmt::print(stderr, "unknown option {}\nusage: bench_gemm [--threads N] [--seconds S]\n", argv[i]);
      return 2;
    }
  }
  sparq::set_num_threads(threads);
  const double peak = sparq::bench::measure_fma_peak_gflops(threads);
  fmt::print("bench_gemm: {} thread(s); measured FMA peak {:.1f} GFLOP/s\n\n", threads, peak);

  // Rows = B*T = 1024 tokens. Forward: X[1024, in] * W^T; backward: dX = dY * W,
  // dW = dY^T * X. The headline shape is 768 x 768 x (4*256).
  const Case cases[] = {
      {"attn.proj fwd   768x768x1024 (headline)", {true, false, 768, 768, 1024}},
      {"attn.proj fwd   Y=XW^T 1024x768x768", {false, true, 1024, 768, 768}},
      {"attn.qkv  fwd   1024x2304x768", {false, true, 1024, 2304, 768}},
      {"mlp.fc    fwd   1024x3072x768", {false, true, 1024, 3072, 768}},
      {"mlp.proj  fwd   1024x768x3072", {false, true, 1024, 768, 3072}},
      {"mlp.fc    dX    1024x768x3072", {false, false, 1024, 768, 3072}},
      {"mlp.fc    dW    3072x768x1024", {true, false, 3072, 768, 1024}},
      {"lm_head   fwd   1024x50304x768", {false, true, 1024, 50304, 768}},
  };
  fmt::print("{:<42} {:>10} {:>10} {:>8}\n", "shape (M x N x K)", "GFLOP/s", "peak", "ratio");
  for (const Case& c : cases) {
    const double g = time_gemm(c.shape, seconds);
    fmt::print("{:<42} {:>10.1f} {:>10.1f} {:>7.1f}%\n", c.what, g, peak, 100.0 * g / peak);
  }
  return 0;
}
