// Public API: adding a model (docs/embedding.md, "Models").
//
//   class MyModel final : public sparq::Model {
//     // constructor: add_layer(name, {tensor names}) in forward order
//     // declare(store): store.add(ParamSpec{...}) for every tensor, in forward order
//     // bind_layers(store): take views of the parameters; allocate activations
//     // forward(batch) -> mean loss; backward_layers(): per layer in reverse, then ready(i)
//   };
//   sparq::Status registered = sparq::register_model({
//       .name = "my_model", .summary = "...", .defaults = cfg,
//       .factory = [](const sparq::ModelConfig& c, sparq::RunShape s)
//           -> sparq::Result<std::unique_ptr<sparq::Model>> {
//         return std::unique_ptr<sparq::Model>(new MyModel(c, s)); }});
//   // registered is an error for a taken or malformed name: check it.
//
// `model.preset: my_model` then trains it; `defaults.arch` picks the batches it is fed and
// the model keys that apply (models/model_registry.h). The layers under src/layers (Linear,
// Embedding, LayerNorm, CrossEntropy, ...) are installed and usable, but internal: they may
// change between minor versions.
//
// Stable: register_model, ModelRegistration, ModelConfig, RunShape, Batch, GradReady, and
// the Model interface (declare, bind, forward, backward with readiness, layers, logits,
// activation_bytes, and the protected add_layer / bind_layers / backward_layers / ready).
#pragma once

#include "core/param_store.h"
#include "core/tensor.h"
#include "models/config.h"
#include "models/model.h"
#include "models/model_registry.h"
#include "sparq/version.h"
