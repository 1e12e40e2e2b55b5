// simulate's command-line checks (simulate_args.h).
#include "simulate_args.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <sstream>
#include <string_view>

#include "core/cli_args.h"
#include "sim/collectives.h"
#include "sim/workload.h"
#include "train/yaml_reader.h"

namespace sparq::sim_app {
namespace {

// Every comma-separated part, empty ones included ("4,,8" has three), for the callers to refuse.
std::vector<std::string> split_commas(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) out.push_back(item);
  if (!text.empty() && text.back() == ',') out.emplace_back();
  return out;
}

Result<std::vector<int>> parse_world(const std::string& text) {
  std::vector<int> out;
  const std::vector<std::string> items = split_commas(text);
  for (const std::string& item : items) {
    // Decimal digits only: std::stoi took " 4" (leading blanks) and "+4" (review, 2026-12-07).
    int p = 0;
    const auto [ptr, ec] = std::from_chars(item.data(), item.data() + item.size(), p);
    if (item.empty() || item[0] == '-' || ec != std::errc() || ptr != item.data() + item.size() ||
        p < 1 || p > (1 << 24)) {
      return Status::error("--world: '{}' in '{}' is not a world size in [1, 2^24]", item, text);
    }
    out.push_back(p);
  }
  if (out.empty()) return Status::error("--world: no world size in '{}'", text);
  if (const std::string twice = cli::first_repeated(items); !twice.empty()) {
    return Status::error("--world: '{}' is given twice in '{}'", twice, text);
  }
  return out;
}

// --compute-ms F,B[,O]: every part present, whole and finite (sscanf took "12abc" as 12 and
// "1e400" as inf; split_commas dropped the empty parts of "1,,2": review, 2026-12-06); F and
// B > 0, O >= 0 (0 is a measurement: a step may do no optimizer work worth timing).
Result<std::vector<double>> parse_compute_ms(const std::string& text) {
  std::vector<double> out;
  bool valid = true;
  for (std::size_t begin = 0; valid && begin <= text.size();) {
    const std::size_t end = std::min(text.find(',', begin), text.size());
    const std::string_view part(text.data() + begin, end - begin);
    double v = 0;
    const auto [ptr, ec] = std::from_chars(part.data(), part.data() + part.size(), v);
    valid = !part.empty() && ec == std::errc() && ptr == part.data() + part.size() &&
            std::isfinite(v) && (out.size() == 2 ? v >= 0 : v > 0);
    out.push_back(v);
    begin = end + 1;
  }
  if (valid && (out.size() == 2 || out.size() == 3)) return out;
  return Status::error(
      "--compute-ms: expected FORWARD,BACKWARD[,OPTIMIZER] in ms (forward and backward "
      "positive, the optimizer zero or more), got '{}'",
      text);
}

}  // namespace

Result<Arguments> check_arguments(const std::string& world_text, const std::string& cells_text,
                                  const std::string& allreduce, const std::string& gather,
                                  int timeline_world, const std::string& compute_ms,
                                  const std::string& plan, const std::vector<std::string>& sets) {
  for (const std::string& set : sets) {
    // The syntax, as train checks it: a malformed --set exited 1 after the work had begun
    // (review, 2026-12-07).
    SPARQ_RETURN_IF_ERROR(train::parse_set_argument(set).status());
    const std::string key = set.substr(0, set.find('='));
    // A cell IS its compressor and aggregation (docs/simulate.md): a --set of either priced
    // every cell alike under its own label (`--set compress.name=topk` made dense_f32, topk
    // and powersgd rows of topk: review, 2026-12-06). Their other compress keys may be set.
    // The whole section too: --set compress={...} replaces each cell's name with the map's.
    if (key == "compress" || key == "compress.name" || key == "compress.aggregation") {
      return Status::error(
          "--set {}: each cell sets its own {} (docs/simulate.md, the cells); set the cells' "
          "other keys one by one, and choose cells with --cells",
          set, key);
    }
  }
  Arguments a;
  if (plan != "config" && plan != "fixed" && plan != "auto")
    return Status::error("--plan: unknown plan '{}' (config, fixed, auto)", plan);
  a.plan = plan;
  SPARQ_ASSIGN_OR_RETURN(a.worlds, parse_world(world_text));
  if (timeline_world != 0 &&
      std::find(a.worlds.begin(), a.worlds.end(), timeline_world) == a.worlds.end()) {
    return Status::error("--buckets {}: not one of the --world sizes ({})", timeline_world,
                         fmt::join(a.worlds, ","));
  }
  a.timeline_world = timeline_world;
  const std::vector<std::string> names = split_commas(cells_text);
  for (const std::string& name : names) {
    if (name.empty()) return Status::error("--cells: an empty name in '{}'", cells_text);
    SPARQ_ASSIGN_OR_RETURN(auto cell, sim::find_cell(name));
    a.cells.push_back(cell);
  }
  if (a.cells.empty()) return Status::error("--cells: no cell in '{}'", cells_text);
  if (const std::string twice = cli::first_repeated(names); !twice.empty()) {
    return Status::error("--cells: '{}' is given twice in '{}'", twice, cells_text);
  }
  if (allreduce != "config" && allreduce != "ring" && allreduce != "best" && allreduce != "auto")
    return Status::error("--allreduce: unknown algorithm '{}' (config, ring, best, auto)",
                         allreduce);
  a.allreduce = allreduce;
  SPARQ_ASSIGN_OR_RETURN(a.gather, sim::parse_algorithm(gather, "--gather"));
  if (!compute_ms.empty()) {
    SPARQ_ASSIGN_OR_RETURN(a.compute_ms, parse_compute_ms(compute_ms));
  }
  return a;
}

}  // namespace sparq::sim_app
