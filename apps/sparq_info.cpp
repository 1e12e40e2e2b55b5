// sparq_info: prints how this build of sparq was configured (CUDA, NCCL, cuDNN, MPI,
// threads), lays out the parameters of a small demo network in a ParamStore, and checks the
// GEMM path against its reference. A quick "is my build sane" command.
// `sparq_info --json` prints only the build's features as one JSON object, for scripts that
// embed sparq: {"version", "cuda", "cuda_device_visible", "nccl", "cudnn", "mpi",
// "gemm_backend", "gemm_library", "openmp_threads", "compressors": [names],
// "compressor_keys": {name: [keys]}, "aggregations": [names], "models": [presets]}.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sparq/version.h>

#include <CLI/CLI.hpp>
#include <cmath>
#include <vector>

#include "compress/aggregation.h"
#include "compress/registry.h"
#include "core/buffer.h"
#include "core/cli_args.h"
#include "core/gemm.h"
#include "core/log.h"
#include "core/param_store.h"
#include "core/rng.h"
#include "core/threading.h"
#include "core/timer.h"
#include "models/config.h"
#include "models/model_registry.h"

namespace {

constexpr bool kHasCuda =
#ifdef SPARQ_HAS_CUDA
    true;
#else
    false;
#endif
constexpr bool kHasMpi =
#ifdef SPARQ_HAS_MPI
    true;
#else
    false;
#endif
constexpr bool kHasNccl =
#ifdef SPARQ_HAS_NCCL
    true;
#else
    false;
#endif
constexpr bool kHasCudnn =
#ifdef SPARQ_HAS_CUDNN
    true;
#else
    false;
#endif
constexpr char kVersion[] = SPARQ_VERSION_STRING;

// A JSON string literal: the names printed here are plain ASCII, but quote and escape anyway.
std::string json_string(std::string_view text) {
  std::string out = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) {
      out += fmt::format("\\u{:04x}", static_cast<int>(c));
      continue;
    }
    out += c;
  }
  return out + "\"";
}

std::string json_list(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& item : items) out += (out.empty() ? "" : ",") + json_string(item);
  return "[" + out + "]";
}

std::string features_json() {
  const std::vector<std::string> names = sparq::compress::compressor_names();
  std::string keys;
  for (const std::string& name : names) {
    auto registration = sparq::compress::find_compressor(name);
    std::vector<std::string> declared;
    for (const auto& key : registration->keys) declared.push_back(key.name);
    keys += (keys.empty() ? "" : ",") + json_string(name) + ":" + json_list(declared);
  }
  std::vector<std::string> models = sparq::model_preset_names();
  for (std::string& name : sparq::registered_model_names()) models.push_back(std::move(name));
  const auto flag = [](bool b) { return b ? "true" : "false"; };
  const auto backend = sparq::gemm_backend();
  return fmt::format(
      "{{\"version\":{},\"cuda\":{},\"cuda_device_visible\":{},\"nccl\":{},\"cudnn\":{},"
      "\"mpi\":{},\"gemm_backend\":{},\"gemm_library\":{},\"openmp_threads\":{},"
      "\"compressors\":{},\"compressor_keys\":{{{}}},\"aggregations\":{},\"models\":{}}}",
      json_string(kVersion), flag(kHasCuda), flag(sparq::cuda_available()), flag(kHasNccl),
      flag(kHasCudnn), flag(kHasMpi), json_string(sparq::gemm_backend_name(backend)),
      json_string(sparq::gemm_backend_library(backend)), sparq::max_threads(), json_list(names),
      keys, json_list(sparq::compress::aggregation_names()), json_list(models));
}

// A two-block MLP's parameters: enough to show the flat layout and its alignment.
sparq::ParamStore demo_store(int width) {
  sparq::ParamStore store;
  for (int block = 0; block < 2; ++block) {
    const std::string p = fmt::format("block.{}.", block);
    store.add({p + "ln.weight", {width}, sparq::Init::ones(), false});
    store.add({p + "ln.bias", {width}, sparq::Init::zeros(), false});
    store.add({p + "fc.weight", {4 * width, width}, sparq::Init::normal(0.02f), true});
    store.add({p + "fc.bias", {4 * width}, sparq::Init::zeros(), false});
    store.add({p + "proj.weight", {width, 4 * width}, sparq::Init::normal(0.02f), true});
    store.add({p + "proj.bias", {width}, sparq::Init::zeros(), false});
  }
  return store;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"sparq_info: build configuration and a self-check"};
  int width = 96;
  int threads = 0;
  CLI::Option* width_option = app.add_option("--width", width, "hidden width of the demo network")
                                  ->check(CLI::Range(1, 4096));
  app.add_option("--threads", threads, "OpenMP threads (0 = default)")->check(CLI::Range(0, 1024));
  bool json = false;
  // --json runs no demo network: a --width beside it was ignored (review, 2026-12-07).
  app.add_flag("--json", json, "print only the build's features as one JSON object and exit")
      ->excludes(width_option);
  SPARQ_PARSE_ARGS(app, argc, argv);  // Note [App exit codes] (core/cli_args.h)
  if (threads > 0) sparq::set_num_threads(threads);
  sparq::log::init({});
  if (json) {
    fmt::print("{}\n", features_json());
    return 0;
  }

  // Every feature the header names (NCCL and cuDNN were only in --json: review, 2026-12-06),
  // and the GEMM backend the self-check below runs.
  const auto built = [](bool b) { return b ? "built" : "not built"; };
  const auto backend = sparq::gemm_backend();
  fmt::print(
      "sparq {}\n  CUDA: {} (device visible: {})\n  NCCL: {}\n  cuDNN: {}\n  MPI: {}\n"
      "  GEMM: {} ({})\n  OpenMP threads: {}\n",
      kVersion, built(kHasCuda), sparq::cuda_available() ? "yes" : "no", built(kHasNccl),
      built(kHasCudnn), built(kHasMpi), sparq::gemm_backend_name(backend),
      sparq::gemm_backend_library(backend), sparq::max_threads());
  // What a config may name, as --json lists it: the text output had none of it (review,
  // 2026-12-08).
  std::vector<std::string> models = sparq::model_preset_names();
  for (std::string& name : sparq::registered_model_names()) models.push_back(std::move(name));
  fmt::print("  compressors: {}\n  aggregations: {}\n  models: {}\n\n",
             fmt::join(sparq::compress::compressor_names(), ", "),
             fmt::join(sparq::compress::aggregation_names(), ", "), fmt::join(models, ", "));

  sparq::ParamStore store = demo_store(width);
  store.allocate();
  store.initialize(1234);
  fmt::print("Demo parameter layout:\n{}\n\n", store.summary());

  // GEMM self-check: block 0's fc layer on a random batch, against the double reference.
  const std::int64_t rows = 64;
  std::vector<float> x(rows * width), y(rows * 4 * width), ref(rows * 4 * width);
  sparq::fill_uniform(x.data(), x.size(), -1, 1, 1, 1);
  const sparq::GemmShape s{false, true, rows, 4 * width, width};
  const float* w = store.param("block.0.fc.weight").data<float>();
  sparq::Stopwatch sw;
  sparq::gemm(s, 1.0f, x.data(), w, 0.0f, y.data());
  const double ms = sw.millis();
  sparq::gemm_reference(s, 1.0f, x.data(), w, 0.0f, ref.data());
  double max_err = 0;
  for (std::size_t i = 0; i < y.size(); ++i) max_err = std::max(max_err, std::fabs(double(y[i]) - ref[i]));
  const bool ok = max_err < 1e-4;
  fmt::print("GEMM self-check ({}) {}x{}x{}: max |error| {:.2e} in {:.3f} ms: {}\n",
             sparq::gemm_backend_name(backend), s.m, s.n, s.k, max_err, ms, ok ? "OK" : "FAILED");
  return ok ? 0 : 1;
}
