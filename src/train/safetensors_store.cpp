// A parameter store to and from a safetensors file under the store's own tensor names
// (train/safetensors.h; the format itself is read and written in safetensors.cpp, Hugging
// Face GPT-2 names in hf_gpt2.cpp).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <span>
#include <string>
#include <utility>
#include <vector>

#include "train/safetensors.h"

namespace sparq::train {

Status export_safetensors(const ParamStore& store, const std::string& path,
                          const std::map<std::string, std::string>& metadata) {
  SPARQ_RETURN_IF_ERROR(check_cpu_store(store, "export_safetensors"));
  std::vector<SafetensorsTensor> tensors;
  for (const ParamEntry& e : store.entries()) {
    tensors.push_back(
        {e.spec.name, dims_of(e.spec.shape),
         std::span<const float>(store.params() + e.offset, static_cast<std::size_t>(e.numel))});
  }
  return write_safetensors(path, tensors, metadata);
}

Status import_safetensors(ParamStore& store, const std::string& path,
                          const ImportOptions& options) {
  if (!options.check_only) SPARQ_RETURN_IF_ERROR(check_cpu_store(store, "import_safetensors"));
  SPARQ_ASSIGN_OR_RETURN(const SafetensorsFile file, options.check_only
                                                         ? SafetensorsFile::read_header(path)
                                                         : SafetensorsFile::read(path));
  // Validate everything first, so a failed import leaves the store unchanged.
  std::vector<std::pair<const ParamEntry*, const SafetensorsEntry*>> plan;
  std::vector<std::string> missing;
  for (const ParamEntry& p : store.entries()) {
    const SafetensorsEntry* t = file.find(p.spec.name);
    if (!t) {
      missing.push_back(p.spec.name);
      continue;
    }
    if (t->shape != dims_of(p.spec.shape)) {
      return Status::error("safetensors '{}': tensor '{}' has shape {}, the model expects {}", path,
                           t->name, dims_str(t->shape), p.spec.shape.str());
    }
    if (!convertible_to_f32(t->dtype)) {
      return Status::error("safetensors '{}': tensor '{}' has dtype {}, not a float type", path,
                           t->name, t->dtype);
    }
    plan.emplace_back(&p, t);
  }
  if (!missing.empty() && !options.allow_missing) {
    return Status::error("safetensors '{}' lacks {} of the model's tensors: {}", path,
                         missing.size(), fmt::join(missing, ", "));
  }
  if (!options.allow_unexpected) {
    for (const auto& t : file.tensors()) {
      if (!store.contains(t.name)) {
        return Status::error("safetensors '{}': tensor '{}' is not a parameter of the model", path,
                             t.name);
      }
    }
  }
  if (options.check_only) return Status::ok();
  for (const auto& [p, t] : plan) {
    SPARQ_RETURN_IF_ERROR(file.read_f32(
        *t, std::span<float>(store.params() + p->offset, static_cast<std::size_t>(p->numel))));
  }
  return Status::ok();
}

}  // namespace sparq::train
