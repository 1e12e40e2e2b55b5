// Models added from outside the tree (include/sparq/model.h is the public header).
//
// A registered model is a preset name that model.preset (YAML) or make_model_config() selects,
// with a ModelConfig of defaults and a factory. Its `arch` says which batches it is fed and
// which model keys apply: kGpt2 = next-token language-model batches (tokens, targets), kBert =
// masked-LM batches, kVgg = images and labels. The keys of that architecture override the
// defaults and are validated the same way (models/config.h), so a registered language model
// is sized by n_layer, n_embd, n_head, n_ctx, vocab_size, ... even where it ignores some.
// The factory builds the model for a RunShape exactly as the built-in ones are built
// (models/model.h: specs via declare(), bind_layers(), forward(), backward_layers() calling
// ready(i) after layer i).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "models/model.h"

namespace sparq {

using ModelFactory =
    std::function<Result<std::unique_ptr<Model>>(const ModelConfig& config, RunShape shape)>;

struct ModelRegistration {
  std::string name;      // [a-z][a-z0-9_.-]*, not a built-in preset, unique
  std::string summary;   // one line for sparq_info
  ModelConfig defaults;  // arch and the values the model keys override
  ModelFactory factory;
};

// Errors: a malformed or taken name (built-in presets included), no factory, defaults that
// do not validate.
Status register_model(ModelRegistration registration);
// Registered names, in registration order (the built-in presets are model_preset_names()).
std::vector<std::string> registered_model_names();
// The registration whose name is `preset`, or nullopt-like error when none is.
Result<ModelRegistration> find_registered_model(std::string_view preset);

}  // namespace sparq
