// Scalar-generic matrix product for the layer kernels, so each kernel can be instantiated
// for float (production: core/gemm.h, Eigen + OpenMP) and for double (the tests' finite-
// difference checks). Same contract as sparq::gemm (row-major, op(A)[M,K] * op(B)[K,N],
// C not read when beta == 0). Called inside an OpenMP region it runs single-threaded.
#pragma once

#include "core/gemm.h"

namespace sparq {

template <typename T>
void matmul(const GemmShape& shape, T alpha, const T* a, const T* b, T beta, T* c);

}  // namespace sparq
