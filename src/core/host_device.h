// SPARQ_HOST_DEVICE marks per-element math that the CPU and the CUDA kernels share (Philox
// draws, dtype conversion, GELU, optimizer updates, quantizers): one definition, compiled by
// g++ for the host and by nvcc for both, so the CPU tests cover the device's arithmetic and
// both sides give the same bits for the same inputs. Such functions must be header-inline,
// free of fmt/spdlog/Status (nvcc cannot compile them), and must not depend on the host's
// floating-point environment (no -ffast-math anywhere; fma only where both sides use it).
#pragma once

#ifdef __CUDACC__
#define SPARQ_HOST_DEVICE __host__ __device__
#else
#define SPARQ_HOST_DEVICE
#endif
