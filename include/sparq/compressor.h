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
// What the compressor's messages allow is declared, never inferred from its name:
//   sparq::compress::CompressorCapabilities capabilities() const override {
//     return {.summable = true};  // messages sum elementwise: allreduce may carry them
//   }
//   sparq::DType wire_dtype() const override { return sparq::DType::kF32; }  // what is summed
// (a summable compressor whose wire_dtype() stays the default, bytes, is refused by allreduce).
// Without an override a compressor is summable when aggregation() is kAllreduce and its
// messages are self-contained (allgather and two_phase carry them). A compressor that views
// a bucket as matrices declares needs_matrix_layout and overrides set_layout(n, segments),
// which it then receives once before its first encode. compress/compressor.h documents every
// field (docs/embedding.md, "Capabilities").
//
// Threads: the factory runs on the thread that builds the trainer; accumulate, encode,
// check_message and decode run on the trainer's communication thread while backward goes on,
// one call at a time per instance (docs/embedding.md, "Which thread runs extension code").
//
// Stable (docs/embedding.md, "Stability"): register_compressor, CompressorRegistration,
// ConfigKey, ConfigReader's getters, make_compressor, compressor_names, and the Compressor
// interface with EncodeContext, DecodeMode, Message, Aggregation, CompressorCapabilities and
// MatrixSegment.
#pragma once

#include "compress/compressor.h"
#include "compress/config.h"
#include "compress/registry.h"
#include "core/status.h"
#include "sparq/version.h"
