// Helpers shared by the safetensors tests: the tiny HF model's spec, scratch paths, and a
// check that an error names what it should.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <string_view>

#include "core/status.h"

namespace sparq::train::testing_safetensors {

// The model of gen_safetensors.py's HF_CONFIG.
inline constexpr char kHfSpec[] = "gpt2-tiny n_layer=2 n_head=2 n_embd=16 n_ctx=8 vocab_size=40";

// A path for `name` in this test's scratch directory (created on first use).
inline std::string temp(const std::string& name) {
  const std::string dir = ::testing::TempDir() + "/safetensors_test";
  std::filesystem::create_directories(dir);
  return dir + "/" + name;
}

inline bool contains(const Status& s, std::string_view text) {
  return s.message().find(text) != std::string::npos;
}

}  // namespace sparq::train::testing_safetensors
