// Encode and decode throughput of every compressor on 1M, 16M and 64M floats, in GB/s of
// f32 input, next to this machine's memcpy bandwidth measured in the same run (GB/s of bytes
// copied, with the same thread count, re-measured next to every row), plus the bytes sent
// as a fraction of dense f32.
// Targets (issue 7): blockquant encode >= 50% of memcpy, lbs (exact, rho 0.01, 4 bits)
// encode >= 15%. Nothing here is asserted; the table is for reports. --device cuda times the
// device codecs instead (bench_compress_cuda.h).
//
//   bench_compress [--device cpu|cuda] [--threads N] [--seconds S] [--sizes 1,16,64]
//   (sizes in Mi floats)
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#if SPARQ_HAS_CUDA
#include "bench_compress_cuda.h"
#endif
#include "compress/registry.h"
#include "core/buffer.h"
#include "core/rng.h"
#include "core/threading.h"
#include "core/timer.h"

namespace {

using sparq::compress::CompressConfig;
using sparq::compress::Compressor;
using sparq::compress::DecodeMode;
using sparq::compress::EncodeContext;
using sparq::compress::Message;

// Best of at least 3 runs and at least `seconds` of repetitions.
template <typename Fn>
double best_seconds(double seconds, Fn&& fn) {
  fn();  // warm-up: page faults, message allocation
  double best = 1e30;
  sparq::Stopwatch total;
  for (int reps = 0; reps < 3 || total.seconds() < seconds; ++reps) {
    sparq::Stopwatch sw;
    fn();
    best = std::min(best, sw.seconds());
  }
  return best;
}

double memcpy_gbps(const float* in, float* out, std::size_t n, double seconds) {
  const double t = best_seconds(seconds, [&] {
    const int threads = sparq::max_threads();
#pragma omp parallel num_threads(threads)
    {
      const std::size_t t_id = static_cast<std::size_t>(sparq::thread_index());
      const std::size_t nt = static_cast<std::size_t>(sparq::team_size());
      const std::size_t begin = n * t_id / nt, end = n * (t_id + 1) / nt;
      std::memcpy(out + begin, in + begin, (end - begin) * sizeof(float));
    }
  });
  return 4.0 * static_cast<double>(n) / t / 1e9;
}

struct Case {
  std::string label;
  CompressConfig config;
};

}  // namespace

int main(int argc, char** argv) {
  int threads = 2;
  double seconds = 0.3;
  std::vector<std::size_t> sizes_mi = {1, 16, 64};
  std::string device = "cpu";
  // Every option takes a value, and every value is checked: a trailing option was dropped,
  // "--sizes 1,x" looped forever and a size of 0 printed NaN rows (review, 2026-12-06).
  const auto usage = [](const std::string& why) {
    fmt::print(stderr,
               "bench_compress: {}\nusage: bench_compress [--device cpu|cuda] [--threads N] "
               "[--seconds S] [--sizes 1,16,64]\n",
               why);
    return 2;
  };
  for (int i = 1; i < argc; i += 2) {
    const std::string option = argv[i];
    if (i + 1 >= argc) return usage(option + " needs a value");
    const char* value = argv[i + 1];
    char* end = nullptr;
    if (option == "--device") {
      device = value;
      if (device != "cpu" && device != "cuda") return usage("--device is cpu or cuda");
    } else if (option == "--threads") {
      const long t = std::strtol(value, &end, 10);
      if (end == value || *end != '\0' || t < 1 || t > 4096) return usage("--threads: 1 or more");
      threads = static_cast<int>(t);
    } else if (option == "--seconds") {
      seconds = std::strtod(value, &end);
      if (end == value || *end != '\0' || !(seconds > 0 && seconds < 1e6))
        return usage("--seconds: a positive number");
    } else if (option == "--sizes") {
      sizes_mi.clear();
      for (const char* p = value; *p;) {
        const unsigned long mi = std::strtoul(p, &end, 10);
        if (end == p || mi == 0 || mi > (1ul << 20) || (*end != ',' && *end != '\0'))
          return usage(fmt::format("--sizes: '{}' is not a list of MiB counts >= 1", value));
        sizes_mi.push_back(mi);
        p = *end == ',' ? end + 1 : end;
      }
      if (sizes_mi.empty()) return usage("--sizes: no size");
    } else {
      return usage("unknown option " + option);
    }
  }
  if (device == "cuda") {
#if SPARQ_HAS_CUDA
    return run_device_compress_bench(sizes_mi, seconds);
#else
    fmt::print(stderr, "bench_compress: --device cuda needs sparq built with CUDA\n");
    return 2;
#endif
  }
  if (device != "cpu") {
    fmt::print(stderr, "bench_compress: --device must be cpu or cuda, got '{}'\n", device);
    return 2;
  }
  sparq::set_num_threads(threads);

  const std::vector<Case> cases = {
      {"none", {"none", {}}},
      {"fp16", {"fp16", {}}},
      {"bf16", {"bf16", {}}},
      {"topk rho=0.01", {"topk", {{"density", "0.01"}}}},
      {"topk_sampled rho=0.01", {"topk_sampled", {{"density", "0.01"}}}},
      {"randomk rho=0.01", {"randomk", {{"density", "0.01"}}}},
      {"threshold 2.5", {"threshold", {{"threshold", "2.5"}}}},
      {"qsgd s=7", {"qsgd", {}}},
      {"terngrad", {"terngrad", {}}},
      {"signsgd", {"signsgd", {}}},
      {"onebit", {"onebit", {}}},
      {"blockquant b=4", {"blockquant", {}}},
      {"blockquant b=2", {"blockquant", {{"bits", "2"}}}},
      {"blockquant b=4 stoch", {"blockquant", {{"rounding", "stochastic"}}}},
      {"powersgd r=4", {"powersgd", {}}},
      {"lbs rho=0.01 b=4", {"lbs", {}}},
      {"lbs rho=0.01 b=4 sampled", {"lbs", {{"selection", "sampled"}}}},
      {"lbs rho=0.1 b=2", {"lbs", {{"density", "0.1"}, {"bits", "2"}}}},
  };

  fmt::print("bench_compress: {} thread(s), gradients ~ N(0, 1)\n", threads);
  for (std::size_t mi : sizes_mi) {
    const std::size_t n = mi << 20;
    sparq::Buffer in_buf = sparq::Buffer::host(4 * n), out_buf = sparq::Buffer::host(4 * n, true);
    float* in = in_buf.as<float>();
    float* out = out_buf.as<float>();
    sparq::fill_normal(in, n, 0.0f, 1.0f, 42, 1);
    fmt::print("\n{}M floats ({} MiB)\n", mi, 4 * mi);
    fmt::print("{:<26} {:>8} {:>9} {:>8} {:>9} {:>8} {:>10}\n", "compressor", "memcpy",
               "enc GB/s", "enc/cpy", "dec GB/s", "dec/cpy", "bytes/f32");
    for (const Case& c : cases) {
      // memcpy is re-measured next to every row: on a shared machine the load changes during
      // the run, and the ratio should compare like with like.
      const double copy = memcpy_gbps(in, out, n, seconds);
      auto made = sparq::compress::make_compressor(c.config);
      if (!made.is_ok()) {
        fmt::print(stderr, "{}\n", made.status().message());
        return 1;
      }
      Compressor& comp = *made.value();
      EncodeContext ctx;
      ctx.seed = 7;
      ctx.world_size = 4;
      Message msg;
      const std::span<const float> a(in, n);
      const double enc = best_seconds(seconds, [&] { comp.encode(a, ctx, msg); });
      const double dec = best_seconds(seconds, [&] {
        comp.decode(msg, std::span<float>(out, n), 1.0f, DecodeMode::kSet, ctx);
      });
      const double enc_gbps = 4.0 * n / enc / 1e9, dec_gbps = 4.0 * n / dec / 1e9;
      fmt::print("{:<26} {:>8.2f} {:>9.2f} {:>7.1f}% {:>9.2f} {:>7.1f}% {:>10.5f}\n", c.label,
                 copy, enc_gbps, 100.0 * enc_gbps / copy, dec_gbps, 100.0 * dec_gbps / copy,
                 static_cast<double>(msg.size()) / (4.0 * n));
    }
  }
  return 0;
}
