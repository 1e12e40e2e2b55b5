#include "layers/embedding.h"

#include <algorithm>

#include "core/check.h"
#include "layers/linear.h"

namespace sparq {
namespace cpu {

template <typename T>
void embedding_forward(const std::int32_t* ids, const T* table, T* y, std::int64_t n,
                       std::int64_t dim, bool accumulate) {
#pragma omp parallel for schedule(static) if (n * dim > 32768)
  for (std::int64_t i = 0; i < n; ++i) {
    const T* src = table + static_cast<std::int64_t>(ids[i]) * dim;
    T* dst = y + i * dim;
    if (accumulate) {
      for (std::int64_t j = 0; j < dim; ++j) dst[j] += src[j];
    } else {
      std::copy(src, src + dim, dst);
    }
  }
}

template <typename T>
void embedding_backward(const std::int32_t* ids, const T* dy, T* dtable, std::int64_t n,
                        std::int64_t dim) {
  // Repeated ids would race if rows were split across threads; column blocks never do.
#pragma omp parallel for schedule(static) if (n * dim > 32768)
  for (std::int64_t j0 = 0; j0 < dim; j0 += 64) {
    const std::int64_t j1 = std::min(dim, j0 + 64);
    for (std::int64_t i = 0; i < n; ++i) {
      T* dst = dtable + static_cast<std::int64_t>(ids[i]) * dim;
      const T* src = dy + i * dim;
      for (std::int64_t j = j0; j < j1; ++j) dst[j] += src[j];
    }
  }
}

template void embedding_forward<float>(const std::int32_t*, const float*, float*, std::int64_t,
                                       std::int64_t, bool);
template void embedding_forward<double>(const std::int32_t*, const double*, double*,
                                        std::int64_t, std::int64_t, bool);
template void embedding_backward<float>(const std::int32_t*, const float*, float*, std::int64_t,
                                        std::int64_t);
template void embedding_backward<double>(const std::int32_t*, const double*, double*,
                                         std::int64_t, std::int64_t);

}  // namespace cpu

Embedding::Embedding(std::string prefix, Config config)
    : ParamLayer(std::move(prefix)), config_(config) {
  SPARQ_CHECK(config_.num > 0 && config_.dim > 0, "{}: Embedding needs num > 0 and dim > 0, got {}x{}",
              name(), config_.num, config_.dim);
  table_ = params_.add("weight", {config_.num, config_.dim}, Init::normal(config_.init_std), false);
}

std::int64_t Embedding::check_ids(const Tensor& ids, const Tensor& y, const char* y_name) const {
  SPARQ_CHECK(!ids.empty() && ids.is_cpu() && ids.dtype() == DType::kI32,
              "{}: ids must be a non-empty host int32 view, got {}", name(), ids.str());
  const std::int64_t n = check_rows(y, config_.dim, name(), y_name);
  SPARQ_CHECK(ids.numel() == n, "{}: ids {} and {} {} differ in rows", name(), ids.shape().str(),
              y_name, y.shape().str());
  const std::int32_t* p = ids.data<std::int32_t>();
  for (std::int64_t i = 0; i < n; ++i) {
    SPARQ_CHECK(p[i] >= 0 && p[i] < config_.num, "{}: id {} at position {} is outside [0, {})",
                name(), p[i], i, config_.num);
  }
  return n;
}

void Embedding::forward(const Tensor& ids, const Tensor& y, bool accumulate) const {
  const std::int64_t n = check_ids(ids, y, "y");
  cpu::embedding_forward<float>(ids.data<std::int32_t>(), table().data<float>(), y.data<float>(),
                                n, config_.dim, accumulate);
}

void Embedding::backward(const Tensor& ids, const Tensor& dy) const {
  const std::int64_t n = check_ids(ids, dy, "dy");
  cpu::embedding_backward<float>(ids.data<std::int32_t>(), dy.data<float>(),
                                 params_.grad(table_).data<float>(), n, config_.dim);
}

void Embedding::forward_positions(const Tensor& y, bool accumulate) const {
  SPARQ_CHECK(y.ndim() == 3, "{}: position embeddings need y [batch, seq, dim], got {}", name(),
              y.shape().str());
  const std::int64_t batch = y.dim(0), seq = y.dim(1);
  check_arg(y, {batch, seq, config_.dim}, name(), "y");
  SPARQ_CHECK(seq <= config_.num, "{}: sequence length {} exceeds the {} positions", name(), seq,
              config_.num);
  // Every batch row reads the same first `seq` table rows: a lookup with ids 0..seq-1.
  for (std::int64_t b = 0; b < batch; ++b) {
    float* dst = y.data<float>() + b * seq * config_.dim;
    if (accumulate) {
      const float* src = table().data<float>();
#pragma omp parallel for schedule(static) if (seq * config_.dim > 32768)
      for (std::int64_t i = 0; i < seq * config_.dim; ++i) dst[i] += src[i];
    } else {
      std::copy(table().data<float>(), table().data<float>() + seq * config_.dim, dst);
    }
  }
}

void Embedding::backward_positions(const Tensor& dy) const {
  SPARQ_CHECK(dy.ndim() == 3, "{}: position embeddings need dy [batch, seq, dim], got {}", name(),
              dy.shape().str());
  const std::int64_t batch = dy.dim(0), seq = dy.dim(1);
  check_arg(dy, {batch, seq, config_.dim}, name(), "dy");
  SPARQ_CHECK(seq <= config_.num, "{}: sequence length {} exceeds the {} positions", name(), seq,
              config_.num);
  float* dtable = params_.grad(table_).data<float>();
  const float* src = dy.data<float>();
  const std::int64_t plane = seq * config_.dim;
#pragma omp parallel for schedule(static) if (plane > 32768)
  for (std::int64_t i = 0; i < plane; ++i) {
    float acc = 0;
    for (std::int64_t b = 0; b < batch; ++b) acc += src[b * plane + i];
    dtable[i] += acc;
  }
}

void Embedding::project(const Tensor& x, const Tensor& logits) const {
  const std::int64_t n = check_rows(x, config_.dim, name(), "x");
  SPARQ_CHECK(check_rows(logits, config_.num, name(), "logits") == n,
              "{}: x {} and logits {} differ in rows", name(), x.shape().str(),
              logits.shape().str());
  cpu::linear_forward<float>(x.data<float>(), table().data<float>(), nullptr,
                             logits.data<float>(), n, config_.dim, config_.num);
}

void Embedding::project_backward(const Tensor& x, const Tensor& dlogits, const Tensor& dx) const {
  const std::int64_t n = check_rows(x, config_.dim, name(), "x");
  SPARQ_CHECK(check_rows(dlogits, config_.num, name(), "dlogits") == n &&
                  check_rows(dx, config_.dim, name(), "dx") == n,
              "{}: x {}, dlogits {} and dx {} differ in rows", name(), x.shape().str(),
              dlogits.shape().str(), dx.shape().str());
  cpu::linear_backward<float>(x.data<float>(), table().data<float>(), dlogits.data<float>(),
                              dx.data<float>(), params_.grad(table_).data<float>(), nullptr, n,
                              config_.dim, config_.num);
}

}  // namespace sparq
