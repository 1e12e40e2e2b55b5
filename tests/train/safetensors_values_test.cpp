// What the importers do with a file's values (safetensors_test.cpp covers names, shapes,
// dtypes and damaged framing): a NaN or infinity in any tensor, in any float dtype, is refused
// with the tensor and element named, and the store keeps every value it had.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>

#include "core/file_io.h"
#include "models/model_test_util.h"
#include "train/hf_gpt2.h"
#include "train/safetensors.h"

// A namespace of its own: a unity build compiles this file with safetensors_test.cpp.
namespace sparq::train::values_test {
namespace {

const std::string kRef = std::string(SPARQ_SOURCE_DIR) + "/tests/reference/safetensors/";
const char kHfSpec[] = "gpt2-tiny n_layer=2 n_head=2 n_embd=16 n_ctx=8 vocab_size=40";

std::string temp(const std::string& name) {
  const std::string dir = ::testing::TempDir() + "/safetensors_values_test";
  std::filesystem::create_directories(dir);
  return dir + "/" + name;
}

// Every tensor of `in` as F32, with element `at` of tensor `name` set to `value`.
void write_with_value(const std::string& in, const std::string& out, const std::string& name,
                      std::size_t at, float value) {
  auto file = SafetensorsFile::read(in);
  ASSERT_TRUE(file.is_ok()) << file.status().message();
  std::vector<std::vector<float>> values;
  std::vector<SafetensorsTensor> tensors;
  values.reserve(file->tensors().size());
  bool found = false;
  for (const SafetensorsEntry& e : file->tensors()) {
    values.push_back(*file->read_f32(e.name));
    if (e.name == name) {
      ASSERT_LT(at, values.back().size());
      values.back()[at] = value;
      found = true;
    }
    tensors.push_back({e.name, e.shape, values.back()});
  }
  ASSERT_TRUE(found) << name;
  ASSERT_TRUE(write_safetensors(out, tensors, file->metadata()).is_ok());
}

TEST(SafetensorsValues, NonFiniteWeightsAreRefusedAndTheStoreIsUnchanged) {
  ParamStore source, target;
  testing::bound_model("gpt2-tiny", {1, 8}, source, /*seed=*/1);
  testing::bound_model("gpt2-tiny", {1, 8}, target, /*seed=*/2);
  const std::string good = temp("good.safetensors");
  ASSERT_TRUE(export_safetensors(source, good).is_ok());
  const std::vector<float> before(target.params(), target.params() + target.flat_numel());
  for (const float bad :
       {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
        -std::numeric_limits<float>::infinity()}) {
    const std::string path = temp("bad.safetensors");
    // The last tensor: a check that stopped at the first would pass it.
    const std::string last = source.entries().back().spec.name;
    write_with_value(good, path, last, 5, bad);
    const Status s = import_safetensors(target, path);
    ASSERT_FALSE(s.is_ok()) << bad;
    EXPECT_NE(s.message().find("tensor '" + last + "' holds a non-finite value"), std::string::npos)
        << s.message();
    EXPECT_NE(s.message().find("at element 5"), std::string::npos) << s.message();
    EXPECT_EQ(std::memcmp(before.data(), target.params(), before.size() * 4), 0)
        << "a refused import changed the store";
  }
}

// A file of one 1-D tensor "t" of `dtype` with the given raw little-endian bytes (the writer
// writes F32 only).
std::string one_tensor_file(const std::string& dtype, std::size_t width, const std::string& bytes) {
  std::string header = fmt::format(R"({{"t":{{"dtype":"{}","shape":[{}],"data_offsets":[0,{}]}}}})",
                                   dtype, bytes.size() / width, bytes.size());
  header.append((8 - header.size() % 8) % 8, ' ');
  const std::uint64_t length = header.size();
  std::string file(reinterpret_cast<const char*>(&length), 8);
  return file + header + bytes;
}

template <typename T>
std::string raw_bytes(const std::vector<T>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

TEST(SafetensorsValues, F64BeyondTheF32RangeAndHalfInfinitiesAreRefused) {
  // F64: 1e300 is finite as a double and infinite as the f32 it is loaded as.
  const std::vector<double> wide{0.5, 1e300, 0.25};
  // BF16 and F16: an exponent of all ones with a zero mantissa is infinity.
  const std::vector<std::uint16_t> bf16{0x3f80, 0x3f80, 0x7f80};         // 1, 1, +inf
  const std::vector<std::uint16_t> f16{0x3c00, 0x3c00, 0x3c00, 0xfc00};  // 1, 1, 1, -inf
  struct Case {
    const char* dtype;
    std::size_t width;
    std::string bytes;
    const char* element;
  };
  for (const Case& c : {Case{"F64", 8, raw_bytes(wide), "at element 1"},
                        Case{"BF16", 2, raw_bytes(bf16), "at element 2"},
                        Case{"F16", 2, raw_bytes(f16), "at element 3"}}) {
    const std::string path = temp(std::string("one_") + c.dtype + ".safetensors");
    ASSERT_TRUE(write_file_atomic(path, one_tensor_file(c.dtype, c.width, c.bytes)).is_ok());
    auto file = SafetensorsFile::read(path);
    ASSERT_TRUE(file.is_ok()) << file.status().message();
    const Status s = file->check_finite(file->tensors().front());
    ASSERT_FALSE(s.is_ok()) << c.dtype;
    EXPECT_NE(s.message().find(c.element), std::string::npos) << s.message();
    // The same values without the bad one pass.
    const std::string fine = temp(std::string("fine_") + c.dtype + ".safetensors");
    ASSERT_TRUE(
        write_file_atomic(fine, one_tensor_file(c.dtype, c.width, c.bytes.substr(0, c.width)))
            .is_ok());
    auto ok = SafetensorsFile::read(fine);
    ASSERT_TRUE(ok.is_ok()) << ok.status().message();
    EXPECT_TRUE(ok->check_finite(ok->tensors().front()).is_ok()) << c.dtype;
  }
}

TEST(SafetensorsValues, HfGpt2ImportRefusesANonFiniteWeight) {
  ParamStore store;
  auto model = testing::bound_model(kHfSpec, {1, 8}, store);
  const std::vector<float> before(store.params(), store.params() + store.flat_numel());
  const std::string path = temp("hf_nan.safetensors");
  write_with_value(kRef + "gpt2_hf_tiny.safetensors", path, "transformer.h.1.mlp.c_proj.weight", 7,
                   std::numeric_limits<float>::quiet_NaN());
  const Status s = import_gpt2_hf(store, path, 40);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("h.1.mlp.c_proj.weight' holds a non-finite value"), std::string::npos)
      << s.message();
  EXPECT_EQ(std::memcmp(before.data(), store.params(), before.size() * 4), 0);
}

}  // namespace
}  // namespace sparq::train::values_test
