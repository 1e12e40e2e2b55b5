// sim_profile: measures this machine's profile for the step simulator (docs/simulate.md,
// "Machine profiles"): the model's forward and per-layer backward, the AdamW step, the
// compressors' encode/decode rates and, under mpirun with 2 ranks, the link between them.
//
//   sim_profile --model "gpt2-tiny vocab_size=50257 n_ctx=128" --micro-batch 8
//               --seq-len 128 --out profiles/this_machine_gpt2-tiny.yaml
//   scripts/cluster.sh mpirun 2 [MPI ARGS] -- build/apps/sim_profile --only link
//               --link-name 1gbit --out profiles/this_machine_gpt2-tiny.yaml
//
// --out may be given several times (the same figures go to every file). An existing file is
// updated: what this run measures replaces what it had (a link of the same name included),
// the rest is kept. A file may be partial in between (compute and codecs, no link yet): it is
// complete for load_profile() once it has a link. Rank 0 writes; progress goes to stderr.
#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "comm/communicator.h"
#include "comm/mpi_communicator.h"
#include "compress/registry.h"
#include "core/cli_args.h"
#include "core/output_file.h"
#include "core/status.h"
#include "core/threading.h"
#include "models/config.h"
#include "sim/measure.h"
#include "sim/profile.h"

namespace {

using sparq::Result;
using sparq::Status;
using sparq::sim::MachineProfile;

bool launched_by_mpi() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MPI_LOCALNRANKS"}) {
    if (std::getenv(v)) return true;
  }
  return false;
}

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

// An existing profile, possibly partial (no compute yet, or no link yet): parse_profile()
// refuses those, so the missing part is filled with a placeholder for the parse and dropped
// again. A missing file is an empty profile.
Result<MachineProfile> load_existing(const std::string& path) {
  std::error_code ec;  // an unreadable path is not "missing": LoadFile below names its error
  if (!std::filesystem::exists(path, ec) && !ec) return MachineProfile{};
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::Exception& e) {
    return Status::error("{}: not valid YAML: {}", path, e.what());
  }
  // An empty file (or one holding only comments) is an empty profile, as a missing one is;
  // anything but a mapping is refused before it is indexed (yaml-cpp throws on a scalar's
  // subscript: review, 2026-12-05).
  if (root.IsNull()) return MachineProfile{};
  if (!root.IsMap()) return Status::error("{}: expected a profile (a YAML mapping)", path);
  for (const char* section : {"compute", "networks"}) {
    const YAML::Node& const_root = root;
    const YAML::Node node = const_root[section];
    if (node && !node.IsNull() &&
        !(std::string(section) == "compute" ? node.IsMap() : node.IsSequence())) {
      return Status::error("{}: {}: expected a {}", path, section,
                           std::string(section) == "compute" ? "mapping" : "list of links");
    }
  }
  const bool no_compute = !root["compute"] || root["compute"].size() == 0;
  const bool no_links = !root["networks"] || root["networks"].size() == 0;
  if (no_compute) {
    root["compute"]["flops"] =
        YAML::Load("{matmul_tflops: 1, memory_gbps: 1, optimizer_ns_per_param: 1}");
  }
  if (no_links) root["networks"] = YAML::Load("[{name: placeholder, alpha_us: 1, gbps: 1}]");
  std::stringstream text;
  text << root;
  SPARQ_ASSIGN_OR_RETURN(MachineProfile p, sparq::sim::parse_profile(text.str(), path));
  if (no_compute) p.flops.reset();
  if (no_links) p.networks.clear();
  return p;
}

// Before anything is measured: a path that cannot take the profile, or an existing profile
// that cannot be read, fails now instead of after minutes of timings.
Result<MachineProfile> prepare_out(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    return Status::error("--out {}: is a directory, not a profile file", path);
  }
  // A profile is read before it is updated: a device or a pipe holds none.
  if (sparq::is_special_file(path)) {
    return Status::error("--out {}: is not a regular file (a profile is read, then updated)", path);
  }
  const auto parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) {
    std::filesystem::create_directories(parent, ec);
    if (ec)
      return Status::error("--out {}: cannot create '{}': {}", path, parent.string(), ec.message());
  }
  return load_existing(path);
}

// The whole text at once, atomically: a profile holds minutes of measurements, so a failed
// write (a full disk, a file size limit) must leave the previous file as it was, and be
// reported, never leave a truncated profile behind (found in review: an ofstream truncated
// the old file first and checked the stream before its last flush).
Status write_profile(const std::string& path, const MachineProfile& p) {
  // yaml-cpp writes doubles with 17 digits; the figures are medians of noisy timings, so four
  // significant digits are kept ("0.12297250000000001" -> "0.123"), by the emitter: a regex
  // over the text also shortened decimals in names ("--link-name 1gbit-0.100000ms" became
  // 1gbit-0.1ms, which simulate --network then did not find: review, 2026-12-06).
  return sparq::write_output_file(path, sparq::sim::profile_yaml(p, 4))
      .with_context(
          fmt::format("--out {}: the profile was not written (the file is unchanged)", path));
}

void progress(const std::string& line) { fmt::print(stderr, "sim_profile: {}\n", line); }

// The start of every source line this program generates, then "; "-separated parts.
constexpr std::string_view kGeneratedSource = "measured on this machine by sim_profile";

// The source line after this run, when no --source is given: what this run measured (its
// compute and codecs parts, each "" when not measured now) and, from a line this program
// generated before, the part it did not measure. Written only once at first, the line went on
// describing an earlier run ("codecs: 100000 floats" above rates from 7: review, 2026-12-06);
// a hand-written line is replaced too, as it no longer describes the figures it stands above.
// A run that measures neither (a link: each has its own source) keeps the line.
std::string updated_source(const std::string& old, std::string compute, std::string codecs) {
  if (compute.empty() && codecs.empty()) return old.empty() ? std::string(kGeneratedSource) : old;
  if (old.starts_with(kGeneratedSource)) {
    std::stringstream parts(old.substr(kGeneratedSource.size()));
    for (std::string part; std::getline(parts, part, ';');) {
      part.erase(0, part.find_first_not_of(' '));
      if (compute.empty() && part.starts_with("compute: ")) compute = part;
      if (codecs.empty() && part.starts_with("codecs: ")) codecs = part;
    }
  }
  std::string out(kGeneratedSource);
  for (const std::string& part : {compute, codecs}) {
    if (!part.empty()) out += "; " + part;
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"sim_profile: measure this machine's profile for the step simulator"};
  std::string model, name, source, link_source, codecs, link_name, only;
  std::int64_t micro_batch = 8, seq_len = 128;
  int repeats = 5, threads = 1;
  std::size_t codec_floats = std::size_t{1} << 22;
  std::vector<std::string> outs;
  app.add_option("--model", model, "model spec to time (models/config.h), e.g. \"gpt2-tiny\"");
  // Integer ranges, as train.micro_batch and data.seq_len: CLI::PositiveNumber printed its
  // range as 300 digits of DBL_MAX ("Value 0 not in range 0.000000 to 17976...": review,
  // 2026-12-07).
  app.add_option("--micro-batch", micro_batch, "micro-batch of the timed step")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 20));
  app.add_option("--seq-len", seq_len, "sequence length of the timed step (0 for VGG)")
      ->check(CLI::Range(std::int64_t{0}, std::int64_t{1} << 20));
  app.add_option("--repeats", repeats, "timed runs per figure (the median is kept)")
      ->check(CLI::Range(1, 1000));
  app.add_option("--threads", threads,
                 "OpenMP threads of the compute and codec timings (default 1: the emulated "
                 "cluster's ranks run one thread each)")
      ->check(CLI::Range(1, 1024));
  app.add_option("--codecs", codecs, "comma list of compressors to time (default: all registered)");
  // At most 2^28 (1 GiB a buffer): 10^14 ended in an uncaught bad_alloc (review, 2026-12-07).
  app.add_option("--codec-floats", codec_floats, "floats per codec timing, at most 2^28")
      ->check(CLI::Range(std::size_t{1}, std::size_t{1} << 28));
  app.add_option("--name", name, "the profile's name (default: the file's, else this-machine)");
  app.add_option("--source", source,
                 "the profile's source line (default: what was measured; a run that measures "
                 "compute or codecs rewrites the line, a hand-written one included)");
  app.add_option("--link-name", link_name,
                 "name of the measured link (default: mpi-<size> ranks); needs mpirun -np 2");
  app.add_option("--link-source", link_source,
                 "what the measured link is, for its source line (\"scripts/cluster.sh, tbf 1gbit\")");
  app.add_option("--only", only, "comma list of what to measure: compute, codecs, link "
                                 "(default: compute and codecs, plus link under mpirun)");
  app.add_option("--out", outs, "profile YAML to write or update (repeatable)")->required();
  SPARQ_PARSE_ARGS(app, argc, argv);  // Note [App exit codes] (core/cli_args.h)

  std::unique_ptr<sparq::comm::Communicator> comm;
  if (launched_by_mpi()) {
    auto made = sparq::comm::make_mpi_communicator(&argc, &argv);
    if (!made.is_ok()) {
      fmt::print(stderr, "sim_profile: {}\n", made.status().message());
      return 1;
    }
    comm = std::move(made.value());
  }
  const bool writer = !comm || comm->rank() == 0;
  const auto fail = [&](const std::string& message) {
    if (writer) fmt::print(stderr, "sim_profile: {}\n", message);
    return 1;
  };
  // A bad argument exits 2 (Note [App exit codes]; these exited 1: review, 2026-12-06).
  const auto bad_argument = [&](const std::string& message) {
    if (writer) fmt::print(stderr, "sim_profile: {}\n", message);
    return 2;
  };

  std::set<std::string> parts;
  for (const std::string& part : split_list(only)) {
    if (part != "compute" && part != "codecs" && part != "link") {
      return bad_argument(fmt::format("--only: unknown part '{}' (compute, codecs, link)", part));
    }
    parts.insert(part);
  }
  if (only.empty()) {
    parts = {"compute", "codecs"};
    if (comm) parts.insert("link");
  }
  if (parts.count("compute") && model.empty()) {
    return bad_argument("--model: needed to measure compute");
  }
  // A flag of a part this run does not measure was ignored without a word (review,
  // 2026-12-07), as prepare_data refuses the flags its mode does not read.
  for (const auto& [flag, part] : {std::pair<const char*, const char*>{"--model", "compute"},
                                   {"--micro-batch", "compute"},
                                   {"--seq-len", "compute"},
                                   {"--codecs", "codecs"},
                                   {"--codec-floats", "codecs"},
                                   {"--link-name", "link"},
                                   {"--link-source", "link"}}) {
    if (app.count(flag) > 0 && parts.count(part) == 0) {
      return bad_argument(
          fmt::format("{} applies to the {} part, which this run does not measure "
                      "(--only)",
                      flag, part));
    }
  }
  if (parts.count("link") && (!comm || comm->size() != 2)) {
    return fail("link: run under mpirun -np 2 (one rank per end of the link)");
  }
  // Names are checked before anything is measured: an unknown codec or model failed only
  // after the compute timings, which take minutes at real sizes (review, 2026-12-06).
  if (parts.count("compute")) {
    auto spec = sparq::parse_model_spec(model);
    if (!spec.is_ok()) return bad_argument(fmt::format("--model: {}", spec.status().message()));
    // Found after the profiles were prepared, exit 1 (review, 2026-12-07).
    if (spec->is_language_model() && (seq_len < 1 || seq_len > spec->n_ctx)) {
      return bad_argument(
          fmt::format("--seq-len {}: {} takes 1 to {} (its n_ctx)", seq_len, model, spec->n_ctx));
    }
  }
  std::vector<std::string> codec_names;
  if (parts.count("codecs")) {
    codec_names = codecs.empty() ? sparq::compress::compressor_names() : split_list(codecs);
    if (codec_names.empty()) {
      return bad_argument(fmt::format("--codecs '{}': names no compressor", codecs));
    }
    for (const std::string& codec : codec_names) {
      sparq::compress::CompressConfig config;
      config.name = codec;
      const auto made = sparq::compress::make_compressor(config);
      if (!made.is_ok()) {
        return bad_argument(fmt::format("--codecs: {}", made.status().message()));
      }
    }
  }
  // Only the writer reads and later writes the profiles; the other rank learns whether they
  // are usable before the link's ping-pong. Each rank read them itself, and one that could
  // not left its peer waiting in the ping-pong forever (review, 2026-12-06).
  std::vector<MachineProfile> existing;
  std::int32_t unusable = 0;
  if (writer) {
    for (const std::string& path : outs) {
      auto prepared = prepare_out(path);
      if (!prepared.is_ok()) {
        fail(prepared.status().message());
        unusable = 1;
        break;
      }
      existing.push_back(std::move(prepared.value()));
    }
  }
  if (comm) {
    comm->allreduce(&unusable, &unusable, 1, sparq::DType::kI32, sparq::comm::ReduceOp::kSum);
  }
  if (unusable != 0) return 1;  // the writer said why
  sparq::set_num_threads(threads);

  // The link first: it needs both ranks, and the compute timings then run without the peer.
  std::optional<sparq::sim::NetworkLink> link;
  if (parts.count("link")) {
    const std::string link_label = link_name.empty() ? "mpi-2" : link_name;
    auto measured = sparq::sim::measure_link(*comm, sparq::sim::default_link_sizes(), link_label,
                                             writer ? progress : sparq::sim::ProgressFn{});
    if (!measured.is_ok()) return fail(measured.status().message());
    link = measured->link;
    link->source = fmt::format("{}{}measured by sim_profile: ping-pong between 2 MPI ranks, 8 B "
                               "to 64 MiB, alpha from 8 B, bandwidth from >= 1 MiB",
                               link_source, link_source.empty() ? "" : "; ");
    if (writer) {
      progress(fmt::format("link {}: alpha {:.1f} us, {:.4f} Gbit/s", link->name, link->alpha_us,
                           link->gbps));
    }
  }
  if (!writer) return 0;  // the other rank's part ends with the link

  std::optional<sparq::sim::MeasuredCompute> compute;
  if (parts.count("compute")) {
    auto measured = sparq::sim::measure_compute(model, micro_batch, seq_len, repeats, progress);
    if (!measured.is_ok()) return fail(measured.status().message());
    compute = std::move(measured.value());
  }
  std::map<std::string, sparq::sim::CodecRate> rates;
  if (parts.count("codecs")) {
    auto measured = sparq::sim::measure_codecs(codec_names, codec_floats, repeats, progress);
    if (!measured.is_ok()) return fail(measured.status().message());
    rates = std::move(measured.value());
  }

  for (std::size_t i = 0; i < outs.size(); ++i) {
    const std::string& path = outs[i];
    MachineProfile p = std::move(existing[i]);
    if (!name.empty()) p.name = name;
    if (p.name.empty()) p.name = "this-machine";
    if (compute) p.measured = compute;
    for (const auto& [codec, rate] : rates) p.codecs[codec] = rate;
    if (link) {
      std::erase_if(p.networks, [&](const auto& n) { return n.name == link->name; });
      p.networks.push_back(*link);
    }
    if (!source.empty()) {
      p.source = source;
    } else {
      p.source = updated_source(
          p.source,
          compute ? fmt::format("compute: {}, median of {} runs after a warm-up, {} thread(s)",
                                model, repeats, threads)
                  : "",
          rates.empty() ? ""
                        : fmt::format("codecs: {} floats, median of {} runs, {} thread(s)",
                                      codec_floats, repeats, threads));
    }
    if (auto s = write_profile(path, p); !s.is_ok()) return fail(s.message());
    progress(fmt::format("wrote {}{}", path,
                         p.networks.empty() ? " (no link yet: add one under mpirun -np 2)" : ""));
  }
  return 0;
}
