// Helpers for the communication tests: typed payloads built from small integers, whose sums
// over up to a few ranks are exact in every dtype (bf16 holds integers up to 256 exactly),
// so results can be compared with ==; and the MPI communicator of the MPI tests.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "comm/mpi_communicator.h"
#include "core/dtype.h"

namespace sparq::comm::testing {

// How the MPI tests wait for transfers: SPARQ_TEST_MPI_WAIT=sleep (set by the ctest variants
// *_sleep_np<N>) runs them under comm.mpi_wait: sleep, unset under the default. A name that
// does not parse ends the test: it fell back to the default, and the variant ran the default's
// test again under its own name (review, 2026-12-07).
inline MpiWait test_mpi_wait() {
  const char* v = std::getenv("SPARQ_TEST_MPI_WAIT");
  if (v == nullptr) return MpiWait::kBusy;
  const auto wait = mpi_wait_from_name(v);
  if (!wait) {
    ADD_FAILURE() << "SPARQ_TEST_MPI_WAIT=" << v << " names no comm.mpi_wait mode";
    std::abort();
  }
  return *wait;
}

// The world communicator of an MPI test (a failure to make it fails the test).
inline std::unique_ptr<Communicator> make_comm(
    AllreduceAlgorithm algorithm = AllreduceAlgorithm::kAuto) {
  auto comm = make_mpi_communicator(nullptr, nullptr,
                                    {.allreduce = algorithm, .wait = test_mpi_wait()});
  EXPECT_TRUE(comm.is_ok()) << comm.status().message();
  return std::move(comm).value();
}

inline constexpr DType kAllDTypes[] = {DType::kF32, DType::kF16, DType::kBF16, DType::kI32,
                                       DType::kI64, DType::kU8,  DType::kU16};
inline constexpr DType kFloatDTypes[] = {DType::kF32, DType::kF16, DType::kBF16};

// Encodes small integers (exactly representable) as `dtype` elements.
inline std::vector<char> encode(DType dtype, const std::vector<double>& values) {
  std::vector<char> bytes(values.size() * dtype_size(dtype));
  for (std::size_t i = 0; i < values.size(); ++i) {
    const double v = values[i];
    char* p = bytes.data() + i * dtype_size(dtype);
    switch (dtype) {
      case DType::kF32: {
        const float x = static_cast<float>(v);
        std::memcpy(p, &x, 4);
        break;
      }
      case DType::kF16: {
        const std::uint16_t x = float_to_half_bits(static_cast<float>(v));
        std::memcpy(p, &x, 2);
        break;
      }
      case DType::kBF16: {
        const std::uint16_t x = float_to_bf16_bits(static_cast<float>(v));
        std::memcpy(p, &x, 2);
        break;
      }
      case DType::kI32: {
        const auto x = static_cast<std::int32_t>(v);
        std::memcpy(p, &x, 4);
        break;
      }
      case DType::kI64: {
        const auto x = static_cast<std::int64_t>(v);
        std::memcpy(p, &x, 8);
        break;
      }
      case DType::kU8: {
        const auto x = static_cast<std::uint8_t>(v);
        std::memcpy(p, &x, 1);
        break;
      }
      case DType::kU16: {
        const auto x = static_cast<std::uint16_t>(v);
        std::memcpy(p, &x, 2);
        break;
      }
    }
  }
  return bytes;
}

inline std::vector<double> decode(DType dtype, const void* data, std::size_t n) {
  std::vector<double> values(n);
  const char* base = static_cast<const char*>(data);
  for (std::size_t i = 0; i < n; ++i) {
    const char* p = base + i * dtype_size(dtype);
    switch (dtype) {
      case DType::kF32: {
        float x;
        std::memcpy(&x, p, 4);
        values[i] = x;
        break;
      }
      case DType::kF16: {
        std::uint16_t x;
        std::memcpy(&x, p, 2);
        values[i] = half_bits_to_float(x);
        break;
      }
      case DType::kBF16: {
        std::uint16_t x;
        std::memcpy(&x, p, 2);
        values[i] = bf16_bits_to_float(x);
        break;
      }
      case DType::kI32: {
        std::int32_t x;
        std::memcpy(&x, p, 4);
        values[i] = x;
        break;
      }
      case DType::kI64: {
        std::int64_t x;
        std::memcpy(&x, p, 8);
        values[i] = static_cast<double>(x);
        break;
      }
      case DType::kU8: {
        std::uint8_t x;
        std::memcpy(&x, p, 1);
        values[i] = x;
        break;
      }
      case DType::kU16: {
        std::uint16_t x;
        std::memcpy(&x, p, 2);
        values[i] = x;
        break;
      }
    }
  }
  return values;
}

// Rank r's i-th input value: a small non-negative integer, so every dtype holds it and the
// sum over <= 4 ranks (<= 40).
inline double value_at(int rank, std::size_t i) {
  return static_cast<double>((i * 7 + static_cast<std::size_t>(rank) * 3) % 11);
}

inline std::vector<double> rank_values(int rank, std::size_t n, std::size_t offset = 0) {
  std::vector<double> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = value_at(rank, offset + i);
  return v;
}

// Element-wise sum over all ranks of rank_values(r, n, offset).
inline std::vector<double> summed_values(int size, std::size_t n, std::size_t offset = 0) {
  std::vector<double> v(n, 0.0);
  for (int r = 0; r < size; ++r) {
    for (std::size_t i = 0; i < n; ++i) v[i] += value_at(r, offset + i);
  }
  return v;
}

inline std::size_t total_elements(const std::vector<std::size_t>& counts) {
  std::size_t total = 0;
  for (std::size_t c : counts) total += c;
  return total;
}

// Offsets that sum to zero over the world, so that the mean of base + shift(r) is exactly
// base for any world size (used by the kAvg tests).
inline double zero_sum_shift(int rank, int size) {
  if (size == 1) return 0.0;
  return rank < size - 1 ? rank + 1.0 : -0.5 * (size - 1) * size;
}

}  // namespace sparq::comm::testing
