// The aggregation registry (aggregation.h) and the built-in strategies' registrations, which
// take the same path as an external strategy (Note [One registration path], registry.h).
#include <fmt/format.h>

#include "compress/aggregation.h"
#include "compress/powersgd_aggregator.h"
#include "core/check.h"
#include "core/name_registry.h"

namespace sparq::compress {
namespace {

// What each built-in strategy can carry, from the compressor's declared capabilities
// (compressor.h), never from its name: an external compressor that declares the same
// properties gets the same strategies.
Status refuse(const Compressor& c, std::string_view strategy, std::string_view why) {
  return Status::error("{} cannot aggregate by {} ({}; its own strategy is {})", c.name(),
                       strategy, why, aggregation_name(c.aggregation()));
}
Status needs_summable(const Compressor& c) {
  if (!c.capabilities().summable) return refuse(c, "allreduce", "its messages do not sum");
  // The collective sums the message as an array of wire_dtype(); bytes (the default, kU8) or
  // u16 codes wrap, and an external compressor that declared `summable` without overriding
  // wire_dtype() had its f32 values summed byte by byte (review, 2026-12-07).
  const DType wire = c.wire_dtype();
  if (wire == DType::kU8 || wire == DType::kU16) {
    return refuse(c, "allreduce",
                  fmt::format("it declares summable messages, but its wire_dtype() is {}, whose "
                              "sum wraps: override wire_dtype() with the element type of the "
                              "message (f32, f16, bf16, i32 or i64)",
                              dtype_name(wire)));
  }
  return Status::ok();
}
Status needs_self_contained(const Compressor& c, std::string_view strategy) {
  if (c.capabilities().self_contained) return Status::ok();
  return refuse(c, strategy, "its messages mean something only summed over the ranks");
}
Status needs_reselectable_sparse(const Compressor& c) {
  const CompressorCapabilities caps = c.capabilities();
  if (caps.sparse_f32 && caps.reselectable) return Status::ok();
  // A merge by encode keeps k, which must be the same list size on every rank.
  if (caps.merges_by_encode && !caps.count_varies) return Status::ok();
  if (caps.count_varies) {
    return refuse(c, "tree",
                  "its lists keep a data-dependent count (sampled selection, a threshold) and the "
                  "tree merges lists of one k (lbs: compress.lbs.selection: exact)");
  }
  return refuse(c, "tree",
                caps.sparse_f32 ? "its sparse lists cannot be re-selected"
                                : "its messages are neither sparse f32 lists nor lists of a fixed "
                                  "k that merge by encode");
}

AggregationRegistration builtin(Aggregation kind, std::string summary,
                                std::function<Status(const Compressor&)> accepts) {
  return {std::string(aggregation_name(kind)), std::move(summary), std::move(accepts),
          [kind](const AggregatorOptions& o) { return make_aggregator(kind, o); }};
}

void register_builtins() {
  const AggregationRegistration builtins[] = {
      builtin(Aggregation::kAllreduce, "one allreduce of summable messages", needs_summable),
      builtin(Aggregation::kAllgather, "allgatherv of every rank's message, decoded by all",
              [](const Compressor& c) { return needs_self_contained(c, "allgather"); }),
      builtin(Aggregation::kTwoPhase,
              "per-region messages to region owners, re-compressed average, allgatherv",
              [](const Compressor& c) { return needs_self_contained(c, "two_phase"); }),
      builtin(Aggregation::kTree,
              "gtopk's pairwise sparse merge over log2(P) rounds (lbs: "
              "merged by encode)",
              needs_reselectable_sparse),
      builtin(Aggregation::kLowRank,
              "powersgd's factors: allreduce of P, orthogonalisation, allreduce of Q",
              accepts_low_rank),
  };
  for (const AggregationRegistration& r : builtins) {
    const Status s = register_aggregation(r);
    SPARQ_CHECK(s.is_ok(), "built-in aggregation: {}", s.message());
  }
}

NameRegistry<AggregationRegistration>& registry() {
  static NameRegistry<AggregationRegistration> r(register_builtins);
  return r;
}

std::string known_names() {
  std::string out = "auto";
  for (const auto& n : aggregation_names()) out += ", " + n;
  return out;
}

}  // namespace

Status register_aggregation(AggregationRegistration r) {
  if (!is_registry_name(r.name) || r.name == "auto") {
    return Status::error(
        "register_aggregation: name '{}' must match [a-z][a-z0-9_]* {}, and "
        "not be 'auto'",
        r.name, kNotNullRule);
  }
  if (!r.factory) return Status::error("register_aggregation: {}: no factory", r.name);
  return registry().add(std::move(r), "register_aggregation");
}

std::vector<std::string> aggregation_names() { return registry().names(); }

Status check_aggregation_name(std::string_view name, const std::string& key) {
  if (name == "auto") return Status::ok();
  for (const auto& n : aggregation_names()) {
    if (n == name) return Status::ok();
  }
  return Status::error("{}: unknown aggregation '{}' (known: {})", key, name, known_names());
}

Result<std::unique_ptr<Aggregator>> make_aggregator(std::string_view name, const Compressor& c,
                                                    const AggregatorOptions& options,
                                                    const std::string& key) {
  const std::string wanted =
      name == "auto" ? std::string(aggregation_name(c.aggregation())) : std::string(name);
  SPARQ_RETURN_IF_ERROR(check_aggregation_name(wanted, key));
  const AggregationRegistration r = *registry().find(wanted);
  if (r.accepts) SPARQ_RETURN_IF_ERROR(r.accepts(c).with_context(key));
  std::unique_ptr<Aggregator> aggregator = r.factory(options);
  if (!aggregator) return Status::error("{}: the factory of '{}' returned nothing", key, wanted);
  SPARQ_RETURN_IF_ERROR(aggregator->check_compressor(c).with_context(key));
  return aggregator;
}

}  // namespace sparq::compress
