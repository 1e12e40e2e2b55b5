#include "sim/measure.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <utility>

#include "comm/communicator.h"
#include "compress/registry.h"
#include "core/buffer.h"
#include "core/param_store.h"
#include "core/timer.h"
#include "models/config.h"
#include "models/model.h"
#include "optim/optimizer.h"

namespace sparq::sim {
namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

void say(const ProgressFn& progress, const std::string& line) {
  if (progress) progress(line);
}

// Random inputs of the model's batch shape; the buffers must outlive every use of the Batch.
struct SyntheticBatch {
  std::vector<std::int32_t> tokens, targets, nsp_labels, labels;
  std::vector<float> images;
  Batch batch;
};

void make_synthetic_batch(const ModelConfig& c, std::int64_t b, std::int64_t t,
                          SyntheticBatch& out) {
  std::mt19937_64 gen(12345);
  if (c.is_language_model()) {
    std::uniform_int_distribution<std::int32_t> token(0, static_cast<std::int32_t>(c.vocab_size - 1));
    out.tokens.resize(static_cast<std::size_t>(b * t));
    out.targets.resize(out.tokens.size());
    for (auto& x : out.tokens) x = token(gen);
    for (auto& x : out.targets) x = token(gen);
    out.batch.tokens = Tensor(out.tokens.data(), DType::kI32, {b, t});
    out.batch.targets = Tensor(out.targets.data(), DType::kI32, {b, t});
    if (c.arch == ModelArch::kBert && c.nsp) {
      out.nsp_labels.resize(static_cast<std::size_t>(b));
      for (std::size_t i = 0; i < out.nsp_labels.size(); ++i) out.nsp_labels[i] = i % 2;
      out.batch.nsp_labels = Tensor(out.nsp_labels.data(), DType::kI32, {b});
    }
    return;
  }
  std::normal_distribution<float> pixel(0.0f, 1.0f);
  out.images.resize(static_cast<std::size_t>(b * c.in_channels * c.image_size * c.image_size));
  for (auto& x : out.images) x = pixel(gen);
  out.labels.resize(static_cast<std::size_t>(b));
  for (std::size_t i = 0; i < out.labels.size(); ++i) {
    out.labels[i] = static_cast<std::int32_t>(static_cast<std::int64_t>(i) % c.num_classes);
  }
  out.batch.images =
      Tensor(out.images.data(), DType::kF32, {b, c.in_channels, c.image_size, c.image_size});
  out.batch.labels = Tensor(out.labels.data(), DType::kI32, {b});
}

}  // namespace

Result<MeasuredCompute> measure_compute(const std::string& model_spec, std::int64_t micro_batch,
                                        std::int64_t seq_len, int repeats,
                                        const ProgressFn& progress) {
  if (repeats < 1) return Status::error("measure_compute: repeats must be >= 1, got {}", repeats);
  SPARQ_ASSIGN_OR_RETURN(ModelConfig config, parse_model_spec(model_spec));
  const bool lm = config.is_language_model();
  SPARQ_ASSIGN_OR_RETURN(auto model, make_model(config, {micro_batch, lm ? seq_len : 0}));
  ParamStore store;
  model->declare(store);
  store.allocate(ExecContext::cpu());
  store.initialize(1);
  model->bind(store);
  model->set_training(true);
  model->set_dropout_seed(1, 0);
  SyntheticBatch data;
  make_synthetic_batch(config, micro_batch, lm ? seq_len : 0, data);

  const std::size_t n_layers = model->layers().size();
  std::vector<double> forward_ms;
  std::vector<std::vector<double>> layer_ms(n_layers);
  for (int run = 0; run <= repeats; ++run) {  // run 0 is the warm-up
    store.zero_grads();
    model->set_step(static_cast<std::uint64_t>(run));
    Stopwatch forward;
    model->forward_for_backward(data.batch);
    const double f_ms = forward.millis();
    std::vector<double> this_run(n_layers, -1.0);
    Stopwatch backward;
    double last_ms = 0;
    model->backward([&](const GradReady& ready) {
      const double at = backward.millis();
      this_run[static_cast<std::size_t>(ready.index)] = at - last_ms;
      last_ms = at;
    });
    say(progress, fmt::format("compute {}/{}{}: forward {:.1f} ms, backward {:.1f} ms", run,
                              repeats, run == 0 ? " (warm-up)" : "", f_ms, last_ms));
    if (run == 0) continue;
    forward_ms.push_back(f_ms);
    for (std::size_t i = 0; i < n_layers; ++i) {
      if (this_run[i] < 0) {
        return Status::error("measure_compute: layer {} ({}) was never reported ready", i,
                             model->layers()[i].name);
      }
      layer_ms[i].push_back(this_run[i]);
    }
  }

  MeasuredCompute out;
  out.model = model_spec;
  out.micro_batch = micro_batch;
  out.seq_len = lm ? seq_len : 0;
  out.forward_ms = median(forward_ms);
  for (std::size_t i = 0; i < n_layers; ++i) {
    out.layers.push_back({model->layers()[i].name, median(layer_ms[i])});
  }

  // The optimizer the bench configs train with (AdamW, weight decay 0.01), on the gradients of
  // the last backward: its time does not depend on the values.
  optim::OptimConfig optim_config;
  optim_config.name = "adamw";
  optim_config.weight_decay = 0.01;
  SPARQ_ASSIGN_OR_RETURN(auto optimizer, optim::make_optimizer(optim_config, store));
  std::vector<double> step_ns;
  for (int run = 0; run <= repeats; ++run) {
    Stopwatch step;
    optimizer->step(1e-4);
    if (run > 0) step_ns.push_back(step.seconds() * 1e9);
  }
  out.optimizer_ns_per_param = median(step_ns) / static_cast<double>(store.param_count());
  say(progress, fmt::format("optimizer: {:.3f} ns per parameter ({} parameters)",
                            out.optimizer_ns_per_param, store.param_count()));
  return out;
}

Result<std::map<std::string, CodecRate>> measure_codecs(const std::vector<std::string>& names,
                                                        std::size_t n, int repeats,
                                                        const ProgressFn& progress) {
  if (n == 0 || repeats < 1) {
    return Status::error("measure_codecs: n ({}) and repeats ({}) must be >= 1", n, repeats);
  }
  std::vector<float> input(n), output(n, 0.0f);
  std::mt19937_64 gen(7);
  std::normal_distribution<float> value(0.0f, 1.0f);
  for (auto& x : input) x = value(gen);
  const double gigabytes = static_cast<double>(n) * sizeof(float) / 1e9;

  std::map<std::string, CodecRate> rates;
  for (const std::string& name : names) {
    compress::CompressConfig config;
    config.name = name;
    auto made = compress::make_compressor(config);
    if (!made.is_ok()) return Status::error("codec '{}': {}", name, made.status().message());
    compress::Compressor& codec = *made.value();
    compress::EncodeContext ctx;
    ctx.seed = 1;
    ctx.world_size = 2;
    compress::Message msg;
    std::vector<double> encode_s, decode_s;
    for (int run = 0; run <= repeats; ++run) {  // run 0 is the warm-up (first-use allocations)
      ctx.step = run;
      Stopwatch encode;
      codec.encode(input, ctx, msg);
      const double e = encode.seconds();
      Stopwatch decode;
      codec.decode(msg, output, 1.0f, compress::DecodeMode::kAdd, ctx);
      const double d = decode.seconds();
      if (run == 0) continue;
      encode_s.push_back(e);
      decode_s.push_back(d);
    }
    CodecRate rate{gigabytes / median(encode_s), gigabytes / median(decode_s)};
    say(progress, fmt::format("codec {}: encode {:.2f} GB/s, decode {:.2f} GB/s ({} B message)",
                              name, rate.encode_gbps, rate.decode_gbps, msg.size()));
    rates[name] = rate;
  }
  return rates;
}

Result<NetworkLink> fit_link(const std::vector<LinkSample>& samples, const std::string& name,
                             std::size_t small_upto, std::size_t large_from) {
  // Slope of t against bytes over the large sizes (ordinary least squares with an intercept).
  double sx = 0, sy = 0, count = 0;
  for (const LinkSample& s : samples) {
    if (s.bytes < large_from) continue;
    sx += static_cast<double>(s.bytes);
    sy += s.seconds;
    count += 1;
  }
  double sxx = 0, sxy = 0;
  for (const LinkSample& s : samples) {
    if (s.bytes < large_from) continue;
    const double dx = static_cast<double>(s.bytes) - sx / count;
    sxx += dx * dx;
    sxy += dx * (s.seconds - sy / count);
  }
  if (count < 2 || sxx <= 0) {
    return Status::error("fit_link {}: needs two distinct sizes >= {} B for the bandwidth", name,
                         large_from);
  }
  const double seconds_per_byte = sxy / sxx;
  if (seconds_per_byte <= 0) {
    return Status::error("fit_link {}: time does not grow with size above {} B", name, large_from);
  }
  double alpha_sum = 0, small = 0;
  for (const LinkSample& s : samples) {
    if (s.bytes > small_upto) continue;
    alpha_sum += s.seconds - static_cast<double>(s.bytes) * seconds_per_byte;
    small += 1;
  }
  if (small == 0) return Status::error("fit_link {}: needs a size <= {} B for alpha", name, small_upto);
  NetworkLink link;
  link.name = name;
  link.alpha_us = std::max(0.0, alpha_sum / small) * 1e6;
  link.gbps = 8.0 / seconds_per_byte / 1e9;
  return link;
}

std::vector<std::size_t> default_link_sizes() {
  std::vector<std::size_t> sizes;
  for (std::size_t n = 8; n < (std::size_t{64} << 20); n *= 8) sizes.push_back(n);
  sizes.push_back(std::size_t{64} << 20);
  return sizes;
}

Result<LinkMeasurement> measure_link(comm::Communicator& comm, const std::vector<std::size_t>& sizes,
                                     const std::string& name, const ProgressFn& progress) {
  if (comm.size() < 2) {
    return Status::error("measure_link: needs 2 ranks (run under mpirun -np 2), got {}",
                         comm.size());
  }
  const int rank = comm.rank();
  std::size_t largest = 0;
  for (std::size_t n : sizes) largest = std::max(largest, n);
  std::vector<std::uint8_t> buffer(std::max<std::size_t>(largest, 1), 1);
  std::vector<double> seconds(sizes.size(), 0.0);
  constexpr int kTag = 2101;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    const std::size_t n = sizes[i];
    // Fewer round trips for large messages: 3 at least, 50 at most, ~4 MiB per size otherwise.
    const int trips = static_cast<int>(std::clamp<std::size_t>((std::size_t{4} << 20) / n, 3, 50));
    std::vector<double> rtt;
    comm.barrier();
    for (int trip = 0; trip <= trips; ++trip) {  // trip 0 warms up (connection, buffers)
      Stopwatch clock;
      if (rank == 0) {
        comm.send(buffer.data(), n, DType::kU8, 1, kTag);
        comm.recv(buffer.data(), n, DType::kU8, 1, kTag);
      } else if (rank == 1) {
        comm.recv(buffer.data(), n, DType::kU8, 0, kTag);
        comm.send(buffer.data(), n, DType::kU8, 0, kTag);
      }
      if (trip > 0) rtt.push_back(clock.seconds());
    }
    seconds[i] = median(rtt) / 2;
    if (rank == 0) {
      say(progress, fmt::format("link {}: {} B one-way {:.1f} us ({} round trips)", name, n,
                                seconds[i] * 1e6, trips));
    }
  }
  // Every rank returns rank 0's clock (rank 1's round trips differ by a half trip's phase).
  comm.broadcast(seconds.data(), seconds.size() * sizeof(double), DType::kU8, 0);
  LinkMeasurement out;
  for (std::size_t i = 0; i < sizes.size(); ++i) out.samples.push_back({sizes[i], seconds[i]});
  SPARQ_ASSIGN_OR_RETURN(out.link, fit_link(out.samples, name));
  return out;
}

}  // namespace sparq::sim
