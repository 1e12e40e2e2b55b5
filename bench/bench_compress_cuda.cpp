#include "bench_compress_cuda.h"

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <utility>

#include "compress/cuda/block_codec_cuda.h"
#include "compress/cuda/dense_cast_cuda.h"
#include "compress/cuda/lbs_cuda.h"
#include "compress/cuda/topk_cuda.h"
#include "compress/device_codec.h"
#include "compress/registry.h"
#include "core/buffer.h"
#include "core/cuda/cuda_check.h"
#include "core/cuda/cuda_handles.h"
#include "core/dtype.h"
#include "core/rng.h"
#include "core/timer.h"

namespace {

// Best of at least 5 runs and at least `seconds` of them, timed by events on the stream.
double best_seconds(double seconds, cudaStream_t stream, const std::function<void()>& fn) {
  fn();
  CUDA_CHECK(cudaStreamSynchronize(stream));
  sparq::cuda::Event begin(/*timing=*/true), end(/*timing=*/true);
  double best = 1e30;
  sparq::Stopwatch total;
  for (int reps = 0; reps < 5 || total.seconds() < seconds; ++reps) {
    begin.record(stream);
    fn();
    end.record(stream);
    CUDA_CHECK(cudaEventSynchronize(end.get()));
    best = std::min(best, static_cast<double>(end.elapsed_ms_since(begin)) / 1e3);
  }
  return best;
}

}  // namespace

int run_device_compress_bench(const std::vector<std::size_t>& sizes_mi, double seconds) {
  if (!sparq::cuda_available()) {
    fmt::print(stderr, "bench_compress --device cuda: no CUDA device visible\n");
    return 2;
  }
  sparq::cuda::Stream stream;
  const cudaStream_t s = stream.get();
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  fmt::print("bench_compress --device cuda: {}, gradients ~ N(0, 1), residual ~ N(0, 0.1)\n",
             prop.name);
  for (std::size_t mi : sizes_mi) {
    const std::size_t n = mi << 20;
    std::vector<float> host(n);
    sparq::fill_normal(host.data(), n, 0.0f, 1.0f, 42, 1);
    sparq::Buffer g = sparq::Buffer::device(4 * n), e = sparq::Buffer::device(4 * n),
                  out = sparq::Buffer::device(4 * n);
    CUDA_CHECK(cudaMemcpy(g.data(), host.data(), 4 * n, cudaMemcpyHostToDevice));
    for (float& x : host) x *= 0.1f;
    CUDA_CHECK(cudaMemcpy(e.data(), host.data(), 4 * n, cudaMemcpyHostToDevice));
    const std::size_t k = std::max<std::size_t>(1, n / 100);
    const sparq::cuda::LbsArgs lbs{4, 256, false, 1, 2, 0};
    sparq::Buffer msg = sparq::Buffer::device(std::max<std::size_t>(
        sparq::cuda::lbs_capacity(n, k, lbs), 2 * n));
    // The other twins, through the DeviceCodec interface the exchange uses (defaults; randomk
    // at rho=0.01; dgc at rho=0.01, its momentum on the device; the sampled selections at
    // rho=0.01, their count chosen on the device).
    std::vector<std::pair<std::string, std::unique_ptr<sparq::compress::DeviceCodec>>> twins;
    const std::vector<std::tuple<std::string, std::string, std::map<std::string, std::string>>>
        twin_configs = {{"qsgd", "qsgd", {}},
                        {"terngrad", "terngrad", {}},
                        {"signsgd", "signsgd", {}},
                        {"randomk", "randomk", {}},
                        {"bf16", "bf16", {}},
                        {"dgc", "dgc", {{"density", "0.01"}}},
                        {"topk_sampled rho=0.01", "topk_sampled", {{"density", "0.01"}}},
                        {"lbs sampled rho=0.01 b=4", "lbs", {{"selection", "sampled"}}}};
    for (const auto& [label, name, params] : twin_configs) {
      sparq::compress::CompressConfig config;
      config.name = name;
      config.params = params;
      auto made = sparq::compress::make_compressor(config);
      if (made.is_ok()) twins.emplace_back(label, (*made)->device_codec());
    }
    const sparq::compress::EncodeContext ctx{};
    std::size_t twin_scratch = 0;
    for (const auto& twin : twins) {
      twin_scratch = std::max(twin_scratch, twin.second->scratch_bytes(n, ctx));
    }
    sparq::Buffer scratch = sparq::Buffer::device(std::max(
        {sparq::cuda::lbs_scratch_bytes(n, k), sparq::cuda::lbs_decode_scratch_bytes(n, k),
         sparq::cuda::topk_scratch_bytes(n), twin_scratch}));
    sparq::Buffer kept = sparq::Buffer::device(8 * k);
    auto* gp = g.as<float>();
    auto* ep = e.as<float>();
    auto* op = out.as<float>();
    auto* mp = msg.as<std::uint8_t>();
    const sparq::cuda::BlockCodecArgs bq{4, 256};
    // lbs's decode needs a message: one encode first (it reads only the header and runs).
    sparq::cuda::lbs_encode(gp, ep, n, k, lbs, mp, scratch.data(), scratch.size(), s);

    struct Row {
      std::string label;
      std::function<void()> run;
    };
    std::vector<Row> rows = {
        {"blockquant b=4 encode",
         [&] { sparq::cuda::blockquant_encode_run(gp, n, bq, mp, s); }},
        {"blockquant b=4 encode +ef",
         [&] { sparq::cuda::blockquant_encode_with_feedback(gp, ep, n, bq, mp, s); }},
        {"blockquant b=4 decode",
         [&] { sparq::cuda::blockquant_decode_run(mp, n, 4, 256, 1.0f, false, op, s); }},
        {"fp16 encode",
         [&] {
           sparq::cuda::cast16_encode(sparq::cuda::Cast16::kF16, gp, n, 4,
                                      reinterpret_cast<std::uint16_t*>(mp), s);
         }},
        {"topk exact rho=0.01",
         [&] {
           sparq::cuda::topk_exact(gp, n, k, kept.as<std::uint32_t>(),
                                   kept.as<float>() + k, scratch.data(), scratch.size(), s);
         }},
        {"lbs rho=0.01 b=4 encode +ef",
         [&] { sparq::cuda::lbs_encode(gp, ep, n, k, lbs, mp, scratch.data(), scratch.size(), s); }},
        {"lbs rho=0.01 b=4 decode",
         [&] {
           sparq::cuda::lbs_decode(mp, n, k, lbs, 1.0f, false, op, scratch.data(),
                                   scratch.size(), s);
         }},
    };
    for (const auto& twin : twins) {
      sparq::compress::DeviceCodec* codec = twin.second.get();
      rows.push_back({twin.first + " encode +ef", [&, codec] {
                        codec->encode(gp, ep, n, ctx, mp, scratch.data(), scratch.size(), s);
                      }});
    }
    fmt::print("\n{}M floats ({} MiB)\n", mi, 4 * mi);
    fmt::print("{:<30} {:>10} {:>10} {:>8}\n", "codec", "copy GB/s", "GB/s", "of copy");
    std::fflush(stdout);
    for (const Row& row : rows) {
      // The copy is re-measured next to every row, like the CPU table's memcpy.
      const double copy = best_seconds(seconds, s, [&] {
        CUDA_CHECK(cudaMemcpyAsync(op, gp, 4 * n, cudaMemcpyDeviceToDevice, s));
      });
      const double t = best_seconds(seconds, s, row.run);
      const double copy_gbps = 4.0 * n / copy / 1e9, gbps = 4.0 * n / t / 1e9;
      fmt::print("{:<30} {:>10.1f} {:>10.1f} {:>7.1f}%\n", row.label, copy_gbps, gbps,
                 100.0 * gbps / copy_gbps);
      // Row by row: stdout is a pipe in gpu_check.sh, and an abort or a timeout must not take
      // the rows already measured with it.
      std::fflush(stdout);
    }
  }
  return 0;
}
