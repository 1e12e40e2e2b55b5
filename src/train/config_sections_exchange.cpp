// The config's compress and comm sections (train/config_sections.h; the other sections are in
// config_sections.cpp).
#include "train/config_sections.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <map>

#include "compress/aggregation.h"
#include "compress/registry.h"

namespace sparq::train::config_sections {

Status read_compress(YamlReader& r, TrainConfig& c) {
  compress::GradientExchangeConfig& x = c.compress;
  x.compress.name = "none";
  SPARQ_RETURN_IF_ERROR(r.get("compress.name", &x.compress.name));
  SPARQ_RETURN_IF_ERROR(r.get("compress.error_feedback", &x.error_feedback));
  // A registered strategy (built-in or an embedding program's, compress/aggregation.h).
  x.aggregation = "auto";
  SPARQ_RETURN_IF_ERROR(r.get("compress.aggregation", &x.aggregation));
  SPARQ_RETURN_IF_ERROR(compress::check_aggregation_name(x.aggregation, "compress.aggregation")
                            .with_context(r.where()));
  SPARQ_RETURN_IF_ERROR(r.get("compress.server_compression", &x.aggregator.server_compression));
  SPARQ_RETURN_IF_ERROR(r.get("compress.dense_warmup_steps", &x.dense_warmup_steps, {.min = 0}));
  SPARQ_RETURN_IF_ERROR(r.get("compress.density_warmup_steps", &x.density_warmup_steps,
                              {.min = 0, .max = kMaxSteps}));
  std::int64_t seed = 0;
  SPARQ_RETURN_IF_ERROR(r.get("compress.seed", &seed, {.min = 0}));
  x.seed = static_cast<std::uint64_t>(seed);
  // The key that names the compressor is compress.name (not compress.<name>.name); checked
  // before the sections, or an unknown name's own section was named as the unknown key
  // ("compress.nope.density: unknown key"; review, 2026-12-07).
  if (auto found = compress::find_compressor(x.compress.name); !found.is_ok()) {
    return found.status().with_context(r.where() + ": compress.name");
  }
  // Compressor settings live under compress.<compressor>.<key>, so that switching
  // compress.name (for example --set compress.name=none) never leaves stray keys behind.
  // Every listed compressor's section is validated, used or not: a typo is always an error.
  std::vector<std::pair<std::string, std::string>> keys;
  SPARQ_RETURN_IF_ERROR(r.take_section("compress", &keys));
  std::map<std::string, compress::CompressConfig> sections;
  const auto& names = compress::compressor_names();
  for (auto& [key, value] : keys) {
    if (compress::general_compress_keys().count(key)) continue;
    const std::size_t dot = key.find('.');
    const std::string head = key.substr(0, dot);
    // "lbs:" with its keys commented out is an empty section, as elsewhere (review, 12-06).
    const bool known = std::find(names.begin(), names.end(), head) != names.end();
    if (dot == std::string::npos && known && r.is_empty("compress." + key)) continue;
    if (dot == std::string::npos || !known) {
      return Status::error(
          "{}: compress.{}: unknown key (compressor settings go under "
          "compress.<compressor>.<key>, e.g. compress.lbs.density)",
          r.where(), key);
    }
    compress::CompressConfig& section = sections[head];
    section.name = head;
    section.prefix = "compress." + head;
    section.params[key.substr(dot + 1)] = value;
  }
  for (const auto& [name, section] : sections) {
    auto probe = compress::make_compressor(section);
    if (!probe.is_ok()) return probe.status().with_context(r.where());
  }
  x.compress.params = sections.count(x.compress.name) ? sections[x.compress.name].params
                                                      : std::map<std::string, std::string>{};
  x.compress.prefix = "compress." + x.compress.name;
  auto probe = compress::make_compressor(x.compress);
  if (!probe.is_ok()) return probe.status().with_context(r.where());
  SPARQ_RETURN_IF_ERROR(compress::check_density_warmup(**probe, x.density_warmup_steps,
                                                       "compress.density_warmup_steps")
                            .with_context(r.where()));
  // The pairs the exchange refuses (a strategy's accepts(), compress/aggregation.h) are
  // refused when the config is read, as docs/embedding.md says: validate_train_config passed
  // topk with allreduce, which run_training then refused (review, 2026-12-07).
  if (!x.compress.compression_off()) {
    SPARQ_RETURN_IF_ERROR(
        compress::make_aggregator(x.aggregation, **probe, x.aggregator, x.aggregation_key)
            .status()
            .with_context(r.where()));
  }
  // DGC applies the momentum itself (momentum correction before selection); a second
  // momentum in SGD would apply it twice.
  // A variance frozen after compressed steps has seen only what was sent: near zero for every
  // coordinate not yet selected, so momentum / sqrt(v) explodes (issue 15: train loss 7.4 ->
  // 4760 two steps after the freeze). The steps that estimate it must be dense, or sent by a
  // compressor that sends every entry (none, and the fp16/bf16 casts, refused with this
  // reason until a review of 2026-12-07).
  if (c.optim.communicate == "momentum" && !(*probe)->capabilities().sends_every_entry &&
      x.dense_warmup_steps < c.optim.freeze_steps) {
    return Status::error(
        "{}: compress.dense_warmup_steps: {} is below optim.freeze_steps {}: the "
        "variance would be frozen after compressed steps, where it is near zero "
        "for every coordinate not yet sent, and momentum / sqrt(v) diverges; set "
        "compress.dense_warmup_steps >= optim.freeze_steps",
        r.where(), x.dense_warmup_steps, c.optim.freeze_steps);
  }
  // dgc's momentum and local clipping run in its error-feedback accumulation (dgc.h): without
  // it dgc was plain top-k, its momentum and clip_norm silently unread (review, 2026-12-06).
  if (x.compress.name == "dgc" && !x.error_feedback) {
    return Status::error(
        "{}: compress.error_feedback: false with compress.name dgc: dgc's momentum and "
        "clipping run in its error-feedback accumulation, so without it dgc would be plain "
        "top-k (for that, compress.name: topk)",
        r.where());
  }
  if (x.compress.name == "dgc" && c.optim.name == "sgd" && c.optim.momentum != 0) {
    return Status::error(
        "{}: optim.momentum: must be 0 with compress.name dgc, which applies "
        "momentum before compression (set compress.dgc.momentum instead)",
        r.where());
  }
  return Status::ok();
}

Status read_comm(YamlReader& r, TrainConfig& c) {
  CommConfig& m = c.comm;
  SPARQ_RETURN_IF_ERROR(r.get_choice("comm.backend", &m.backend, {"auto", "mpi", "self"}));
  SPARQ_RETURN_IF_ERROR(r.get_choice("comm.allreduce", &m.allreduce, {"auto", "mpi", "ring"}));
  SPARQ_RETURN_IF_ERROR(r.get_choice("comm.mpi_wait", &m.mpi_wait, {"busy", "sleep"}));
  SPARQ_RETURN_IF_ERROR(r.get("comm.first_bucket_mb", &m.plan.first_bucket_mb, {.min = 0}));
  SPARQ_RETURN_IF_ERROR(r.get("comm.bucket_mb", &m.plan.bucket_mb, {.min = 0}));
  SPARQ_RETURN_IF_ERROR(r.get("comm.min_compress_numel", &m.plan.min_compress_numel, {.min = 0}));
  SPARQ_RETURN_IF_ERROR(r.get("comm.dense_patterns", &m.plan.dense_patterns));
  SPARQ_RETURN_IF_ERROR(r.get("comm.overlap", &m.overlap));
  // At most 1e9 s (about 31 years): a deadline of now + 1e19 s overflows the clocks' integer
  // ticks, and the waits then returned at once and spun (comm/comm_engine.cpp).
  SPARQ_RETURN_IF_ERROR(r.get("comm.timeout_s", &m.timeout_s, {.min = 0.001, .max = 1e9}));
  // Bounded so that a message's emulated time fits the clock's int64 nanoseconds (1e300 us
  // overflowed it, review 2026-12-05): at most 1000 s of latency, at least 1 kbit/s.
  SPARQ_RETURN_IF_ERROR(r.get("comm.emulate.gbit_per_s", &m.emulate.gbit_per_s, {.min = 0}));
  SPARQ_RETURN_IF_ERROR(
      r.get("comm.emulate.latency_us", &m.emulate.latency_us, {.min = 0, .max = 1e9}));
  if (m.emulate.gbit_per_s > 0 && m.emulate.gbit_per_s < 1e-6) {
    return Status::error(
        "{}: comm.emulate.gbit_per_s: {} is below 1 kbit/s (1e-6); 0 means no "
        "bandwidth limit",
        r.where(), m.emulate.gbit_per_s);
  }
  SPARQ_RETURN_IF_ERROR(r.get("comm.emulate.ranks", &m.emulate.ranks, {.min = 0, .max = 1 << 20}));
  if (m.emulate.ranks == 1) {
    return Status::error(
        "{}: comm.emulate.ranks: 1 is the real one-rank world; use 0, or the "
        "size of the cluster to stand in for (2 or more)",
        r.where());
  }
  // train is read first (parse_train_config).
  if (m.emulate.ranks > 0 && c.train.device != Device::kCUDA) {
    return Status::error(
        "{}: comm.emulate.ranks lets one GPU stand in for a cluster "
        "(train.device: cuda); on the CPU run that many ranks under mpirun",
        r.where());
  }
  SPARQ_RETURN_IF_ERROR(r.get_choice("comm.split_tied_embedding", &m.split_tied_embedding,
                                     {"auto", "always", "never"}));
  SPARQ_RETURN_IF_ERROR(m.plan.validate("comm.").with_context(r.where()));
  SPARQ_RETURN_IF_ERROR(r.get_choice("comm.plan", &m.plan_mode, {"fixed", "auto"}));
  SPARQ_RETURN_IF_ERROR(r.get("comm.plan_profile", &m.plan_profile));
  SPARQ_RETURN_IF_ERROR(r.get("comm.plan_network", &m.plan_network));
  SPARQ_RETURN_IF_ERROR(
      r.get("comm.plan_min_compression", &m.plan_min_compression, {.min = 1, .max = 1e9}));
  if (m.plan_mode == "auto") {
    if (c.compress.compress.name == "none") {
      return Status::error(
          "{}: comm.plan: auto chooses how compressed buckets travel; set "
          "compress.name to a compressor",
          r.where());
    }
    for (auto [key, value] : {std::pair{"comm.plan_profile", &m.plan_profile},
                              {"comm.plan_network", &m.plan_network}}) {
      if (value->empty()) {
        return Status::error(
            "{}: {}: needed by comm.plan: auto (a machine profile from "
            "sim_profile and the name of its link; docs/simulate.md)",
            r.where(), key);
      }
    }
  }
  return Status::ok();
}

}  // namespace sparq::train::config_sections
