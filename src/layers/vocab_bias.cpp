#include "layers/vocab_bias.h"

#include <algorithm>

#include "core/check.h"
#include "core/profile.h"
#include "layers/linear.h"

#if SPARQ_HAS_CUDA
#include "layers/cuda/vocab_bias_cuda.h"
#endif

namespace sparq {
namespace cpu {

void vocab_bias_forward(const float* b, float* y, std::int64_t rows, std::int64_t vocab) {
#pragma omp parallel for schedule(static) if (rows * vocab > 32768)
  for (std::int64_t r = 0; r < rows; ++r) {
    float* row = y + r * vocab;
    for (std::int64_t j = 0; j < vocab; ++j) row[j] += b[j];
  }
}

void vocab_bias_backward(const float* dy, float* db, std::int64_t rows, std::int64_t vocab) {
  add_column_sums(dy, db, rows, vocab);
}

}  // namespace cpu

VocabBias::VocabBias(std::string prefix, std::int64_t vocab)
    : ParamLayer(std::move(prefix)), vocab_(vocab) {
  SPARQ_CHECK(vocab_ > 0, "{}: VocabBias needs vocab > 0, got {}", name(), vocab_);
  bias_ = params_.add("bias", {vocab_}, Init::zeros(), false);
}

void VocabBias::bind(const ParamStore& store) {
  ParamLayer::bind(store);
  scratch_ = Buffer();
#if SPARQ_HAS_CUDA
  if (on_cuda()) {
    scratch_ = Buffer::device(cuda::vocab_bias_backward_scratch_floats(vocab_) * sizeof(float));
  }
#endif
}

void VocabBias::forward(const Tensor& logits) const {
  SPARQ_PROFILE_SCOPE("vocab_bias.forward");  // Note [Profile scopes]
  const std::int64_t rows = check_rows(logits, vocab_, name(), "logits", device());
  const float* b = params_.param(bias_).data<float>();
  if (on_cuda()) {
#if SPARQ_HAS_CUDA
    cuda::vocab_bias_forward(b, logits.data<float>(), rows, vocab_, stream());
#endif
  } else {
    cpu::vocab_bias_forward(b, logits.data<float>(), rows, vocab_);
  }
}

void VocabBias::backward(const Tensor& dlogits) const {
  SPARQ_PROFILE_SCOPE("vocab_bias.backward");  // Note [Profile scopes]
  const std::int64_t rows = check_rows(dlogits, vocab_, name(), "dlogits", device());
  float* db = params_.grad(bias_).data<float>();
  if (on_cuda()) {
#if SPARQ_HAS_CUDA
    cuda::vocab_bias_backward(dlogits.data<float>(), db, scratch_.as<float>(), rows, vocab_,
                              stream());
#endif
  } else {
    cpu::vocab_bias_backward(dlogits.data<float>(), db, rows, vocab_);
  }
}

}  // namespace sparq
