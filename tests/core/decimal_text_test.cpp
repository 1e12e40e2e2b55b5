// core/decimal_text.h: parse_decimal reads what strtod read for a YAML number, nothing more.
#include "core/decimal_text.h"

#include <gtest/gtest.h>

#include <cmath>

namespace sparq {
namespace {

TEST(DecimalText, ReadsDecimalNumbersOnly) {
  EXPECT_EQ(parse_decimal<double>("0.01"), 0.01);
  EXPECT_EQ(parse_decimal<double>("1e-3"), 1e-3);
  EXPECT_EQ(parse_decimal<double>("+0.5"), 0.5);
  EXPECT_EQ(parse_decimal<double>("-2"), -2.0);
  EXPECT_EQ(parse_decimal<double>(".5"), 0.5);
  EXPECT_EQ(parse_decimal<float>("0.1"), 0.1f);
  for (const char* bad :
       {"", " 1", "1 ", "0x1p-7", "1,5", "inf", "nan", "+-1", "++1", "+", "1e999", "0.1x"}) {
    EXPECT_FALSE(parse_decimal<double>(bad).has_value()) << "'" << bad << "'";
  }
  EXPECT_FALSE(parse_decimal<float>("1e39").has_value()) << "past float's range";
  EXPECT_FALSE(parse_decimal<float>("-1e39").has_value()) << "past float's range";
}

// Too small for the type: its nearest value, as strtod read it (from_chars refused it).
TEST(DecimalText, ReadsANumberBelowTheTypesRangeAsItsNearestValue) {
  EXPECT_EQ(parse_decimal<float>("1e-50"), 0.0f);
  ASSERT_TRUE(parse_decimal<float>("-1e-50").has_value());
  EXPECT_TRUE(std::signbit(*parse_decimal<float>("-1e-50"))) << "-0";
  EXPECT_EQ(parse_decimal<double>("0.000001e-400"), 0.0);
  EXPECT_EQ(parse_decimal<double>("-1e-99999999999"), 0.0);
  EXPECT_FALSE(parse_decimal<double>("0.001e312").has_value()) << "1e309: too large";
  EXPECT_EQ(parse_decimal<float>("123e-2000000000000"), 0.0f) << "past even long double's range";
  EXPECT_EQ(parse_decimal<float>("1e-40"), static_cast<float>(1e-40L)) << "a subnormal";
  EXPECT_EQ(parse_decimal<double>("1e-400"), 0.0);
  EXPECT_EQ(parse_decimal<double>("1e-320"), 1e-320) << "a subnormal";
}

}  // namespace
}  // namespace sparq
