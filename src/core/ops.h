// Flat elementwise and reduction helpers on host f32 arrays, OpenMP-parallel above a size
// threshold so tiny calls do not pay for a parallel region. Reductions accumulate in double
// over a fixed partition, so results depend neither on timing nor on the thread count (Note
// [Thread-free reductions], ops.cpp).
#pragma once

#include <cstddef>

namespace sparq::ops {

void fill(float* x, std::size_t n, float value);
void copy(const float* x, float* y, std::size_t n);
void scale(float* x, std::size_t n, float alpha);               // x *= alpha
void axpy(float alpha, const float* x, float* y, std::size_t n);  // y += alpha * x
void add(const float* a, const float* b, float* out, std::size_t n);  // out = a + b

double sum(const float* x, std::size_t n);
double dot(const float* x, const float* y, std::size_t n);
double sum_squares(const float* x, std::size_t n);
float max_abs(const float* x, std::size_t n);  // NaN when any x is NaN; 0 when n == 0
bool all_finite(const float* x, std::size_t n);

}  // namespace sparq::ops
