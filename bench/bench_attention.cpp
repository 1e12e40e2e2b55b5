// The CPU attention core, forward+backward: the flash kernel (production) against the
// materialized one (probs [B, H, T, T] and whole-head GEMMs) in the same run, interleaved
// rep by rep so machine drift hits both alike. Shapes: GPT-2 124M (B=4, T=256, C=768,
// H=12, causal), BERT-base (B=8, T=128, bidirectional, with and without a padding mask).
//
//   bench_attention [--threads N] [--reps R]
//
// Prints the median time of each kernel and the median of the per-rep ratios flash/materialized.
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "bench_args.h"
#include "core/rng.h"
#include "core/threading.h"
#include "core/timer.h"
#include "layers/attention_kernels.h"

namespace {

using namespace sparq;

// The middle value, or the mean of the two middle ones (an even count took the upper one).
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t m = v.size() / 2;
  return v.size() % 2 == 1 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

struct BenchShape {
  const char* name;
  std::int64_t batch, seq, dim, heads;
  bool causal, padded;
};

void run(const BenchShape& s, int threads, int reps) {
  const std::int64_t tokens = s.batch * s.seq, bhtt = s.batch * s.heads * s.seq * s.seq;
  std::vector<float> qkv(tokens * 3 * s.dim), dctx(tokens * s.dim), ctx(tokens * s.dim),
      dqkv(qkv.size()), lse(s.batch * s.heads * s.seq), probs(bhtt);
  fill_normal(qkv.data(), qkv.size(), 0, 1, 3, 1);
  fill_normal(dctx.data(), dctx.size(), 0, 1, 3, 2);
  // Padded batches: sequence b keeps its first T - 13 b tokens.
  std::vector<std::uint8_t> valid(tokens, 1);
  for (std::int64_t b = 0; b < s.batch; ++b) {
    for (std::int64_t j = std::max<std::int64_t>(1, s.seq - 13 * b); j < s.seq; ++j) {
      valid[b * s.seq + j] = 0;
    }
  }
  AttentionGeom g;
  g.batch = s.batch, g.seq = s.seq, g.dim = s.dim, g.heads = s.heads, g.causal = s.causal;
  g.key_valid = s.padded ? valid.data() : nullptr;
  std::vector<float> flash_scratch(threads * cpu::attention_scratch_per_slot(s.seq, s.dim / s.heads));
  std::vector<float> mat_scratch(threads * cpu::attention_materialized_scratch_per_slot(s.seq));
  const std::function<void()> flash = [&] {
    cpu::attention_forward<float>(g, qkv.data(), lse.data(), ctx.data(), flash_scratch.data(), threads);
    cpu::attention_backward<float>(g, qkv.data(), ctx.data(), lse.data(), dctx.data(), dqkv.data(),
                                   flash_scratch.data(), threads);
  };
  const std::function<void()> materialized = [&] {
    cpu::attention_forward_materialized<float>(g, qkv.data(), probs.data(), ctx.data(),
                                               mat_scratch.data(), threads);
    cpu::attention_backward_materialized<float>(g, qkv.data(), probs.data(), dctx.data(),
                                                dqkv.data(), mat_scratch.data(), threads);
  };
  flash();
  materialized();
  std::vector<double> tf, tm, ratio;
  // The two run in turn, first one then the other on alternate repetitions, so that neither
  // always finds the caches and clocks the other left (review, 2026-12-07: flash ran first).
  const auto timed = [](const std::function<void()>& f) {
    Stopwatch watch;
    f();
    return watch.millis();
  };
  for (int r = 0; r < reps; ++r) {
    double f_ms = 0, m_ms = 0;
    if (r % 2 == 0) {
      f_ms = timed(flash);
      m_ms = timed(materialized);
    } else {
      m_ms = timed(materialized);
      f_ms = timed(flash);
    }
    tf.push_back(f_ms);
    tm.push_back(m_ms);
    ratio.push_back(f_ms / m_ms);
  }
  fmt::print("{:<22} {:>9.2f} {:>9.2f} {:>7.3f}  (cache: lse {} KiB, probs {} KiB)\n", s.name,
             median(tm), median(tf), median(ratio), lse.size() * 4 / 1024, probs.size() * 4 / 1024);
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 2, reps = 9;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--threads" && i + 1 < argc) {
      const auto n = sparq::bench::whole_arg(argv[++i], 1);
      if (!n || *n > 4096)
        return sparq::bench::refuse_arg("bench_attention", a, argv[i], "1 to 4096");
      threads = static_cast<int>(*n);
    } else if (a == "--reps" && i + 1 < argc) {
      const auto n = sparq::bench::whole_arg(argv[++i], 1);
      if (!n || *n > 1000000) {
        return sparq::bench::refuse_arg("bench_attention", a, argv[i], "1 to 1000000");
      }
      reps = static_cast<int>(*n);
    } else {
      fmt::print(stderr, "usage: bench_attention [--threads N] [--reps R]\n");
      return 2;
    }
  }
  // 0 reps read an empty vector's median, 0 threads sized the scratch for none: both crashed
  // (review, 2026-12-06).
  if (threads < 1 || reps < 1) {
    fmt::print(stderr, "bench_attention: --threads and --reps must be 1 or more\n");
    return 2;
  }
  set_num_threads(threads);
  fmt::print("attention core, forward+backward, median of {} interleaved reps, {} threads\n",
             reps, threads);
  fmt::print("{:<22} {:>9} {:>9} {:>7}\n", "shape", "mat. ms", "flash ms", "ratio");
  for (const BenchShape& s : {BenchShape{"gpt2_124m_causal", 4, 256, 768, 12, true, false},
                         BenchShape{"bert_base_padded", 8, 128, 768, 12, false, true},
                         BenchShape{"bert_base_unmasked", 8, 128, 768, 12, false, false}}) {
    run(s, threads, reps);
  }
  return 0;
}
