// Note [Prediction rule]
// ~~~~~~~~~~~~~~~~~~~~~~
// What a row of logits predicts, everywhere sparq scores one (Model::score on the host or on
// the device, the fused CPU head): the index of the row's largest value over its first
// `real` columns (a padded vocabulary's columns are never predicted), ties to the LOWEST
// index, NaN never the maximum, -0 equal to +0; a row with no non-NaN value predicts 0.
// For rows without NaN this is std::max_element's answer.
//
// It is stated as a key per element, prediction_key(value, index), whose MAXIMUM over the row
// names the prediction: the value's bits mapped to an unsigned order in the high 32 bits,
// the complement of the index in the low 32 (so among equal values the lowest index has the
// largest key), and 0, below every real key, for NaN. A maximum of integers is exact in any
// order, so a device reduction in whatever shape gives the host's sequential answer bit for
// bit. Per-element, shared by the CPU and the CUDA kernel (core/host_device.h).
#pragma once

#include <cstdint>

#include "core/half_math.h"  // float_as_bits
#include "core/host_device.h"

namespace sparq {

SPARQ_HOST_DEVICE inline std::uint64_t prediction_key(float value, std::uint32_t index) {
  if (value != value) return 0;     // NaN
  if (value == 0.0f) value = 0.0f;  // -0 ties with +0
  const std::uint32_t bits = float_as_bits(value);
  // Negative floats order reversed in their bits: flip them all; positives just above.
  const std::uint32_t ordered = (bits & 0x80000000u) != 0 ? ~bits : bits | 0x80000000u;
  return (static_cast<std::uint64_t>(ordered) << 32) | static_cast<std::uint32_t>(~index);
}

// The index a row's largest key names; 0 for a row whose keys are all 0 (all NaN, or empty).
SPARQ_HOST_DEVICE inline std::int32_t prediction_of_key(std::uint64_t key) {
  if (key == 0) return 0;
  return static_cast<std::int32_t>(~static_cast<std::uint32_t>(key));
}

// The rule as the fold of the keys over one row of `real` values: the statement the tests
// hold the host's form (predicted_index, row_predictions.h) and the device's to.
inline std::int32_t predicted_index_by_keys(const float* row, std::int64_t real) {
  std::uint64_t best = 0;
  for (std::int64_t j = 0; j < real; ++j) {
    const std::uint64_t key = prediction_key(row[j], static_cast<std::uint32_t>(j));
    best = key > best ? key : best;
  }
  return prediction_of_key(best);
}

}  // namespace sparq
