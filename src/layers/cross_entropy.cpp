#include "layers/cross_entropy.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/check.h"
#include "core/profile.h"
#include "layers/param_set.h"

#if SPARQ_HAS_CUDA
#include "layers/cuda/cross_entropy_cuda.h"
#endif

namespace sparq {
namespace cpu {

template <typename T>
double cross_entropy(const T* logits, const std::int32_t* targets, T* dlogits, T* row_loss,
                     std::int64_t n, std::int64_t v, std::int64_t valid, std::int32_t ignore_index,
                     T dloss) {
  std::int64_t count = 0;
  for (std::int64_t i = 0; i < n; ++i) count += targets[i] != ignore_index;
  const T grad_scale = count > 0 ? dloss / static_cast<T>(count) : T(0);
#pragma omp parallel for schedule(static) if (n * v > 32768)
  for (std::int64_t i = 0; i < n; ++i) {
    const T* x = logits + i * v;
    T* dx = dlogits != nullptr ? dlogits + i * v : nullptr;
    if (targets[i] == ignore_index) {
      row_loss[i] = 0;
      if (dx != nullptr) std::fill(dx, dx + v, T(0));
      continue;
    }
    T mx = -std::numeric_limits<T>::infinity();
    for (std::int64_t j = 0; j < valid; ++j) mx = std::max(mx, x[j]);
    const T target_logit = x[targets[i]];
    // Sum the exponentials, keeping them in dx when a gradient is wanted: the gradient pass
    // then only rescales a row that is still in cache.
    T sum = 0;
    if (dx != nullptr) {
      for (std::int64_t j = 0; j < valid; ++j) {
        dx[j] = std::exp(x[j] - mx);
        sum += dx[j];
      }
    } else {
      for (std::int64_t j = 0; j < valid; ++j) sum += std::exp(x[j] - mx);
    }
    row_loss[i] = std::log(sum) + mx - target_logit;
    if (dx == nullptr) continue;
    const T k = grad_scale / sum;
    for (std::int64_t j = 0; j < valid; ++j) dx[j] *= k;
    dx[targets[i]] -= grad_scale;
    std::fill(dx + valid, dx + v, T(0));
  }
  double total = 0;
  for (std::int64_t i = 0; i < n; ++i) total += row_loss[i];
  return count > 0 ? total / static_cast<double>(count) : 0.0;
}

template double cross_entropy<float>(const float*, const std::int32_t*, float*, float*,
                                     std::int64_t, std::int64_t, std::int64_t, std::int32_t,
                                     float);
template double cross_entropy<double>(const double*, const std::int32_t*, double*, double*,
                                      std::int64_t, std::int64_t, std::int64_t, std::int32_t,
                                      double);

}  // namespace cpu

CrossEntropy::CrossEntropy(std::string name, Config config)
    : name_(std::move(name)), config_(config) {
  if (config_.valid_vocab == 0) config_.valid_vocab = config_.vocab;
  SPARQ_CHECK(config_.vocab > 0 && config_.valid_vocab > 0 && config_.valid_vocab <= config_.vocab,
              "{}: need 0 < valid_vocab {} <= vocab {}", name_, config_.valid_vocab,
              config_.vocab);
  SPARQ_CHECK(config_.max_rows > 0, "{}: max_rows must be positive, got {}", name_,
              config_.max_rows);
  place_buffers();
}

#if SPARQ_HAS_CUDA
namespace {
// The device totals follow the row losses, on the buffer's 256-byte alignment.
std::size_t totals_offset(std::int64_t max_rows) {
  const std::size_t bytes = static_cast<std::size_t>(max_rows) * sizeof(float);
  return (bytes + Buffer::kDefaultAlignment - 1) / Buffer::kDefaultAlignment *
         Buffer::kDefaultAlignment;
}
}  // namespace
#endif

void CrossEntropy::place_buffers() {
  if (losses_.data() != nullptr && losses_.device() == device()) return;
  host_totals_ = Buffer();
  if (on_cuda()) {
#if SPARQ_HAS_CUDA
    losses_ = Buffer::device(totals_offset(config_.max_rows) + sizeof(cuda::CrossEntropyTotals),
                             true);
    host_totals_ = Buffer::pinned(sizeof(cuda::CrossEntropyTotals), true);
    return;
#endif
  }
  losses_ = Buffer::host(config_.max_rows * sizeof(float), true);
}

float CrossEntropy::run(const Tensor& logits, const Tensor& targets, float* dlogits, float dloss) {
  const std::int64_t n = check_rows(logits, config_.vocab, name_, "logits", device());
  SPARQ_CHECK(n <= config_.max_rows, "{}: {} rows exceed max_rows {}", name_, n, config_.max_rows);
  // On the device of the context bound now, on either path: bound back to the CPU after a
  // CUDA run, the CPU path wrote its row losses through a device pointer (review, 2026-12-07).
  place_buffers();
  if (on_cuda()) return run_cuda(logits, targets, dlogits, dloss);
  SPARQ_CHECK(!targets.empty() && targets.is_cpu() && targets.dtype() == DType::kI32 &&
                  targets.numel() == n,
              "{}: targets must be host int32 with {} elements, got {}", name_, n, targets.str());
  const std::int32_t* t = targets.data<std::int32_t>();
  std::int64_t counted = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    if (t[i] == config_.ignore_index) continue;
    SPARQ_CHECK(t[i] >= 0 && t[i] < config_.valid_vocab,
                "{}: target {} at row {} is outside [0, {}) and is not the ignore index {}", name_,
                t[i], i, config_.valid_vocab, config_.ignore_index);
    ++counted;
  }
  rows_ = n;
  counted_ = counted;
  return static_cast<float>(cpu::cross_entropy<float>(logits.data<float>(), t, dlogits,
                                                      losses_.as<float>(), n, config_.vocab,
                                                      config_.valid_vocab, config_.ignore_index,
                                                      dloss));
}

float CrossEntropy::run_cuda(const Tensor& logits, const Tensor& targets, float* dlogits,
                             float dloss) {
  const std::int64_t n = logits.numel() / config_.vocab;
  SPARQ_CHECK(!targets.empty() && targets.device() == device() && targets.dtype() == DType::kI32 &&
                  targets.numel() == n,
              "{}: targets must be int32 on {} with {} elements, got {}", name_,
              device_name(device()), n, targets.str());
#if SPARQ_HAS_CUDA
  auto* totals = reinterpret_cast<cuda::CrossEntropyTotals*>(losses_.as<char>() +
                                                             totals_offset(config_.max_rows));
  auto* host = host_totals_.as<cuda::CrossEntropyTotals>();
  cuda::cross_entropy(logits.data<float>(), targets.data<std::int32_t>(), dlogits,
                      losses_.as<float>(), n, config_.vocab, config_.valid_vocab,
                      config_.ignore_index, dloss, totals, host, stream());
  // The loss is returned as a host float, so the host must wait for the stream here: the
  // one synchronisation of this layer, and it also lets us refuse a bad target by name.
  context().synchronize();
  SPARQ_CHECK(host->first_bad_row < 0,
              "{}: target {} at row {} is outside [0, {}) and is not the ignore index {}", name_,
              host->bad_target, host->first_bad_row, config_.valid_vocab, config_.ignore_index);
  rows_ = n;
  counted_ = host->counted;
  return static_cast<float>(counted_ > 0 ? host->loss_sum / static_cast<double>(counted_) : 0.0);
#else
  return 0.0f;  // unreachable: a CUDA context needs a CUDA build
#endif
}

float CrossEntropy::forward(const Tensor& logits, const Tensor& targets) {
  SPARQ_PROFILE_SCOPE("cross_entropy.forward");  // Note [Profile scopes]
  return run(logits, targets, nullptr, 0.0f);
}

float CrossEntropy::forward_backward(const Tensor& logits, const Tensor& targets,
                                     const Tensor& dlogits, float dloss) {
  SPARQ_PROFILE_SCOPE("cross_entropy.backward");  // Note [Profile scopes]
  SPARQ_CHECK(check_rows(dlogits, config_.vocab, name_, "dlogits", device()) * config_.vocab ==
                  logits.numel(),
              "{}: dlogits {} does not match logits {}", name_, dlogits.shape().str(),
              logits.shape().str());
  return run(logits, targets, dlogits.data<float>(), dloss);
}

}  // namespace sparq
