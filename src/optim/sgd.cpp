#include "optim/sgd.h"

namespace sparq::optim {

Sgd::Sgd(const OptimConfig& config, const ParamStore& store) : Optimizer(store), config_(config) {
  if (config_.momentum > 0.0) momentum_ = flat_state_buffer();
}

void Sgd::step(double lr_d) {
  const float lr = static_cast<float>(lr_d);
  const float mu = static_cast<float>(config_.momentum);
  const float damp = 1.0f - static_cast<float>(config_.dampening);
  const bool first = steps_ == 0;
  float* params = store_.params();
  const float* grads = store_.grads();
  float* buf = momentum_.as<float>();
  for (const ParamEntry& e : store_.entries()) {
    const float wd = e.spec.weight_decay ? static_cast<float>(config_.weight_decay) : 0.0f;
    float* p = params + e.offset;
    const float* g = grads + e.offset;
    float* b = buf ? buf + e.offset : nullptr;
    const std::int64_t n = e.numel;
#pragma omp parallel for simd schedule(static) if (n > 32768)
    for (std::int64_t i = 0; i < n; ++i) {
      float d = g[i] + wd * p[i];
      if (b) {
        b[i] = first ? d : mu * b[i] + damp * d;
        d = config_.nesterov ? d + mu * b[i] : b[i];
      }
      p[i] -= lr * d;
    }
  }
  ++steps_;
}

std::vector<StateTensor> Sgd::state() {
  if (!momentum_.data()) return {};
  return {flat_state("sgd.momentum", momentum_)};
}

}  // namespace sparq::optim
