#include "compress/registry.h"

#include <functional>
#include <utility>

#include "compress/blockquant.h"
#include "compress/dense_cast.h"
#include "compress/dgc.h"
#include "compress/lbs.h"
#include "compress/powersgd.h"
#include "compress/qsgd.h"
#include "compress/randomk.h"
#include "compress/sign.h"
#include "compress/terngrad.h"
#include "compress/threshold.h"
#include "compress/topk.h"

namespace sparq::compress {
namespace {

using Factory = std::function<Result<std::unique_ptr<Compressor>>(ConfigReader&)>;

template <typename C>
Factory with_options() {
  return [](ConfigReader& r) -> Result<std::unique_ptr<Compressor>> {
    SPARQ_ASSIGN_OR_RETURN(auto options, C::Options::parse(r));
    return std::unique_ptr<Compressor>(std::make_unique<C>(options));
  };
}

Factory dense(DenseCastCompressor::Format format) {
  return [format](ConfigReader& r) -> Result<std::unique_ptr<Compressor>> {
    SPARQ_RETURN_IF_ERROR(r.finish());
    return std::unique_ptr<Compressor>(std::make_unique<DenseCastCompressor>(format));
  };
}

Factory sign(SignCompressor::Kind kind) {
  return [kind](ConfigReader& r) -> Result<std::unique_ptr<Compressor>> {
    SPARQ_RETURN_IF_ERROR(r.finish());
    return std::unique_ptr<Compressor>(std::make_unique<SignCompressor>(kind));
  };
}

Factory topk(bool sampled, bool global = false) {
  return [sampled, global](ConfigReader& r) -> Result<std::unique_ptr<Compressor>> {
    SPARQ_ASSIGN_OR_RETURN(auto options, TopkCompressor::Options::parse(r, sampled, global));
    return std::unique_ptr<Compressor>(std::make_unique<TopkCompressor>(options));
  };
}

const std::vector<std::pair<std::string, Factory>>& factories() {
  static const std::vector<std::pair<std::string, Factory>> table = {
      {"none", dense(DenseCastCompressor::Format::kF32)},
      {"fp16", dense(DenseCastCompressor::Format::kF16)},
      {"bf16", dense(DenseCastCompressor::Format::kBF16)},
      {"topk", topk(false)},
      {"topk_sampled", topk(true)},
      {"randomk", with_options<RandomkCompressor>()},
      {"threshold", with_options<ThresholdCompressor>()},
      {"gtopk", topk(false, true)},
      {"qsgd", with_options<QsgdCompressor>()},
      {"terngrad", with_options<TernGradCompressor>()},
      {"signsgd", sign(SignCompressor::Kind::kSignSgd)},
      {"onebit", sign(SignCompressor::Kind::kOneBit)},
      {"blockquant", with_options<BlockQuantCompressor>()},
      {"powersgd", with_options<PowerSgdCompressor>()},
      {"dgc", with_options<DgcCompressor>()},
      {"lbs", with_options<LbsCompressor>()},
  };
  return table;
}

}  // namespace

Result<std::unique_ptr<Compressor>> make_compressor(const CompressConfig& config) {
  for (const auto& [name, factory] : factories()) {
    if (name != config.name) continue;
    ConfigReader reader(config.params, config.prefix);
    return factory(reader);
  }
  std::string known;
  for (const auto& name : compressor_names()) known += (known.empty() ? "" : ", ") + name;
  return Status::error("{}.name: unknown compressor '{}' (known: {})", config.prefix,
                       config.name, known);
}

const std::vector<std::string>& compressor_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const auto& entry : factories()) out.push_back(entry.first);
    return out;
  }();
  return names;
}

}  // namespace sparq::compress
