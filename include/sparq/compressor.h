// Public API: adding a gradient compressor (docs/embedding.md, "Compressors").
//
//   class MyCompressor final : public sparq::compress::Compressor { ... };   // compressor.h
//
//   sparq::compress::register_compressor({
//       .name = "my_compressor",
//       .summary = "what it does, one line",
//       .keys = {{"density", "fraction kept, (0, 1], default 0.01"}},
//       .factory = [](sparq::compress::ConfigReader& r)
//           -> sparq::Result<std::unique_ptr<sparq::compress::Compressor>> {
//         SPARQ_ASSIGN_OR_RETURN(double density, r.real("density", 0.01, 0.0, 1.0, true));
//         return std::unique_ptr<sparq::compress::Compressor>(new MyCompressor(density));
//       }});
//
// Then `compress.name: my_compressor` with `compress.my_compressor.density: 0.05` selects and
// sets it in any config; unknown keys and bad values are errors naming the key, exactly as for
// the built-in compressors, which are registered through this same function.
//
// Stable (docs/embedding.md, "Stability"): register_compressor, CompressorRegistration,
// ConfigKey, ConfigReader's getters, make_compressor, compressor_names, and the Compressor
// interface with EncodeContext, DecodeMode, Message and Aggregation.
#pragma once

#include "compress/compressor.h"
#include "compress/config.h"
#include "compress/registry.h"
#include "core/status.h"
#include "sparq/version.h"
