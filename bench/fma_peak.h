// The machine's practical f32 FMA peak, measured with a tight loop of independent fused
// multiply-adds on every OpenMP thread. Kernels report their speed as a fraction of it.
#pragma once

namespace sparq::bench {

// GFLOP/s (2 flops per FMA lane) summed over `threads` threads, best of a few repetitions.
double measure_fma_peak_gflops(int threads);

}  // namespace sparq::bench
