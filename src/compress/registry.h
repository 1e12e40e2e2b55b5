// The compressor registry: a stable name plus key/value settings -> a configured compressor.
// Built-in names: none, fp16, bf16, topk, topk_sampled, randomk, threshold, gtopk, qsgd,
// terngrad, signsgd, onebit, blockquant, powersgd, dgc, lbs (docs/compress.md lists every key).
//
// Note [One registration path]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The built-in compressors are registered through register_compressor() exactly as a
// compressor defined outside the tree is (builtin_compressors.cpp; the public header is
// include/sparq/compressor.h): whatever validation, listing (sparq_info) or config handling
// a built-in gets, an external one gets too. The registry fills itself with the built-ins on
// first use, so a program that registers its own compressor before or after that sees both.
//
// Validation: make_compressor() gives the factory a ConfigReader that knows the declared keys.
// A key the user wrote that no getter read is an error naming it and the declared keys; a
// getter of an undeclared key is a registration bug, reported the same way. The factory's
// getters check types and ranges (ConfigReader); the registry calls finish() itself, so a
// factory cannot forget it.
//
// Registration is thread-safe; make_compressor() may run concurrently with it.
#pragma once

#include <functional>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "compress/compressor.h"
#include "compress/config.h"

namespace sparq::compress {

// One key a compressor reads under compress.<name>.<key>, with a one-line meaning for
// embedders that list keys ("fraction of entries kept, (0, 1], default 0.01"; sparq_info
// prints the names only).
struct ConfigKey {
  std::string name;
  std::string help;
};

using CompressorFactory = std::function<Result<std::unique_ptr<Compressor>>(ConfigReader&)>;

struct CompressorRegistration {
  std::string name;             // [a-z][a-z0-9_]*, unique; what compress.name selects
  std::string summary;          // one line for sparq_info
  std::vector<ConfigKey> keys;  // every key the factory may read
  CompressorFactory factory;    // reads its keys through the reader; may fail naming a key
};

// The compress section's own keys (GradientExchangeConfig: name, aggregation, seed, ...); the
// section's other entries are compress.<compressor> sections, so no compressor may be named
// like one of these.
const std::set<std::string>& general_compress_keys();

// Adds a compressor. Errors: a malformed or taken name (built-ins included) or one of the
// general compress keys, no factory, a key declared twice.
Status register_compressor(CompressorRegistration registration);

// Builds config.name with config.params; errors name the key with config.prefix.
Result<std::unique_ptr<Compressor>> make_compressor(const CompressConfig& config);

// Every registered name: the built-ins in a fixed order, then the others in registration order.
std::vector<std::string> compressor_names();
// The registration of `name` (a copy: the registry may grow meanwhile), or an error listing
// the known names.
Result<CompressorRegistration> find_compressor(std::string_view name);

// Called once by the registry (builtin_compressors.cpp).
void register_builtin_compressors();

}  // namespace sparq::compress
