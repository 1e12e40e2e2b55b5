// A parameter store (and the model's state tensors) to and from a safetensors file under
// their own names (train/safetensors.h; the format itself is read in safetensors.cpp and
// written in safetensors_write.cpp, Hugging Face GPT-2 names in hf_gpt2.cpp).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor_copy.h"
#include "train/safetensors.h"

namespace sparq::train {

Status export_safetensors(const ParamStore& store, const std::string& path,
                          const std::map<std::string, std::string>& metadata,
                          const std::vector<StateTensor>& state) {
  SPARQ_RETURN_IF_ERROR(check_cpu_store(store, "export_safetensors"));
  std::vector<SafetensorsTensor> tensors;
  for (const ParamEntry& e : store.entries()) {
    tensors.push_back(
        {e.spec.name, dims_of(e.spec.shape),
         std::span<const float>(store.params() + e.offset, static_cast<std::size_t>(e.numel))});
  }
  // Host copies of device state; reserved, so the spans into them stay valid.
  std::vector<std::vector<float>> staging(state.size());
  for (std::size_t i = 0; i < state.size(); ++i) {
    const StateTensor& s = state[i];
    if (store.contains(s.name)) {
      return Status::error("export_safetensors: the state tensor '{}' is named like a parameter",
                           s.name);
    }
    const float* host = host_floats(s.tensor, staging[i]);
    tensors.push_back({s.name, dims_of(s.tensor.shape()),
                       std::span<const float>(host, static_cast<std::size_t>(s.tensor.numel()))});
  }
  return write_safetensors(path, tensors, metadata);
}

namespace {

// A file tensor that fits `dims` and converts to f32, or an error naming both.
Status check_fits(const std::string& path, const SafetensorsEntry& t,
                  const std::vector<std::int64_t>& dims, const std::string& expected) {
  if (t.shape != dims) {
    return Status::error("safetensors '{}': tensor '{}' has shape {}, the model expects {}", path,
                         t.name, dims_str(t.shape), expected);
  }
  if (!convertible_to_f32(t.dtype)) {
    return Status::error("safetensors '{}': tensor '{}' has dtype {}, not a float type", path,
                         t.name, t.dtype);
  }
  return Status::ok();
}

}  // namespace

Status import_safetensors(ParamStore& store, const std::string& path, const ImportOptions& options,
                          const std::vector<StateTensor>& state) {
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
    SPARQ_RETURN_IF_ERROR(check_fits(path, *t, dims_of(p.spec.shape), p.spec.shape.str()));
    plan.emplace_back(&p, t);
  }
  if (!missing.empty() && !options.allow_missing) {
    return Status::error("safetensors '{}' lacks {} of the model's tensors: {}", path,
                         missing.size(), fmt::join(missing, ", "));
  }
  std::vector<std::pair<const StateTensor*, const SafetensorsEntry*>> state_plan;
  std::vector<std::string> state_absent;
  for (const StateTensor& s : state) {
    const SafetensorsEntry* t = file.find(s.name);
    if (!t) {
      state_absent.push_back(s.name);
      continue;
    }
    SPARQ_RETURN_IF_ERROR(check_fits(path, *t, dims_of(s.tensor.shape()), s.tensor.shape().str()));
    state_plan.emplace_back(&s, t);
  }
  if (!state_plan.empty() && !state_absent.empty() && !options.allow_missing) {
    return Status::error("safetensors '{}' has some of the model's state tensors but lacks {}: {}",
                         path, state_absent.size(), fmt::join(state_absent, ", "));
  }
  if (!options.allow_unexpected) {
    for (const auto& t : file.tensors()) {
      const bool is_state = std::any_of(state.begin(), state.end(),
                                        [&](const StateTensor& s) { return s.name == t.name; });
      if (!store.contains(t.name) && !is_state) {
        return Status::error("safetensors '{}': tensor '{}' is not a parameter of the model", path,
                             t.name);
      }
    }
  }
  if (options.state_absent) *options.state_absent = state_absent;
  if (options.check_only) return Status::ok();
  for (const auto& [p, t] : plan) SPARQ_RETURN_IF_ERROR(file.check_finite(*t));
  for (const auto& [s, t] : state_plan) SPARQ_RETURN_IF_ERROR(file.check_finite(*t));
  for (const auto& [p, t] : plan) {
    SPARQ_RETURN_IF_ERROR(file.read_f32(
        *t, std::span<float>(store.params() + p->offset, static_cast<std::size_t>(p->numel))));
  }
  std::vector<float> staging;
  for (const auto& [s, t] : state_plan) {
    staging.assign(static_cast<std::size_t>(s->tensor.numel()), 0.0f);
    SPARQ_RETURN_IF_ERROR(file.read_f32(*t, staging));
    copy_from_host(staging.data(), s->tensor);
  }
  return Status::ok();
}

}  // namespace sparq::train
