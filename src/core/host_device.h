// SPARQ_HOST_DEVICE marks per-element math that the CPU and the CUDA kernels share (Philox
// draws, dtype conversion, GELU, optimizer updates, quantizers): one definition, compiled by
// g++ for the host and by nvcc for both, so the CPU tests cover the device's arithmetic and
// both sides give the same bits for the same inputs. Such functions must be header-inline,
// free of fmt/spdlog/Status (nvcc cannot compile them), and must not depend on the host's
// floating-point environment (no -ffast-math anywhere; fma only where both sides use it).
#pragma once

#include <cmath>

#ifdef __CUDACC__
#define SPARQ_HOST_DEVICE __host__ __device__
#else
#define SPARQ_HOST_DEVICE
#endif

namespace sparq {

// Note [Written-out multiply-adds]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// nvcc contracts a * b + c into one fused multiply-add, and so does g++ on a host that has
// FMA (-march=native); in x * y + z * w each may fuse either product. Shared per-element math
// that must give the device's bits on the host writes its multiply-adds out with mul_add():
// rounded once (fmaf) on the device and on FMA hosts, where the forms chosen are those g++
// picked before, so the CPU's results did not change. x86 names FMA __FMA__ (-march=native or
// -mfma), Arm __ARM_FEATURE_FMA (every AArch64: a Grace host beside its GPU rounded twice
// while its device fused; review, 2026-12-07). An x86 host compiled without FMA rounds twice,
// as it always did (its bits then differ from the device's).
SPARQ_HOST_DEVICE inline float mul_add(float a, float b, float c) {
#if defined(__CUDA_ARCH__) || defined(__FMA__) || defined(__ARM_FEATURE_FMA)
  return fmaf(a, b, c);
#else
  return a * b + c;
#endif
}

}  // namespace sparq
