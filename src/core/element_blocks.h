// Elementwise loops over a flat range whose result does not depend on the thread count.
#pragma once

#include <algorithm>
#include <cstdint>

namespace sparq {

// Note [Elementwise loops in fixed blocks]
// `omp parallel for simd` (and an auto-vectorized `omp parallel for`) gives each thread one
// share of [0, n) and splits that share into a vector body and a scalar remainder, at
// positions that move with the thread count. Where multiply-adds may be contracted, the
// compiler can contract the vector and the scalar forms of one expression differently, so an
// element near a share's edge rounds differently with another OMP_NUM_THREADS: GELU-erf's
// backward differed in 1 ulp on 14% of inputs between the two paths, enough to change BERT's
// checksum at 3 threads (review, 2026-12-06). for_each_element_block() shares out fixed
// blocks instead, each a whole simd loop starting at a multiple of kElementBlock (a multiple
// of every vector width): an element takes the same path whatever the thread count. (The
// codec and optimizer loops compile without contraction instead: Note [Kernels that round
// as written], cmake/SparqTargets.cmake.)
inline constexpr std::int64_t kElementBlock = 4096;

// body(begin, end) for consecutive blocks of kElementBlock elements covering [0, n) (the last
// one shorter), shared among the threads when n > parallel_min. body runs its own
// `#pragma omp simd` loop over [begin, end).
template <typename Body>
void for_each_element_block(std::int64_t n, std::int64_t parallel_min, const Body& body) {
  const std::int64_t blocks = (n + kElementBlock - 1) / kElementBlock;
#pragma omp parallel for schedule(static) if (n > parallel_min)
  for (std::int64_t b = 0; b < blocks; ++b) {
    const std::int64_t begin = b * kElementBlock;
    body(begin, std::min(n, begin + kElementBlock));
  }
}

}  // namespace sparq
