// Every CPU activation gives the same bits at 1 to 5 threads on a length that is no multiple
// of anything (Note [Elementwise loops in fixed blocks], core/element_blocks.h). With
// `omp parallel for simd`, GELU-erf's backward differed in up to 7 elements at 2..7 threads
// (review, 2026-12-06): the vector and scalar forms of its expression round differently, and
// where one ends moved with the thread count. 1 and 2 threads on aligned sizes never showed it.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "core/rng.h"
#include "core/threading.h"
#include "layers/activation.h"

namespace sparq {
namespace {

using Kernel = std::function<void(const float*, const float*, float*, std::int64_t)>;

TEST(ActivationThreads, EveryKernelIsBitwiseTheSameAtAnyThreadCount) {
  const std::int64_t n = 1000003;
  Rng rng(11, 3);
  std::vector<float> x(n), dy(n);
  for (auto& v : x) v = 4.0f * rng.normal();
  for (auto& v : dy) v = rng.normal();
  const std::vector<std::pair<std::string, Kernel>> kernels = {
      {"relu_forward", [](const float* a, const float*, float* o,
                          std::int64_t m) { cpu::relu_forward(a, o, m); }},
      {"relu_backward", [](const float* a, const float* d, float* o,
                           std::int64_t m) { cpu::relu_backward(a, d, o, m); }},
      {"gelu_tanh_forward", [](const float* a, const float*, float* o,
                               std::int64_t m) { cpu::gelu_forward(GeluKind::kTanh, a, o, m); }},
      {"gelu_erf_forward", [](const float* a, const float*, float* o,
                              std::int64_t m) { cpu::gelu_forward(GeluKind::kErf, a, o, m); }},
      {"gelu_tanh_backward",
       [](const float* a, const float* d, float* o, std::int64_t m) {
         cpu::gelu_backward(GeluKind::kTanh, a, d, o, m);
       }},
      {"gelu_erf_backward",
       [](const float* a, const float* d, float* o, std::int64_t m) {
         cpu::gelu_backward(GeluKind::kErf, a, d, o, m);
       }},
      {"tanh_forward", [](const float* a, const float*, float* o,
                          std::int64_t m) { cpu::tanh_forward(a, o, m); }},
      {"tanh_backward", [](const float* a, const float* d, float* o,
                           std::int64_t m) { cpu::tanh_backward(a, d, o, m); }},
  };
  const int saved = max_threads();
  for (const auto& [name, kernel] : kernels) {
    set_num_threads(1);
    std::vector<float> one(n), many(n);
    kernel(x.data(), dy.data(), one.data(), n);
    for (int threads = 2; threads <= 5; ++threads) {
      set_num_threads(threads);
      kernel(x.data(), dy.data(), many.data(), n);
      std::int64_t differ = 0;
      for (std::int64_t i = 0; i < n; ++i) differ += std::memcmp(&one[i], &many[i], 4) != 0;
      EXPECT_EQ(differ, 0) << name << " at " << threads << " threads";
    }
  }
  set_num_threads(saved);
}

}  // namespace
}  // namespace sparq
