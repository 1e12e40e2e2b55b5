// Argument checks shared by every Communicator backend, so that a bad call fails the same
// way (SPARQ_CHECK, naming the operation and the bad value) whichever backend runs it.
// Broken arguments are programming errors, not expected failures: they end the job.
#pragma once

#include <cstddef>
#include <span>

#include "comm/communicator.h"
#include "core/dtype.h"

namespace sparq::comm {

// counts (and displs, unless empty) must have one entry per rank.
void check_per_rank(const char* op, const char* what, std::span<const std::size_t> values,
                    int size);
// ReduceOp::kAvg needs a floating-point dtype (an integer mean would silently truncate).
void check_reduce(const char* op, DType dtype, ReduceOp reduce);
void check_rank_arg(const char* op, const char* what, int value, int size);
// Point-to-point tags are >= 0 (MPI's rule; the other backends keep it so that code passing
// with one rank or on NCCL does not fail under mpirun: review, 2026-12-06).
void check_tag(const char* op, int tag);
// Non-null unless the byte count is zero.
void check_buffer(const char* op, const char* what, const void* buffer, std::size_t bytes);

// Extent in elements of a layout of blocks (counts[i] at displs[i]): the size a buffer
// holding it needs.
inline std::size_t extent(std::span<const std::size_t> counts,
                          std::span<const std::size_t> displs) {
  std::size_t end = 0;
  for (std::size_t i = 0; i < counts.size(); ++i) {
    if (counts[i] > 0) end = end > displs[i] + counts[i] ? end : displs[i] + counts[i];
  }
  return end;
}

}  // namespace sparq::comm
