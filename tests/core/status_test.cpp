#include "core/status.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

namespace sparq {
namespace {

Result<int> parse_positive(int x) {
  if (x <= 0) return Status::error("value {} is not positive", x);
  return x;
}

Result<int> doubled(int x) {
  SPARQ_ASSIGN_OR_RETURN(int v, parse_positive(x));
  return 2 * v;
}

TEST(Status, CarriesMessagesAndContext) {
  EXPECT_TRUE(Status::ok().is_ok());
  Status s = Status::error("bad key '{}'", "optim.lr");
  EXPECT_FALSE(s.is_ok());
  EXPECT_EQ(s.with_context("configs/x.yaml").message(), "configs/x.yaml: bad key 'optim.lr'");
}

TEST(Result, PropagatesFailures) {
  EXPECT_EQ(doubled(4).value(), 8);
  Result<int> r = doubled(-1);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().message(), "value -1 is not positive");
}

// A const Result reads through * and -> as through value(); a moved-from one gives its value
// up (*std::move(r)), as value() && does.
TEST(Result, ReadsThroughConstAccessorsAndMovesOut) {
  const Result<std::string> text(std::string("sparq"));
  EXPECT_EQ(*text, "sparq");
  EXPECT_EQ(text->size(), 5u);
  Result<std::unique_ptr<int>> owned(std::make_unique<int>(7));
  std::unique_ptr<int> taken = *std::move(owned);
  ASSERT_NE(taken, nullptr);
  EXPECT_EQ(*taken, 7);
}

}  // namespace
}  // namespace sparq
