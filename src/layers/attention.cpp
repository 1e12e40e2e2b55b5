#include "layers/attention.h"

#include <cmath>

#include "core/check.h"
#include "core/profile.h"
#include "core/threading.h"
#include "layers/dropout_mask.h"

#if SPARQ_HAS_CUDA
#include "core/cuda/device_resources.h"
#endif

namespace sparq {

MultiHeadAttention::MultiHeadAttention(std::string prefix, Config config)
    : name_(std::move(prefix)),
      config_(config),
      qkv_proj_(name_ + ".qkv", {config.dim, 3 * config.dim, true, config.init_std}),
      out_proj_(name_ + ".proj", {config.dim, config.dim, true, config.proj_init_std}) {
  const Config& c = config_;
  SPARQ_CHECK(c.heads > 0 && c.dim % c.heads == 0, "{}: {} heads do not divide dim {}", name_,
              c.heads, c.dim);
  SPARQ_CHECK(c.seq > 0 && c.max_batch > 0, "{}: need seq > 0 and max_batch > 0, got {} and {}",
              name_, c.seq, c.max_batch);
  SPARQ_CHECK(c.dropout >= 0.0f && c.dropout < 1.0f, "{}: dropout must be in [0, 1), got {}",
              name_, c.dropout);
  // Attention dropout draws one Philox value per score, at offsets below 2^kStepShift within a
  // step (DropoutKey, dropout_mask.h): more scores would reuse the next step's draws (review,
  // 2026-12-06; reachable from n_ctx 65536 with 256 rows of heads).
  const double scores = static_cast<double>(c.max_batch) * static_cast<double>(c.heads) *
                        static_cast<double>(c.seq) * static_cast<double>(c.seq);
  SPARQ_CHECK(c.dropout == 0.0f || scores < std::ldexp(1.0, DropoutKey::kStepShift),
              "{}: attention dropout over {} x {} heads x {}^2 scores passes the 2^{} draws a "
              "step holds; set the attention dropout to 0 or use fewer rows",
              name_, c.max_batch, c.heads, c.seq, DropoutKey::kStepShift);
  allocate_buffers();
}

std::int64_t MultiHeadAttention::core_cache_floats(Device device) const {
  const std::int64_t rows = config_.max_batch * config_.heads * config_.seq;
  return device == Device::kCUDA ? rows * config_.seq : rows;
}

std::size_t MultiHeadAttention::cache_bytes_on(Device device) const {
  const Config& c = config_;
  return static_cast<std::size_t>(c.max_batch * c.seq * 4 * c.dim + core_cache_floats(device)) *
         sizeof(float);
}

void MultiHeadAttention::allocate_buffers() {
  if (!on_cuda()) slots_ = max_threads();
  const std::size_t bytes = cache_bytes_on(device());
  cache_ = on_cuda() ? Buffer::device(bytes) : Buffer::host(bytes);
  workspace_->reserve(workspace_request(device()), device());
}

std::size_t MultiHeadAttention::workspace_request(Device device) const {
  const Config& c = config_;
  // The CUDA core's [B, H, T, T] area, or the CPU's per-thread flash areas.
  const std::int64_t core = device == Device::kCUDA
                                ? cuda::attention_scratch_floats(c.max_batch, c.heads, c.seq)
                                : static_cast<std::int64_t>(max_threads()) *
                                      cpu::attention_scratch_per_slot(c.seq, c.dim / c.heads);
  return static_cast<std::size_t>(c.max_batch * c.seq * 4 * c.dim + core) * sizeof(float);
}

void MultiHeadAttention::share_workspace(std::shared_ptr<SharedWorkspace> workspace) {
  SPARQ_CHECK(workspace != nullptr, "{}: share_workspace(nullptr)", name_);
  workspace_ = std::move(workspace);
  workspace_->reserve(workspace_request(device()), device());
}

// Note [Workspace turns] (shared_workspace.h): dctx, dqkv and the core's scratch are written
// and read within one forward or one backward; the workspace is read at each call.
float* MultiHeadAttention::core_scratch() const {
  return workspace_->floats() + config_.max_batch * config_.seq * 4 * config_.dim;
}

float* MultiHeadAttention::core_cache() const {
  return cache_.as<float>() + config_.max_batch * config_.seq * 3 * config_.dim;
}

float* MultiHeadAttention::ctx() const { return core_cache() + core_cache_floats(device()); }

void MultiHeadAttention::declare(ParamStore& store) const {
  qkv_proj_.declare(store);
  out_proj_.declare(store);
}

void MultiHeadAttention::bind(const ParamStore& store) {
  qkv_proj_.bind(store);
  out_proj_.bind(store);
  bind_context(store.context());
  if (cache_.device() != device()) allocate_buffers();
}

std::vector<std::string> MultiHeadAttention::param_names() const {
  std::vector<std::string> names = qkv_proj_.param_names();
  for (auto& n : out_proj_.param_names()) names.push_back(n);
  return names;
}

Tensor MultiHeadAttention::probs() const {
  const Shape shape{batch_, config_.heads, t_, t_};
  if (on_cuda()) return Tensor(core_cache(), DType::kF32, shape, device());
  const std::size_t bytes = static_cast<std::size_t>(shape.numel()) * sizeof(float);
  if (probs_.size() < bytes) probs_ = Buffer::host(bytes);
  cpu::attention_probs<float>(geom(DropoutStep{}), cache_.as<float>(), core_cache(),
                              probs_.as<float>());
  return probs_.view(DType::kF32, shape);
}

AttentionGeom MultiHeadAttention::geom(const DropoutStep& step) const {
  AttentionGeom g;
  g.batch = batch_;
  g.seq = t_;
  g.dim = config_.dim;
  g.heads = config_.heads;
  g.causal = config_.causal;
  g.key_valid = key_valid_.empty() ? nullptr : key_valid_.data<std::uint8_t>();
  g.dropout_p = step.training ? config_.dropout : 0.0f;
  g.key = DropoutKey::make(step, config_.layer_index);
  return g;
}

void MultiHeadAttention::forward(const Tensor& x, const Tensor& y, const Tensor& key_valid,
                                 const DropoutStep& step) {
  SPARQ_PROFILE_SCOPE("attention.forward");  // Note [Profile scopes]
  SPARQ_CHECK(x.ndim() == 3, "{}: x must be [B, T, C], got {}", name_, x.shape().str());
  const std::int64_t b = x.dim(0), t = x.dim(1), c = config_.dim;
  check_arg(x, {b, t, c}, name_, "x", DType::kF32, device());
  check_arg(y, {b, t, c}, name_, "y", DType::kF32, device());
  SPARQ_CHECK(b <= config_.max_batch && t <= config_.seq,
              "{}: x {} exceeds the cache's max_batch {} or seq {}", name_, x.shape().str(),
              config_.max_batch, config_.seq);
  if (!key_valid.empty()) check_arg(key_valid, {b, t}, name_, "key_valid", DType::kU8, device());
  batch_ = b;
  t_ = t;
  key_valid_ = key_valid;
  float* qkv = cache_.as<float>();
  qkv_proj_.forward(x, Tensor(qkv, DType::kF32, {b, t, 3 * c}, device()));
  if (on_cuda()) {
#if SPARQ_HAS_CUDA
    cuda::attention_forward(geom(step), context().cuda(), qkv, core_cache(), ctx(),
                            core_scratch());
#endif
  } else {
    cpu::attention_forward<float>(geom(step), qkv, core_cache(), ctx(), core_scratch(), slots_);
  }
  out_proj_.forward(Tensor(ctx(), DType::kF32, {b, t, c}, device()), y);
}

void MultiHeadAttention::backward(const Tensor& x, const Tensor& dy, const Tensor& dx,
                                  const DropoutStep& step) {
  SPARQ_PROFILE_SCOPE("attention.backward");  // Note [Profile scopes]
  const std::int64_t b = batch_, t = t_, c = config_.dim;
  SPARQ_CHECK(b > 0, "{}: backward before forward", name_);
  check_arg(x, {b, t, c}, name_, "x (shape of the last forward)", DType::kF32, device());
  check_arg(dy, {b, t, c}, name_, "dy", DType::kF32, device());
  check_arg(dx, {b, t, c}, name_, "dx", DType::kF32, device());
  const Tensor qkv(cache_.as<float>(), DType::kF32, {b, t, 3 * c}, device());
  const Tensor context_out(ctx(), DType::kF32, {b, t, c}, device());
  const Tensor dctx(workspace_->floats(), DType::kF32, {b, t, c}, device());
  const Tensor dqkv(workspace_->floats() + config_.max_batch * config_.seq * c, DType::kF32,
                    {b, t, 3 * c}, device());
  out_proj_.backward(context_out, dy, dctx);
  if (on_cuda()) {
#if SPARQ_HAS_CUDA
    cuda::attention_backward(geom(step), context().cuda(), qkv.data<float>(), core_cache(),
                             dctx.data<float>(), dqkv.data<float>(), core_scratch());
#endif
  } else {
    cpu::attention_backward<float>(geom(step), qkv.data<float>(), ctx(), core_cache(),
                                   dctx.data<float>(), dqkv.data<float>(), core_scratch(),
                                   slots_);
  }
  qkv_proj_.backward(x, dqkv, dx);
}

}  // namespace sparq
