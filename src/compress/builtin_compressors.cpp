// The built-in compressors, registered through the public path (Note [One registration path],
// registry.h). The key texts are each key's one-line summary for embedders that list them
// (sparq_info prints the key names); docs/compress.md has the details.
#include <utility>

#include "compress/blockquant.h"
#include "compress/dense_cast.h"
#include "compress/dgc.h"
#include "compress/lbs.h"
#include "compress/powersgd.h"
#include "compress/qsgd.h"
#include "compress/randomk.h"
#include "compress/registry.h"
#include "compress/sign.h"
#include "compress/terngrad.h"
#include "compress/threshold.h"
#include "compress/topk.h"
#include "core/check.h"

namespace sparq::compress {
namespace {

template <typename C>
CompressorFactory with_options() {
  return [](ConfigReader& r) -> Result<std::unique_ptr<Compressor>> {
    SPARQ_ASSIGN_OR_RETURN(auto options, C::Options::parse(r));
    return std::unique_ptr<Compressor>(std::make_unique<C>(options));
  };
}

CompressorFactory dense(DenseCastCompressor::Format format) {
  return [format](ConfigReader&) -> Result<std::unique_ptr<Compressor>> {
    return std::unique_ptr<Compressor>(std::make_unique<DenseCastCompressor>(format));
  };
}

CompressorFactory sign(SignCompressor::Kind kind) {
  return [kind](ConfigReader&) -> Result<std::unique_ptr<Compressor>> {
    return std::unique_ptr<Compressor>(std::make_unique<SignCompressor>(kind));
  };
}

CompressorFactory topk(bool sampled, bool global = false) {
  return [sampled, global](ConfigReader& r) -> Result<std::unique_ptr<Compressor>> {
    SPARQ_ASSIGN_OR_RETURN(auto options, TopkCompressor::Options::parse(r, sampled, global));
    return std::unique_ptr<Compressor>(std::make_unique<TopkCompressor>(options));
  };
}

const ConfigKey kDensity{"density", "fraction of entries kept, (0, 1], default 0.01"};
const ConfigKey kBits{"bits", "bits per quantized value, one of {2, 3, 4, 8}, default 4"};
const ConfigKey kBlock{"block", "values per f16 scale, a multiple of 8 in [8, 65536], default 256"};
const ConfigKey kRounding{"rounding", "nearest | stochastic, default nearest"};

}  // namespace

void register_builtin_compressors() {
  const CompressorRegistration builtins[] = {
      {"none", "dense f32 (no compression)", {}, dense(DenseCastCompressor::Format::kF32)},
      {"fp16", "dense, cast to f16", {}, dense(DenseCastCompressor::Format::kF16)},
      {"bf16", "dense, cast to bf16", {}, dense(DenseCastCompressor::Format::kBF16)},
      {"topk", "the k largest magnitudes, exact selection", {kDensity}, topk(false)},
      {"topk_sampled",
       "about k largest magnitudes, threshold estimated from a sample",
       {kDensity},
       topk(true)},
      {"randomk",
       "k entries at shared random positions",
       {kDensity},
       with_options<RandomkCompressor>()},
      {"threshold",
       "every entry with |a| >= threshold",
       {{"threshold", "magnitude kept, [1.18e-38, 1e30], default 1e-3"}},
       with_options<ThresholdCompressor>()},
      {"gtopk", "global top-k merged over a tree", {kDensity}, topk(false, true)},
      {"qsgd",
       "stochastic quantization to s levels per chunk norm",
       {{"levels", "quantization levels s, [1, 127], default 7"},
        {"chunk", "values per norm, a multiple of 8 in [8, 2^24], default 512"}},
       with_options<QsgdCompressor>()},
      {"terngrad",
       "stochastic ternary {-s, 0, s} with sigma clipping",
       {{"clip_sigma", "clip at this many standard deviations, (0, 100], default 2.5"}},
       with_options<TernGradCompressor>()},
      {"signsgd",
       "sign bits scaled by the mean |a|, allgather (EF-signSGD)",
       {},
       sign(SignCompressor::Kind::kSignSgd)},
      {"onebit",
       "sign bits scaled by the RMS of a, two-phase (1-bit Adam)",
       {},
       sign(SignCompressor::Kind::kOneBit)},
      {"blockquant",
       "every value, a few bits per block scale",
       {kBits, kBlock, kRounding},
       with_options<BlockQuantCompressor>()},
      {"powersgd",
       "low-rank P Q^T with warm start",
       {{"rank", "rank r of the factors, [1, 1024], default 4"},
        {"min_compress_numel", "smaller matrices go dense, [1, 2^40], default 4096"},
        {"alternate", "one factor per step (one allreduce), default false"}},
       with_options<PowerSgdCompressor>()},
      {"dgc",
       "deep gradient compression: momentum correction, clipping, top-k",
       {{"density", "fraction of entries kept, (0, 1], default 0.001"},
        {"momentum", "momentum applied before selection, [0, 0.999999], default 0.9"},
        {"clip_norm", "local gradient clipping, 0 = off, [0, 1e30], default 0"},
        {"warmup_steps", "exponential sparsity warm-up steps, default 0"}},
       with_options<DgcCompressor>()},
      {"lbs",
       "top-k whose kept values are block-quantized (low-bit AND sparse)",
       {kDensity,
        kBits,
        kBlock,
        kRounding,
        {"selection", "exact | sampled top-k selection, default exact"}},
       with_options<LbsCompressor>()},
  };
  for (const CompressorRegistration& r : builtins) {
    const Status s = register_compressor(r);
    SPARQ_CHECK(s.is_ok(), "built-in compressor: {}", s.message());
  }
}

}  // namespace sparq::compress
