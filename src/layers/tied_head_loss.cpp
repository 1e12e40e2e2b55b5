#include "layers/tied_head_loss.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/check.h"
#include "core/gemm.h"
#include "core/profile.h"
#include "layers/linear.h"
#include "layers/vector_math.h"

namespace sparq {
namespace {

// One row of a chunk: z holds its logits (+ bias already added). Returns the row's loss and
// its prediction; with a gradient, z becomes grad_scale * (softmax - onehot(target)).
struct RowResult {
  double loss;
  std::int32_t prediction;
};
RowResult softmax_row(float* z, std::int64_t valid, std::int32_t target, bool gradient,
                      float grad_scale) {
  float mx = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : mx)
  for (std::int64_t j = 0; j < valid; ++j) mx = std::max(mx, z[j]);
  // Note [Prediction rule] (prediction_rule.h): the first maximum, NaN never it (std::max
  // keeps mx when a NaN comes); a row of NaN finds none and predicts 0.
  std::int64_t arg = 0;
  while (arg < valid && !(z[arg] == mx)) ++arg;
  const float target_logit = z[target];
  float sum = 0;
  if (gradient) {
#pragma omp simd reduction(+ : sum)
    for (std::int64_t j = 0; j < valid; ++j) {
      z[j] = cpu::exp_nonpositive(z[j] - mx);
      sum += z[j];
    }
  } else {
#pragma omp simd reduction(+ : sum)
    for (std::int64_t j = 0; j < valid; ++j) sum += cpu::exp_nonpositive(z[j] - mx);
  }
  const double loss = std::log(static_cast<double>(sum)) + mx - target_logit;
  if (gradient) {
    const float k = grad_scale / sum;
#pragma omp simd
    for (std::int64_t j = 0; j < valid; ++j) z[j] *= k;
    z[target] -= grad_scale;
  }
  return {loss, static_cast<std::int32_t>(arg < valid ? arg : 0)};
}

}  // namespace

TiedHeadLoss::TiedHeadLoss(std::string name, Config config)
    : name_(std::move(name)), config_(config) {
  if (config_.valid_vocab == 0) config_.valid_vocab = config_.vocab;
  SPARQ_CHECK(config_.vocab > 0 && config_.valid_vocab > 0 && config_.valid_vocab <= config_.vocab,
              "{}: need 0 < valid_vocab {} <= vocab {}", name_, config_.valid_vocab, config_.vocab);
  SPARQ_CHECK(config_.dim > 0 && config_.max_rows > 0, "{}: need dim {} > 0 and max_rows {} > 0",
              name_, config_.dim, config_.max_rows);
  SPARQ_CHECK(config_.chunk_rows >= 0, "{}: chunk_rows must not be negative, got {}", name_,
              config_.chunk_rows);
  chunk_rows_ =
      config_.chunk_rows > 0 ? config_.chunk_rows : default_chunk_rows(config_.valid_vocab);
  chunk_rows_ = std::min(chunk_rows_, config_.max_rows);
  const auto floats = [](std::int64_t n) { return static_cast<std::size_t>(n) * sizeof(float); };
  logits_ = Buffer::host(floats(chunk_rows_ * config_.valid_vocab));
  rows_x_ = Buffer::host(floats(chunk_rows_ * config_.dim));
  rows_dx_ = Buffer::host(floats(chunk_rows_ * config_.dim));
  counted_rows_.reserve(static_cast<std::size_t>(config_.max_rows));
  row_loss_.reserve(static_cast<std::size_t>(config_.max_rows));
  predictions_.reserve(static_cast<std::size_t>(config_.max_rows));
}

std::size_t TiedHeadLoss::workspace_bytes() const {
  return logits_.size() + rows_x_.size() + rows_dx_.size() +
         static_cast<std::size_t>(config_.max_rows) *
             (sizeof(std::int64_t) + sizeof(double) + sizeof(std::int32_t));
}

float TiedHeadLoss::forward(const Tensor& x, const Operands& head, const Tensor& targets) {
  SPARQ_PROFILE_SCOPE("tied_head_loss.forward");  // Note [Profile scopes]
  return run(x, head, targets, nullptr, 0.0f);
}

float TiedHeadLoss::forward_backward(const Tensor& x, const Operands& head, const Tensor& targets,
                                     const Tensor& dx, float dloss) {
  SPARQ_PROFILE_SCOPE("tied_head_loss.forward_backward");  // Note [Profile scopes]
  SPARQ_CHECK(check_rows(dx, config_.dim, name_, "dx") * config_.dim == x.numel(),
              "{}: dx {} does not match x {}", name_, dx.shape().str(), x.shape().str());
  check_arg(head.dtable, {config_.vocab, config_.dim}, name_, "dtable");
  if (!head.bias.empty()) check_arg(head.dbias, {config_.vocab}, name_, "dbias");
  return run(x, head, targets, dx.data<float>(), dloss);
}

float TiedHeadLoss::run(const Tensor& x, const Operands& head, const Tensor& targets, float* dx,
                        float dloss) {
  SPARQ_CHECK(device() == Device::kCPU, "{}: the fused head runs on the CPU only", name_);
  const std::int64_t n = check_rows(x, config_.dim, name_, "x");
  SPARQ_CHECK(n <= config_.max_rows, "{}: {} rows exceed max_rows {}", name_, n, config_.max_rows);
  check_arg(head.table, {config_.vocab, config_.dim}, name_, "table");
  if (!head.bias.empty()) check_arg(head.bias, {config_.vocab}, name_, "bias");
  SPARQ_CHECK(!targets.empty() && targets.is_cpu() && targets.dtype() == DType::kI32 &&
                  targets.numel() == n,
              "{}: targets must be host int32 with {} elements, got {}", name_, n, targets.str());
  const std::int32_t* t = targets.data<std::int32_t>();
  counted_rows_.clear();
  for (std::int64_t i = 0; i < n; ++i) {
    if (t[i] == config_.ignore_index) continue;
    SPARQ_CHECK(t[i] >= 0 && t[i] < config_.valid_vocab,
                "{}: target {} at row {} is outside [0, {}) and is not the ignore index {}", name_,
                t[i], i, config_.valid_vocab, config_.ignore_index);
    counted_rows_.push_back(i);
  }
  counted_ = static_cast<std::int64_t>(counted_rows_.size());
  predictions_.assign(static_cast<std::size_t>(n), -1);
  row_loss_.assign(static_cast<std::size_t>(counted_), 0.0);
  const std::int64_t c = config_.dim, valid = config_.valid_vocab;
  const bool gradient = dx != nullptr;
  if (gradient) std::fill(dx, dx + n * c, 0.0f);  // ignored rows keep a zero gradient
  const float grad_scale = counted_ > 0 ? dloss / static_cast<float>(counted_) : 0.0f;

  const float* xs = x.data<float>();
  const float* table = head.table.data<float>();
  const float* bias = head.bias.empty() ? nullptr : head.bias.data<float>();
  float* z = logits_.as<float>();
  for (std::int64_t first = 0; first < counted_; first += chunk_rows_) {
    const std::int64_t rows = std::min(chunk_rows_, counted_ - first);
    const std::int64_t* idx = counted_rows_.data() + first;
    // Contiguous rows (GPT-2's usual case) are used in place; others are gathered.
    const bool contiguous = idx[rows - 1] - idx[0] == rows - 1;
    const float* xc = xs + idx[0] * c;
    if (!contiguous) {
      float* gathered = rows_x_.as<float>();
      for (std::int64_t r = 0; r < rows; ++r) {
        std::memcpy(gathered + r * c, xs + idx[r] * c, static_cast<std::size_t>(c) * sizeof(float));
      }
      xc = gathered;
    }
    // logits [rows, valid] = xc [rows, C] * table[:valid]^T
    {
      SPARQ_PROFILE_SCOPE("tied_head_loss.logits_gemm");
      gemm({false, true, rows, valid, c, c, c, valid}, 1.0f, xc, table, 0.0f, z);
    }
#pragma omp parallel for schedule(static) if (rows * valid > 32768)
    for (std::int64_t r = 0; r < rows; ++r) {
      float* zr = z + r * valid;
      if (bias != nullptr) {
#pragma omp simd
        for (std::int64_t j = 0; j < valid; ++j) zr[j] += bias[j];
      }
      const RowResult res = softmax_row(zr, valid, t[idx[r]], gradient, grad_scale);
      row_loss_[static_cast<std::size_t>(first + r)] = res.loss;
      predictions_[static_cast<std::size_t>(idx[r])] = res.prediction;
    }
    if (!gradient) continue;
    // dx rows [rows, C] = dlogits [rows, valid] * table[:valid]
    float* dxc = contiguous ? dx + idx[0] * c : rows_dx_.as<float>();
    {
      SPARQ_PROFILE_SCOPE("tied_head_loss.dx_gemm");
      gemm({false, false, rows, c, valid, valid, c, c}, 1.0f, z, table, 0.0f, dxc);
    }
    if (!contiguous) {
      for (std::int64_t r = 0; r < rows; ++r) {
        std::memcpy(dx + idx[r] * c, dxc + r * c, static_cast<std::size_t>(c) * sizeof(float));
      }
    }
    // dtable[:valid] += dlogits^T [valid, rows] * xc [rows, C]
    {
      SPARQ_PROFILE_SCOPE("tied_head_loss.dtable_gemm");
      gemm({true, false, valid, c, rows, valid, c, c}, 1.0f, z, xc, 1.0f,
           head.dtable.data<float>());
    }
    if (bias != nullptr) cpu::add_column_sums<float>(z, head.dbias.data<float>(), rows, valid);
  }
  double total = 0;
  for (const double l : row_loss_) total += l;
  return counted_ > 0 ? static_cast<float>(total / static_cast<double>(counted_)) : 0.0f;
}

}  // namespace sparq
