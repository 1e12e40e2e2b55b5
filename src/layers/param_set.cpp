#include "layers/param_set.h"

#include "core/check.h"

#if SPARQ_HAS_CUDA
#include "core/cuda/device_resources.h"
#endif

namespace sparq {

int ParamSet::add(const std::string& name, Shape shape, Init init, bool weight_decay) {
  SPARQ_CHECK(!bound_, "{}: cannot add parameter '{}' after bind()", prefix_, name);
  specs_.push_back(ParamSpec{prefix_.empty() ? name : prefix_ + "." + name, shape, init,
                             weight_decay});
  return static_cast<int>(specs_.size()) - 1;
}

void ParamSet::declare(ParamStore& store) const {
  for (const ParamSpec& spec : specs_) store.add(spec);
}

void ParamSet::bind(const ParamStore& store) {
  SPARQ_CHECK(store.allocated(), "{}: bind() before ParamStore::allocate()", prefix_);
  params_.clear();
  grads_.clear();
  for (const ParamSpec& spec : specs_) {
    SPARQ_CHECK(store.contains(spec.name), "{}: parameter '{}' was never declared in the store",
                prefix_, spec.name);
    const ParamEntry& e = store.entry(spec.name);
    SPARQ_CHECK(e.spec.shape == spec.shape, "{}: store holds '{}' as {}, layer expects {}",
                prefix_, spec.name, e.spec.shape.str(), spec.shape.str());
    params_.push_back(store.param(spec.name));
    grads_.push_back(store.grad(spec.name));
  }
  bound_ = true;
}

const Tensor& ParamSet::param(int slot) const {
  SPARQ_CHECK(bound_, "{}: used before bind()", prefix_);
  return params_.at(slot);
}

const Tensor& ParamSet::grad(int slot) const {
  SPARQ_CHECK(bound_, "{}: used before bind()", prefix_);
  return grads_.at(slot);
}

std::vector<std::string> ParamSet::names() const {
  std::vector<std::string> out;
  for (const ParamSpec& spec : specs_) out.push_back(spec.name);
  return out;
}

#if SPARQ_HAS_CUDA
cudaStream_t LayerBase::stream() const { return context_->cuda().stream.get(); }
#endif

void check_arg(const Tensor& t, const Shape& expected, const std::string& layer, const char* arg,
               DType dtype, Device device) {
  SPARQ_CHECK(!t.empty(), "{}: {} is an empty view", layer, arg);
  SPARQ_CHECK(t.device() == device, "{}: {} is on {}, this call runs on {}", layer, arg,
              device_name(t.device()), device_name(device));
  SPARQ_CHECK(t.dtype() == dtype, "{}: {} holds {}, expected {}", layer, arg,
              dtype_name(t.dtype()), dtype_name(dtype));
  SPARQ_CHECK(t.shape() == expected, "{}: {} has shape {}, expected {}", layer, arg,
              t.shape().str(), expected.str());
}

std::int64_t check_rows(const Tensor& t, std::int64_t last, const std::string& layer,
                        const char* arg, Device device) {
  SPARQ_CHECK(!t.empty() && t.device() == device && t.dtype() == DType::kF32,
              "{}: {} must be a non-empty f32 view on {}, got {}", layer, arg,
              device_name(device), t.str());
  SPARQ_CHECK(t.ndim() >= 1 && t.dim(-1) == last, "{}: {} has shape {}, last dim must be {}",
              layer, arg, t.shape().str(), last);
  return t.numel() / last;
}

}  // namespace sparq
