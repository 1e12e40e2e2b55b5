// The compressor and aggregation registries (compress/registry.h, compress/aggregation.h):
// the built-ins' declared keys are exactly what their factories validate, and an external
// registration gets the same validation as a built-in (Note [One registration path]).
#include "compress/registry.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "compress/aggregation.h"
#include "compress/dense_cast.h"
#include "test_util.h"

namespace sparq::compress {
namespace {

using testing::contains;

// Walks take testing::builtin_compressor_names(), never compressor_names(): the tests below
// register more compressors, one of them deliberately broken.
const std::vector<std::string>& kBuiltins = testing::builtin_compressor_names();

TEST(CompressorRegistry, BuiltinsComeFirstInAFixedOrder) {
  const std::vector<std::string> names = compressor_names();
  ASSERT_GE(names.size(), kBuiltins.size());
  EXPECT_TRUE(std::equal(kBuiltins.begin(), kBuiltins.end(), names.begin()));
}

// Every declared key is read and validated by its factory (a value of the wrong type is an
// error naming it), and the factory reads no undeclared key (the defaults build).
TEST(CompressorRegistry, DeclaredKeysAreExactlyTheValidatedOnes) {
  for (const std::string& name : kBuiltins) {
    auto r = find_compressor(name);
    ASSERT_TRUE(r.is_ok()) << r.status().message();
    EXPECT_FALSE(r->summary.empty()) << name;
    const std::string prefix = "compress." + name;
    auto defaults = make_compressor({name, {}, prefix});
    EXPECT_TRUE(defaults.is_ok()) << name << ": " << defaults.status().message();
    for (const ConfigKey& key : r->keys) {
      EXPECT_FALSE(key.help.empty()) << name << "." << key.name;
      auto bad = make_compressor({name, {{key.name, "not-a-value"}}, prefix});
      ASSERT_FALSE(bad.is_ok()) << name << "." << key.name << " accepted garbage";
      EXPECT_TRUE(contains(bad.status().message(), prefix + "." + key.name))
          << bad.status().message();
    }
  }
}

// A dense f32 compressor scaled by a key: enough to exercise registration.
Result<std::unique_ptr<Compressor>> make_scaled(ConfigReader& r) {
  SPARQ_ASSIGN_OR_RETURN(double scale, r.real("scale", 1.0, 0.0, 10.0, /*lo_open=*/true));
  (void)scale;
  return std::unique_ptr<Compressor>(
      std::make_unique<DenseCastCompressor>(DenseCastCompressor::Format::kF32));
}

TEST(CompressorRegistry, ExternalRegistrationIsValidatedLikeABuiltin) {
  static const Status registered = register_compressor(
      {"test_scaled", "dense, for the registry test", {{"scale", "a factor, (0, 10]"}}, make_scaled});
  ASSERT_TRUE(registered.is_ok()) << registered.message();
  const auto names = compressor_names();
  EXPECT_EQ(std::count(names.begin(), names.end(), "test_scaled"), 1);

  EXPECT_TRUE(make_compressor({"test_scaled", {{"scale", "2"}}, "compress.test_scaled"}).is_ok());
  auto unknown = make_compressor({"test_scaled", {{"scael", "2"}}, "compress.test_scaled"});
  ASSERT_FALSE(unknown.is_ok());
  EXPECT_EQ(unknown.status().message(),
            "compress.test_scaled.scael: unknown key (known keys: scale)");
  auto range = make_compressor({"test_scaled", {{"scale", "11"}}, "compress.test_scaled"});
  ASSERT_FALSE(range.is_ok());
  EXPECT_EQ(range.status().message(), "compress.test_scaled.scale: must be in (0, 10], got 11");
  auto missing = make_compressor({"test_scalde", {}, "compress"});
  ASSERT_FALSE(missing.is_ok());
  EXPECT_TRUE(contains(missing.status().message(), "compress.name: unknown compressor 'test_scalde'"))
      << missing.status().message();
  EXPECT_TRUE(contains(missing.status().message(), "test_scaled")) << missing.status().message();
}

TEST(CompressorRegistry, RefusesBadRegistrations) {
  const auto refused = [](CompressorRegistration r, const std::string& part) {
    const Status s = register_compressor(std::move(r));
    ASSERT_FALSE(s.is_ok()) << part;
    EXPECT_TRUE(contains(s.message(), part)) << s.message();
  };
  refused({"topk", "again", {}, make_scaled}, "'topk' is already registered");
  refused({"Bad-Name", "", {}, make_scaled}, "must match [a-z][a-z0-9_]*");
  // YAML reads an unquoted null as no value: no config could select it (review, 2026-12-07).
  refused({"null", "", {}, make_scaled}, "name 'null' must match [a-z][a-z0-9_]* and not 'null'");
  refused({"nullish", "", {{"null", "x"}}, make_scaled}, "key 'null' must match");
  refused({"no_factory", "", {}, nullptr}, "no_factory: no factory");
  refused({"twice", "", {{"a", "x"}, {"a", "y"}}, make_scaled}, "key 'a' declared twice");
  // Its section compress.seed would be the general key: every config choosing it failed.
  for (const std::string& general : general_compress_keys()) {
    refused({general, "", {}, make_scaled}, "name '" + general + "' is a general compress key");
  }
}

TEST(CompressorRegistry, AFactoryReadingAnUndeclaredKeyIsReported) {
  static const Status registered =
      register_compressor({"test_undeclared", "reads scale without declaring it", {}, make_scaled});
  ASSERT_TRUE(registered.is_ok()) << registered.message();
  auto c = make_compressor({"test_undeclared", {}, "compress.test_undeclared"});
  ASSERT_FALSE(c.is_ok());
  EXPECT_TRUE(contains(c.status().message(), "reads key 'scale', which its registration does not "
                                             "declare"))
      << c.status().message();
}

TEST(AggregationRegistry, BuiltinsAndExternalStrategiesByName) {
  const auto names = aggregation_names();
  ASSERT_GE(names.size(), 4u);
  EXPECT_EQ(std::vector<std::string>(names.begin(), names.begin() + 4),
            (std::vector<std::string>{"allreduce", "allgather", "two_phase", "tree"}));

  static const Status registered = register_aggregation(
      {"test_gather", "allgather under another name",
       [](const Compressor& c) {
         if (c.name() == "powersgd") return Status::error("powersgd is not welcome");
         return Status::ok();
       },
       [](const AggregatorOptions& o) { return make_aggregator(Aggregation::kAllgather, o); }});
  ASSERT_TRUE(registered.is_ok()) << registered.message();
  EXPECT_TRUE(check_aggregation_name("test_gather", "compress.aggregation").is_ok());
  EXPECT_TRUE(check_aggregation_name("auto", "compress.aggregation").is_ok());
  const Status unknown = check_aggregation_name("tre", "compress.aggregation");
  ASSERT_FALSE(unknown.is_ok());
  EXPECT_TRUE(contains(unknown.message(), "compress.aggregation: unknown aggregation 'tre' "
                                          "(known: auto, allreduce, allgather, two_phase, tree"))
      << unknown.message();

  auto topk = make_compressor({"topk", {}, "compress.topk"});
  ASSERT_TRUE(topk.is_ok());
  auto a = make_aggregator("test_gather", **topk, {}, "compress.aggregation");
  ASSERT_TRUE(a.is_ok()) << a.status().message();
  EXPECT_EQ((*a)->name(), "allgather");  // the strategy object the factory built
  auto automatic = make_aggregator("auto", **topk, {}, "compress.aggregation");
  ASSERT_TRUE(automatic.is_ok());
  EXPECT_EQ((*automatic)->name(), "allgather");  // topk's own

  auto psgd = make_compressor({"powersgd", {}, "compress.powersgd"});
  ASSERT_TRUE(psgd.is_ok());
  auto refused = make_aggregator("test_gather", **psgd, {}, "compress.aggregation");
  ASSERT_FALSE(refused.is_ok());
  EXPECT_EQ(refused.status().message(), "compress.aggregation: powersgd is not welcome");
  auto tree = make_aggregator("tree", **psgd, {}, "compress.aggregation");
  ASSERT_FALSE(tree.is_ok());
  EXPECT_TRUE(contains(tree.status().message(), "compress.aggregation: powersgd cannot aggregate "
                                                "by tree"))
      << tree.status().message();

  EXPECT_FALSE(register_aggregation({"auto", "", {}, [](const AggregatorOptions& o) {
                 return make_aggregator(Aggregation::kAllgather, o);
               }}).is_ok());
  EXPECT_FALSE(register_aggregation({"null",
                                     "",
                                     {},
                                     [](const AggregatorOptions& o) {
                                       return make_aggregator(Aggregation::kAllgather, o);
                                     }})
                   .is_ok());
  EXPECT_FALSE(register_aggregation({"allgather", "", {}, [](const AggregatorOptions& o) {
                 return make_aggregator(Aggregation::kAllgather, o);
               }}).is_ok());
}

}  // namespace
}  // namespace sparq::compress
