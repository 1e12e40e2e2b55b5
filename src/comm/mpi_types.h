// MPI datatypes and reduction operators for sparq dtypes (internal to the MPI backend).
// f16 and bf16 have no MPI type: they travel as MPI_UINT16_T and are summed by user-defined
// operators that add in f32. MpiSumOps owns those operators (move-only; must be destroyed
// before MPI_Finalize).
#pragma once

#include <mpi.h>

#include <cstddef>

#include "core/dtype.h"

namespace sparq::comm {

MPI_Datatype mpi_datatype(DType dtype);

class MpiSumOps {
 public:
  MpiSumOps();  // requires an initialised MPI
  ~MpiSumOps();
  MpiSumOps(MpiSumOps&& other) noexcept;
  MpiSumOps& operator=(MpiSumOps&& other) noexcept;
  MpiSumOps(const MpiSumOps&) = delete;
  MpiSumOps& operator=(const MpiSumOps&) = delete;

  // The operator that sums `dtype` (MPI_SUM for natively supported types).
  MPI_Op sum(DType dtype) const;

 private:
  void release();
  MPI_Op half_sum_ = MPI_OP_NULL;
  MPI_Op bf16_sum_ = MPI_OP_NULL;
};

// inout[i] = in[i] + inout[i] for `count` host elements, with the same per-element math as
// MpiSumOps::sum(dtype) (f16/bf16: add in f32, round the sum once to 16 bits; integers:
// plain +, like MPI_SUM). Used by sparq's own ring allreduce (mpi_ring.h).
void sum_host(const void* in, void* inout, std::size_t count, DType dtype);

// data[i] /= divisor for a host array of a floating dtype (f32, f16, bf16), computed in f32.
void divide_host(void* data, std::size_t count, DType dtype, int divisor);

}  // namespace sparq::comm
