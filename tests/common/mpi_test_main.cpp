// main() for GoogleTest binaries run under mpirun. Initialises MPI with
// MPI_THREAD_MULTIPLE (the MPI communicator accepts an already-initialised MPI), prints the
// test log on rank 0 only (the other ranks print their failures, each line prefixed with
// the rank), and makes the process exit non-zero on EVERY rank when any rank
// failed, so ctest sees the failure whichever rank hit it. When no rank failed and every rank
// skipped every test, every rank exits 77 (Note [Skipped test binaries], common/skip_code.h).
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>

#include "common/skip_code.h"
#include "core/log.h"

namespace {

// The other ranks' printer: their failed assertions and tests only. Without it a failure
// on rank 1 showed just "rank 1 of 2: tests FAILED", with no file, line or message.
class FailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit FailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& result) override {
    if (!result.failed()) return;
    std::fprintf(stderr, "rank %d: %s:%d: Failure\n%s\n", rank_,
                 result.file_name() ? result.file_name() : "?", result.line_number(),
                 result.message());
  }
  void OnTestEnd(const ::testing::TestInfo& info) override {
    if (info.result()->Failed())
      std::fprintf(stderr, "rank %d: [  FAILED  ] %s.%s\n", rank_, info.test_suite_name(),
                   info.name());
  }

 private:
  int rank_;
};

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  sparq::log::init({.rank = rank, .world_size = size, .level = "warn"});
  ::testing::InitGoogleTest(&argc, argv);
  if (rank != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new FailurePrinter(rank));
  }
  const int local_failed = RUN_ALL_TESTS() != 0 ? 1 : 0;
  int any_failed = 0;
  MPI_Allreduce(&local_failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  const int local_skipped = sparq::testing_support::every_test_skipped() ? 1 : 0;
  int all_skipped = 0;
  MPI_Allreduce(&local_skipped, &all_skipped, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (local_failed) std::fprintf(stderr, "rank %d of %d: tests FAILED\n", rank, size);
  MPI_Finalize();
  if (!any_failed && all_skipped) return sparq::testing_support::kSkipExitCode;
  return any_failed;
}
