// Note [Boolean words] (core/bool_words.h): the one rule, and each reader that follows it.
#include "core/bool_words.h"

#include <gtest/gtest.h>

namespace sparq {
namespace {

TEST(BoolWords, AcceptsTheWordsInEachCaseAndNothingElse) {
  for (const char* w :
       {"true", "True", "TRUE", "yes", "Yes", "YES", "on", "On", "ON", "y", "Y", "1"})
    EXPECT_EQ(parse_bool_word(w), true) << w;
  for (const char* w :
       {"false", "False", "FALSE", "no", "No", "NO", "off", "Off", "OFF", "n", "N", "0"})
    EXPECT_EQ(parse_bool_word(w), false) << w;
  for (const char* w : {"", "tRue", "2", "-1", "01", "yes ", " on", "t", "f", "none", "null"})
    EXPECT_EQ(parse_bool_word(w), std::nullopt) << "'" << w << "'";
}

}  // namespace
}  // namespace sparq
