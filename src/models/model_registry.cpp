#include "models/model_registry.h"

#include <algorithm>

#include "core/name_registry.h"

namespace sparq {
namespace {

NameRegistry<ModelRegistration>& registry() {
  static NameRegistry<ModelRegistration> r;
  return r;
}

}  // namespace

Status register_model(ModelRegistration r) {
  if (!is_registry_name(r.name, "-.")) {
    return Status::error("register_model: name '{}' must match [a-z][a-z0-9_.-]* {}", r.name,
                         kNotNullRule);
  }
  if (!r.factory) return Status::error("register_model: {}: no factory", r.name);
  const auto builtin = model_preset_names();
  if (std::find(builtin.begin(), builtin.end(), r.name) != builtin.end()) {
    return Status::error("register_model: '{}' is a built-in preset", r.name);
  }
  r.defaults.preset = r.name;
  r.defaults.spec = r.name;
  SPARQ_RETURN_IF_ERROR(validate_model_config(r.defaults).with_context("register_model"));
  return registry().add(std::move(r), "register_model");
}

std::vector<std::string> registered_model_names() { return registry().names(); }

Result<ModelRegistration> find_registered_model(std::string_view preset) {
  if (auto found = registry().find(preset)) return *std::move(found);
  return Status::error("no registered model '{}'", preset);
}

}  // namespace sparq
