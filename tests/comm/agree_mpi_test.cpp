// Agreement on errors and on the config (comm/agree.h): the report lines of every pattern of
// failures (pure), then the collectives under mpirun with 1 and 3 ranks: nothing failed, all
// ranks failed alike, one rank failed, ranks failed differently, a differing config text.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "comm/agree.h"
#include "comm/mpi_communicator.h"
#include "comm_test_util.h"
#include "core/checksum.h"

namespace sparq::comm {
namespace {

using testing::make_comm;

using Lines = std::vector<std::string>;
constexpr std::nullopt_t ok = std::nullopt;

// The report lines of per-rank outcomes (ok: that rank succeeded).
Lines lines_of(std::vector<std::optional<std::string>> failures) {
  return ErrorReport{std::move(failures)}.lines();
}

TEST(ErrorReport, OneLinePerDistinctMessageNamingItsRanks) {
  EXPECT_EQ(lines_of({ok, ok}), Lines{});
  EXPECT_TRUE((ErrorReport{{ok, ok}}.status().is_ok()));
  EXPECT_EQ(lines_of({"bad key", "bad key", "bad key"}), Lines{"error (on all 3 ranks): bad key"});
  EXPECT_EQ(lines_of({ok, "no file", ok}), Lines{"error on rank 1 of 3: no file"});
  EXPECT_EQ(lines_of({"a", "b", "a", ok}),
            (Lines{"error on ranks 0, 2 of 4: a", "error on rank 1 of 4: b"}));
  EXPECT_EQ(lines_of({"alone"}), Lines{"error: alone"});
  // An empty message is still a failure.
  EXPECT_EQ(lines_of({std::string(), ok}), Lines{"error on rank 0 of 2: "});
  const ErrorReport two{{"a", "b"}};
  EXPECT_EQ(two.status().message(), "error on rank 0 of 2: a\nerror on rank 1 of 2: b");
}

TEST(FirstYamlDifference, NamesTheKeyPathOfTheFirstDifferingLine) {
  const std::string a = "model:\n  n_layer: 2\noptim:\n  name: adamw\n  lr: 0.001\n  beta1: 0.9\n";
  const std::string b = "model:\n  n_layer: 2\noptim:\n  name: adamw\n  lr: 0.002\n  beta1: 0.8\n";
  EXPECT_EQ(first_yaml_difference(a, a), (std::pair<std::string, std::string>{}));
  EXPECT_EQ(first_yaml_difference(b, a),
            (std::pair<std::string, std::string>{"optim.lr: 0.002", "optim.lr: 0.001"}));
  EXPECT_EQ(
      first_yaml_difference("data:\n  markov:\n    seed: 7\n", "data:\n  markov:\n    seed: 8\n"),
      (std::pair<std::string, std::string>{"data.markov.seed: 7", "data.markov.seed: 8"}));
  EXPECT_EQ(first_yaml_difference("a: 1\n", "a: 1\nb: 2\n"),
            (std::pair<std::string, std::string>{"(nothing)", "b: 2"}));
  // Review, 2026-12-06: both were empty, and the mismatch message named nothing.
  EXPECT_EQ(first_yaml_difference("a: 1", "a: 1\n"),
            (std::pair<std::string, std::string>{"no final newline", "a final newline"}));
  EXPECT_EQ(first_yaml_difference("a: 1\n\n", "a: 1\n"),
            (std::pair<std::string, std::string>{"(an empty line)", "(nothing)"}));
}

TEST(AgreeOnErrors, EveryRankLearnsTheSameReport) {
  auto comm = make_comm();
  const int rank = comm->rank(), size = comm->size();
  EXPECT_TRUE(agree_on_errors(*comm, Status::ok()).is_ok());

  const Status all = agree_on_errors(*comm, Status::error("x.yaml: optim.lr: must be >= 0"));
  ASSERT_FALSE(all.is_ok());
  if (size == 1) {
    EXPECT_EQ(all.message(), "x.yaml: optim.lr: must be >= 0");  // a world of one: as is
  } else {
    EXPECT_EQ(all.message(),
              "error (on all " + std::to_string(size) + " ranks): x.yaml: optim.lr: must be >= 0");
  }

  // The last rank alone fails; everyone learns it, naming that rank.
  const Status one = agree_on_errors(
      *comm, rank == size - 1 ? Status::error("data.train: no such file") : Status::ok());
  ASSERT_FALSE(one.is_ok());
  if (size > 1) {
    EXPECT_EQ(one.message(),
              fmt::format("error on rank {} of {}: data.train: no such file", size - 1, size));
  }

  // Every rank fails with its own message: one line each, the same text on every rank.
  const ErrorReport each = gather_errors(*comm, Status::error("rank file {} damaged", rank));
  ASSERT_EQ(each.world_size(), size);
  EXPECT_EQ(each.failed_count(), size);
  for (int r = 0; r < size; ++r) {
    EXPECT_EQ(each.failures[static_cast<std::size_t>(r)], fmt::format("rank file {} damaged", r));
  }
}

TEST(CheckSameText, NamesTheRanksThatDifferAndTheFirstDifferingKey) {
  auto comm = make_comm();
  const int rank = comm->rank(), size = comm->size();
  const std::string base = "optim:\n  name: adamw\n  lr: 0.001\n";
  EXPECT_TRUE(check_same_text(*comm, base, "config", "advice").is_ok());
  if (size < 3) GTEST_SKIP() << "needs 3 ranks";
  const std::string mine = rank == 2 ? "optim:\n  name: adamw\n  lr: 0.002\n" : base;
  const Status s = check_same_text(*comm, mine, "config", "check --set arguments");
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.message(),
            "config differs between ranks: rank 2 has optim.lr: 0.002 where rank 0 has "
            "optim.lr: 0.001 (check --set arguments)");
}

// Found in review: the check compared checksum64 values, and flipping the top bit of byte 7
// in two of the text's 8-byte words leaves that fold unchanged (as do about 1 in 256 pairs of
// edits in those bytes). Texts are now compared byte for byte.
TEST(CheckSameText, TextsWithTheSameChecksumStillDiffer) {
  auto comm = make_comm();
  const int rank = comm->rank(), size = comm->size();
  if (size < 2) GTEST_SKIP() << "needs 2 ranks";
  const std::string base = "optim:\n  lr: 0.001\n  weight_decay: 0.1\n";
  std::string other = base;
  other[7] = static_cast<char>(other[7] ^ 0x80);
  other[15] = static_cast<char>(other[15] ^ 0x80);
  ASSERT_EQ(checksum64(base.data(), base.size()), checksum64(other.data(), other.size()));
  const Status s =
      check_same_text(*comm, rank == 1 ? other : base, "config", "check --set arguments");
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("config differs between ranks: rank 1 has"), std::string::npos)
      << s.message();
}

// Note [Control settings until the config agrees] (communicator.h), found by a review of the
// comm engine: ranks whose comm settings differ (comm.allreduce: ring on one, MPI's on the
// others; blocking and non-blocking waits) met in mismatched collectives and waited for
// comm.timeout_s. Until settle_options(), a training communicator uses fixed control settings,
// so they meet and the differing config is reported on every rank.
TEST(CheckSameText, RanksWithOtherCommSettingsStillMeetUntilSettled) {
  auto probe = make_comm();
  const int rank = probe->rank(), size = probe->size();
  probe.reset();
  MpiOptions options;
  options.allreduce = rank == size - 1 ? AllreduceAlgorithm::kRing : AllreduceAlgorithm::kMpi;
  options.wait = rank == size - 1 ? MpiWait::kSleep : MpiWait::kBusy;
  options.settle_later = true;
  auto made = make_mpi_communicator(nullptr, nullptr, options);
  ASSERT_TRUE(made.is_ok()) << made.status().message();
  Communicator& comm = **made;
  const std::string mine =
      rank == size - 1 ? "comm:\n  allreduce: ring\n" : "comm:\n  allreduce: mpi\n";
  const Status s = check_same_text(comm, mine, "config", "check --set arguments");
  if (size == 1) {
    EXPECT_TRUE(s.is_ok()) << s.message();
  } else {
    ASSERT_FALSE(s.is_ok());
    EXPECT_NE(s.message().find("config differs between ranks"), std::string::npos) << s.message();
  }
  // Once settled (the same settings everywhere, as the trainer ensures), they apply.
  auto same = make_mpi_communicator(
      nullptr, nullptr,
      {.allreduce = AllreduceAlgorithm::kRing, .wait = MpiWait::kSleep, .settle_later = true});
  ASSERT_TRUE(same.is_ok());
  (*same)->settle_options({.allreduce = "ring", .mpi_wait = "sleep"});
  std::vector<float> v(1 << 16, 1.0f);
  (*same)->allreduce(v.data(), v.data(), v.size(), DType::kF32, ReduceOp::kSum);
  EXPECT_EQ(v.front(), static_cast<float>(size));
}

}  // namespace
}  // namespace sparq::comm
