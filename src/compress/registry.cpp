#include "compress/registry.h"

#include <fmt/ranges.h>

#include <set>
#include <utility>

#include "core/name_registry.h"

namespace sparq::compress {
namespace {

NameRegistry<CompressorRegistration>& registry() {
  static NameRegistry<CompressorRegistration> r(register_builtin_compressors);
  return r;
}

std::string join_names(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

}  // namespace

const std::set<std::string>& general_compress_keys() {
  static const std::set<std::string> keys = {
      "name", "error_feedback",      "aggregation", "server_compression", "dense_warmup_steps",
      "seed", "density_warmup_steps"};
  return keys;
}

Status register_compressor(CompressorRegistration r) {
  if (!is_registry_name(r.name)) {
    return Status::error("register_compressor: name '{}' must match [a-z][a-z0-9_]* {}", r.name,
                         kNotNullRule);
  }
  // Its settings section compress.<name> would be the general key itself: every config that
  // chose it was refused with "compress.seed: set twice" (review, 2026-12-05).
  if (general_compress_keys().count(r.name)) {
    return Status::error("register_compressor: name '{}' is a general compress key ({})", r.name,
                         fmt::join(general_compress_keys(), ", "));
  }
  if (!r.factory) return Status::error("register_compressor: {}: no factory", r.name);
  std::set<std::string> seen;
  for (const ConfigKey& key : r.keys) {
    if (!is_registry_name(key.name)) {
      return Status::error("register_compressor: {}: key '{}' must match [a-z][a-z0-9_]* {}",
                           r.name, key.name, kNotNullRule);
    }
    if (!seen.insert(key.name).second) {
      return Status::error("register_compressor: {}: key '{}' declared twice", r.name, key.name);
    }
  }
  return registry().add(std::move(r), "register_compressor");
}

Result<CompressorRegistration> find_compressor(std::string_view name) {
  if (auto found = registry().find(name)) return *std::move(found);
  return Status::error("unknown compressor '{}' (known: {})", name, join_names(compressor_names()));
}

Result<std::unique_ptr<Compressor>> make_compressor(const CompressConfig& config) {
  auto found = find_compressor(config.name);
  if (!found.is_ok()) return found.status().with_context(config.prefix + ".name");
  const CompressorRegistration& r = *found;
  std::vector<std::string> declared;
  for (const ConfigKey& key : r.keys) declared.push_back(key.name);
  ConfigReader reader(config.params, config.prefix, declared);
  SPARQ_ASSIGN_OR_RETURN(auto compressor, r.factory(reader));
  if (!compressor) return Status::error("{}: the factory of '{}' returned nothing", config.prefix, r.name);
  SPARQ_RETURN_IF_ERROR(reader.finish());
  return compressor;
}

std::vector<std::string> compressor_names() { return registry().names(); }

}  // namespace sparq::compress
