#include "layers/embedding.h"

#include <algorithm>

#include "core/check.h"
#include "core/profile.h"
#include "layers/linear.h"

#if SPARQ_HAS_CUDA
#include "core/cuda/cuda_check.h"
#include "core/cuda/device_resources.h"
#include "layers/cuda/embedding_cuda.h"
#include "layers/cuda/linear_cuda.h"
#endif

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
  SPARQ_CHECK(config_.valid >= 0 && config_.valid <= config_.num,
              "{}: {} valid ids for a table of {} rows", name(), config_.valid, config_.num);
  table_ = params_.add("weight", {config_.num, config_.dim}, Init::normal(config_.init_std), false);
}

std::int64_t Embedding::check_ids(const Tensor& ids, const Tensor& y, const char* y_name) const {
  SPARQ_CHECK(!ids.empty() && ids.device() == device() && ids.dtype() == DType::kI32,
              "{}: ids must be a non-empty int32 view on {}, got {}", name(),
              device_name(device()), ids.str());
  const std::int64_t n = check_rows(y, config_.dim, name(), y_name, device());
  SPARQ_CHECK(ids.numel() == n, "{}: ids {} and {} {} differ in rows", name(), ids.shape().str(),
              y_name, y.shape().str());
  if (on_cuda()) {
    // Device ids are the loader's to validate (layers/cuda/embedding_cuda.h); only debug
    // builds pay the sync this check costs.
#if SPARQ_HAS_CUDA && !defined(NDEBUG)
    const cuda::InvalidId bad =
        cuda::first_invalid_id(ids.data<std::int32_t>(), n, valid_ids(), stream());
    SPARQ_CHECK(bad.position < 0, "{}: id {} at position {} is outside [0, {})", name(), bad.id,
                bad.position, valid_ids());
#endif
    return n;
  }
  const std::int32_t* p = ids.data<std::int32_t>();
  const std::int64_t valid = valid_ids();
  for (std::int64_t i = 0; i < n; ++i) {
    SPARQ_CHECK(p[i] >= 0 && p[i] < valid, "{}: id {} at position {} is outside [0, {})", name(),
                p[i], i, valid);
  }
  return n;
}

void Embedding::forward(const Tensor& ids, const Tensor& y, bool accumulate) const {
  SPARQ_PROFILE_SCOPE("embedding.forward");  // Note [Profile scopes]
  const std::int64_t n = check_ids(ids, y, "y");
  if (on_cuda()) {
#if SPARQ_HAS_CUDA
    // valid_ids(), not num: an id in the padded rows reads zeros and gets no gradient, where
    // the CPU refuses it (check_ids), instead of training a row that must stay inert.
    cuda::embedding_forward(ids.data<std::int32_t>(), table().data<float>(), y.data<float>(), n,
                            valid_ids(), config_.dim, accumulate, stream());
#endif
  } else {
    cpu::embedding_forward<float>(ids.data<std::int32_t>(), table().data<float>(),
                                  y.data<float>(), n, config_.dim, accumulate);
  }
}

void Embedding::backward(const Tensor& ids, const Tensor& dy) const {
  SPARQ_PROFILE_SCOPE("embedding.backward");  // Note [Profile scopes]
  const std::int64_t n = check_ids(ids, dy, "dy");
  float* dtable = params_.grad(table_).data<float>();
  if (on_cuda()) {
#if SPARQ_HAS_CUDA
    // Sized for the largest batch seen: allocated at the first backward, reused after.
    // valid_ids() as the kernels' id bound, as in forward.
    const std::size_t need = cuda::embedding_backward_scratch_bytes(n, valid_ids());
    if (backward_scratch_.size() < need) {
      // The previous backward's kernels may still be queued on the stream and reading the old
      // buffer (cudaFree happens to wait for the device; StreamScratch says so: review).
      CUDA_CHECK(cudaStreamSynchronize(stream()));
      backward_scratch_ = Buffer::device(need);
    }
    cuda::embedding_backward(ids.data<std::int32_t>(), dy.data<float>(), dtable, n, valid_ids(),
                             config_.dim, backward_scratch_.data(), backward_scratch_.size(),
                             stream());
#endif
  } else {
    cpu::embedding_backward<float>(ids.data<std::int32_t>(), dy.data<float>(), dtable, n,
                                   config_.dim);
  }
}

void Embedding::backward_rows(const Tensor& ids, const Tensor& dy, RowSparseGrad* out) const {
  SPARQ_PROFILE_SCOPE("embedding.backward");  // Note [Profile scopes]
  const std::int64_t n = check_ids(ids, dy, "dy");
  SPARQ_CHECK(!on_cuda(), "{}: the row-sparse lookup gradient is CPU only", name());
  const std::int32_t* id = ids.data<std::int32_t>();
  const std::int64_t dim = config_.dim;
  out->dim = dim;
  out->clear();
  if (out->slot_of.size() != static_cast<std::size_t>(config_.num)) {
    out->slot_of.assign(static_cast<std::size_t>(config_.num), -1);
  }
  for (std::int64_t i = 0; i < n; ++i) {
    if (out->slot_of[id[i]] < 0) {
      out->slot_of[id[i]] = 0;
      out->rows.push_back(id[i]);
    }
  }
  std::sort(out->rows.begin(), out->rows.end());
  for (std::size_t k = 0; k < out->rows.size(); ++k) {
    out->slot_of[out->rows[k]] = static_cast<std::int32_t>(k);
  }
  out->values.assign(out->rows.size() * static_cast<std::size_t>(dim), 0.0f);
  // Slots instead of ids: the dense scatter-add into a table of count() rows.
  std::vector<std::int32_t>& slots = slot_scratch_;
  slots.resize(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) slots[i] = out->slot_of[id[i]];
  cpu::embedding_backward<float>(slots.data(), dy.data<float>(), out->values.data(), n, dim);
  for (std::int32_t row : out->rows) out->slot_of[row] = -1;
}

void Embedding::backward_by_rows(const Tensor& ids, const Tensor& dy,
                                 RowSparseGrad* scratch) const {
  SPARQ_PROFILE_SCOPE("embedding.backward");  // Note [Profile scopes]
  backward_rows(ids, dy, scratch);
  float* dtable = params_.grad(table_).data<float>();
  const std::int64_t dim = config_.dim;
  for (std::size_t k = 0; k < scratch->count(); ++k) {
    float* dst = dtable + static_cast<std::int64_t>(scratch->rows[k]) * dim;
    const float* src = scratch->values.data() + k * static_cast<std::size_t>(dim);
    for (std::int64_t j = 0; j < dim; ++j) dst[j] += src[j];
  }
}

// Position tensors are [batch, seq, dim] with seq <= num; returns {batch, seq}.
std::pair<std::int64_t, std::int64_t> Embedding::check_positions(const Tensor& t,
                                                                 const char* what) const {
  SPARQ_CHECK(t.ndim() == 3, "{}: position embeddings need {} [batch, seq, dim], got {}", name(),
              what, t.shape().str());
  const std::int64_t batch = t.dim(0), seq = t.dim(1);
  check_arg(t, {batch, seq, config_.dim}, name(), what, DType::kF32, device());
  SPARQ_CHECK(seq <= config_.num, "{}: sequence length {} exceeds the {} positions", name(), seq,
              config_.num);
  return {batch, seq};
}

void Embedding::forward_positions(const Tensor& y, bool accumulate) const {
  SPARQ_PROFILE_SCOPE("embedding.forward");  // Note [Profile scopes]
  const auto [batch, seq] = check_positions(y, "y");
  if (on_cuda()) {
#if SPARQ_HAS_CUDA
    cuda::embedding_forward_positions(table().data<float>(), y.data<float>(), batch, seq,
                                      config_.dim, accumulate, stream());
#endif
    return;
  }
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
  SPARQ_PROFILE_SCOPE("embedding.backward");  // Note [Profile scopes]
  const auto [batch, seq] = check_positions(dy, "dy");
  float* dtable = params_.grad(table_).data<float>();
  if (on_cuda()) {
#if SPARQ_HAS_CUDA
    cuda::embedding_backward_positions(dy.data<float>(), dtable, batch, seq, config_.dim,
                                       stream());
#endif
    return;
  }
  const float* src = dy.data<float>();
  const std::int64_t plane = seq * config_.dim;
#pragma omp parallel for schedule(static) if (plane > 32768)
  for (std::int64_t i = 0; i < plane; ++i) {
    float acc = 0;
    for (std::int64_t b = 0; b < batch; ++b) acc += src[b * plane + i];
    dtable[i] += acc;
  }
}

// The tied head is Linear's math with the table as the weight and no bias.
void Embedding::project(const Tensor& x, const Tensor& logits) const {
  SPARQ_PROFILE_SCOPE("lm_head.forward");  // Note [Profile scopes]
  const std::int64_t n = check_rows(x, config_.dim, name(), "x", device());
  SPARQ_CHECK(check_rows(logits, config_.num, name(), "logits", device()) == n,
              "{}: x {} and logits {} differ in rows", name(), x.shape().str(),
              logits.shape().str());
  if (on_cuda()) {
#if SPARQ_HAS_CUDA
    cuda::linear_forward(context().cuda(), x.data<float>(), table().data<float>(), nullptr,
                         logits.data<float>(), n, config_.dim, config_.num);
#endif
  } else {
    cpu::linear_forward<float>(x.data<float>(), table().data<float>(), nullptr,
                               logits.data<float>(), n, config_.dim, config_.num);
  }
}

void Embedding::project_backward(const Tensor& x, const Tensor& dlogits, const Tensor& dx) const {
  SPARQ_PROFILE_SCOPE("lm_head.backward");  // Note [Profile scopes]
  const std::int64_t n = check_rows(x, config_.dim, name(), "x", device());
  SPARQ_CHECK(check_rows(dlogits, config_.num, name(), "dlogits", device()) == n &&
                  check_rows(dx, config_.dim, name(), "dx", device()) == n,
              "{}: x {}, dlogits {} and dx {} differ in rows", name(), x.shape().str(),
              dlogits.shape().str(), dx.shape().str());
  float* dtable = params_.grad(table_).data<float>();
  if (on_cuda()) {
#if SPARQ_HAS_CUDA
    cuda::linear_backward(context().cuda(), x.data<float>(), table().data<float>(),
                          dlogits.data<float>(), dx.data<float>(), dtable, nullptr, n,
                          config_.dim, config_.num);
#endif
  } else {
    cpu::linear_backward<float>(x.data<float>(), table().data<float>(), dlogits.data<float>(),
                                dx.data<float>(), dtable, nullptr, n, config_.dim, config_.num);
  }
}

}  // namespace sparq
