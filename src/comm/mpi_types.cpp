#include "comm/mpi_types.h"

#include <cstdint>
#include <utility>

#include "comm/mpi_check.h"
#include "core/check.h"

namespace sparq::comm {
namespace {

// inout[i] = in[i] + inout[i], each sum rounded once to the 16-bit format (the accumulation
// itself is exact in f32 for two 16-bit operands). Shared by the MPI_Ops below and by
// sum_host (the ring allreduce), so both reduce with the same per-element math.
void half_sum_n(const std::uint16_t* in, std::uint16_t* inout, std::size_t count) {
  for (std::size_t i = 0; i < count; ++i) {
    inout[i] = float_to_half_bits(half_bits_to_float(in[i]) + half_bits_to_float(inout[i]));
  }
}

void bf16_sum_n(const std::uint16_t* in, std::uint16_t* inout, std::size_t count) {
  for (std::size_t i = 0; i < count; ++i) {
    inout[i] = float_to_bf16_bits(bf16_bits_to_float(in[i]) + bf16_bits_to_float(inout[i]));
  }
}

template <typename T>
void plain_sum_n(const void* in, void* inout, std::size_t count) {
  const auto* a = static_cast<const T*>(in);
  auto* b = static_cast<T*>(inout);
  for (std::size_t i = 0; i < count; ++i) b[i] = a[i] + b[i];
}

// MPI_User_function signatures.
void half_sum(void* in, void* inout, int* len, MPI_Datatype*) {
  half_sum_n(static_cast<const std::uint16_t*>(in), static_cast<std::uint16_t*>(inout),
             static_cast<std::size_t>(*len));
}

void bf16_sum(void* in, void* inout, int* len, MPI_Datatype*) {
  bf16_sum_n(static_cast<const std::uint16_t*>(in), static_cast<std::uint16_t*>(inout),
             static_cast<std::size_t>(*len));
}

bool mpi_alive() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  return initialized && !finalized;
}

}  // namespace

MPI_Datatype mpi_datatype(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return MPI_FLOAT;
    case DType::kF16:
    case DType::kBF16:
    case DType::kU16:
      return MPI_UINT16_T;
    case DType::kI32:
      return MPI_INT32_T;
    case DType::kI64:
      return MPI_INT64_T;
    case DType::kU8:
      return MPI_UINT8_T;
  }
  SPARQ_FATAL("mpi_datatype: unknown dtype tag {}", static_cast<int>(dtype));
}

MpiSumOps::MpiSumOps() {
  MPI_CHECK(MPI_Op_create(&half_sum, /*commute=*/1, &half_sum_));
  MPI_CHECK(MPI_Op_create(&bf16_sum, /*commute=*/1, &bf16_sum_));
}

MpiSumOps::~MpiSumOps() { release(); }

MpiSumOps::MpiSumOps(MpiSumOps&& other) noexcept
    : half_sum_(std::exchange(other.half_sum_, MPI_OP_NULL)),
      bf16_sum_(std::exchange(other.bf16_sum_, MPI_OP_NULL)) {}

MpiSumOps& MpiSumOps::operator=(MpiSumOps&& other) noexcept {
  if (this != &other) {
    release();
    half_sum_ = std::exchange(other.half_sum_, MPI_OP_NULL);
    bf16_sum_ = std::exchange(other.bf16_sum_, MPI_OP_NULL);
  }
  return *this;
}

void MpiSumOps::release() {
  // After MPI_Finalize the operators are gone with the library; freeing them is an error.
  if (!mpi_alive()) return;
  if (half_sum_ != MPI_OP_NULL) MPI_Op_free(&half_sum_);
  if (bf16_sum_ != MPI_OP_NULL) MPI_Op_free(&bf16_sum_);
}

MPI_Op MpiSumOps::sum(DType dtype) const {
  if (dtype == DType::kF16) return half_sum_;
  if (dtype == DType::kBF16) return bf16_sum_;
  return MPI_SUM;
}

void sum_host(const void* in, void* inout, std::size_t count, DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return plain_sum_n<float>(in, inout, count);
    case DType::kF16:
      return half_sum_n(static_cast<const std::uint16_t*>(in), static_cast<std::uint16_t*>(inout),
                        count);
    case DType::kBF16:
      return bf16_sum_n(static_cast<const std::uint16_t*>(in), static_cast<std::uint16_t*>(inout),
                        count);
    case DType::kI32:
      return plain_sum_n<std::int32_t>(in, inout, count);
    case DType::kI64:
      return plain_sum_n<std::int64_t>(in, inout, count);
    case DType::kU8:
      return plain_sum_n<std::uint8_t>(in, inout, count);
    case DType::kU16:
      return plain_sum_n<std::uint16_t>(in, inout, count);
  }
  SPARQ_FATAL("sum_host: unknown dtype tag {}", static_cast<int>(dtype));
}

void divide_host(void* data, std::size_t count, DType dtype, int divisor) {
  // Division (not multiplication by 1/P) keeps exact means exact: (P*x)/P == x in IEEE.
  const float d = static_cast<float>(divisor);
  switch (dtype) {
    case DType::kF32: {
      auto* x = static_cast<float*>(data);
      for (std::size_t i = 0; i < count; ++i) x[i] /= d;
      return;
    }
    case DType::kF16: {
      auto* x = static_cast<std::uint16_t*>(data);
      for (std::size_t i = 0; i < count; ++i) {
        x[i] = float_to_half_bits(half_bits_to_float(x[i]) / d);
      }
      return;
    }
    case DType::kBF16: {
      auto* x = static_cast<std::uint16_t*>(data);
      for (std::size_t i = 0; i < count; ++i) {
        x[i] = float_to_bf16_bits(bf16_bits_to_float(x[i]) / d);
      }
      return;
    }
    default:
      SPARQ_FATAL("divide_host: {} is not a floating dtype", dtype_name(dtype));
  }
}

void mpi_call_failed(const char* call, int code, const char* file, int line) {
  char text[MPI_MAX_ERROR_STRING] = {0};
  int length = 0;
  MPI_Error_string(code, text, &length);
  fatal_error(file, line, fmt::format("MPI call failed: {}: {} (code {})", call, text, code));
}

}  // namespace sparq::comm
