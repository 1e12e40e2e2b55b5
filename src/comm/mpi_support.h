// Small pieces of the MPI backend (comm/mpi_communicator.cpp, mpi_ring.cpp, mpi_startup.cpp):
// MPI's int counts and how larger transfers are cut, buffer-overlap and layout checks, and the
// RAII owners of MPI's lifetime and of a duplicated communicator. Internal to src/comm;
// applications use mpi_communicator.h.
#pragma once

#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "comm/mpi_check.h"
#include "comm/mpi_communicator.h"
#include "core/check.h"

namespace sparq::comm::mpi_support {

// Largest element count handed to one MPI call; bigger transfers are split (MPI counts are int).
inline constexpr std::size_t kMaxChunk = std::size_t{1} << 30;

// Calls fn(first_element, n) over [0, count) in pieces MPI's int counts can hold. A zero count
// still makes one call with n == 0: point-to-point peers expect exactly one message.
template <typename Fn>
void for_each_chunk(std::size_t count, Fn&& fn) {
  std::size_t done = 0;
  do {
    const int n = static_cast<int>(std::min(kMaxChunk, count - done));
    fn(done, n);
    done += static_cast<std::size_t>(n);
  } while (done < count);
}

inline bool mpi_alive() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  return initialized && !finalized;
}

inline const char* thread_level_name(int level) {
  switch (level) {
    case MPI_THREAD_SINGLE:
      return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED:
      return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED:
      return "MPI_THREAD_SERIALIZED";
    case MPI_THREAD_MULTIPLE:
      return "MPI_THREAD_MULTIPLE";
    default:
      return "an unknown MPI thread level";
  }
}

inline int to_int(std::size_t value, const char* op, const char* what) {
  SPARQ_CHECK(value <= static_cast<std::size_t>(INT_MAX),
              "{}: {} = {} exceeds INT_MAX, the largest count one MPI call accepts", op, what,
              value);
  return static_cast<int>(value);
}

// `what` names the per-rank value ("counts[r]"); the message adds which r.
inline std::vector<int> to_ints(std::span<const std::size_t> values, const char* op,
                                const char* what) {
  std::vector<int> out(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) {
    SPARQ_CHECK(values[i] <= static_cast<std::size_t>(INT_MAX),
                "{}: {} = {} for r = {} exceeds INT_MAX, the largest count or offset one MPI "
                "call accepts",
                op, what, values[i], i);
    out[i] = static_cast<int>(values[i]);
  }
  return out;
}

inline bool overlaps(const void* a, std::size_t a_bytes, const void* b, std::size_t b_bytes) {
  const auto pa = reinterpret_cast<std::uintptr_t>(a);
  const auto pb = reinterpret_cast<std::uintptr_t>(b);
  return a_bytes > 0 && b_bytes > 0 && pa < pb + b_bytes && pb < pa + a_bytes;
}

// Owns a duplicate of a parent communicator, with errors returned to MPI_CHECK.
class OwnedComm {
 public:
  explicit OwnedComm(MPI_Comm parent) {
    MPI_CHECK(MPI_Comm_dup(parent, &comm_));
    MPI_CHECK(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
  }
  ~OwnedComm() {
    if (comm_ != MPI_COMM_NULL && mpi_alive()) MPI_Comm_free(&comm_);
  }
  OwnedComm(const OwnedComm&) = delete;
  OwnedComm& operator=(const OwnedComm&) = delete;
  MPI_Comm get() const { return comm_; }

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
};

// The MPI communicator (comm/mpi_communicator.cpp) on a duplicate of `parent`, for
// comm/mpi_startup.cpp, which has checked MPI's thread level.
std::unique_ptr<Communicator> new_mpi_communicator(MPI_Comm parent, int thread_level,
                                                   MpiOptions options);

}  // namespace sparq::comm::mpi_support
