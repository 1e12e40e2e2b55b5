// The compressor factory: a stable name plus key/value settings -> a configured compressor.
// Names: none, fp16, bf16, topk, topk_sampled, randomk, threshold, gtopk, qsgd, terngrad,
// signsgd, onebit, blockquant, powersgd, dgc, lbs (see docs/compress.md for every key).
// Unknown names, unknown keys and out-of-range values are errors naming the key.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "compress/compressor.h"
#include "compress/config.h"

namespace sparq::compress {

Result<std::unique_ptr<Compressor>> make_compressor(const CompressConfig& config);

// Every name make_compressor accepts, in a fixed order.
const std::vector<std::string>& compressor_names();

}  // namespace sparq::compress
