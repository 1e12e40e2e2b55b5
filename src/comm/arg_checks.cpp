#include "comm/arg_checks.h"

#include "core/check.h"

namespace sparq::comm {

void check_per_rank(const char* op, const char* what, std::span<const std::size_t> values,
                    int size) {
  SPARQ_CHECK(values.size() == static_cast<std::size_t>(size),
              "{}: {} has {} entries but the world has {} ranks", op, what, values.size(), size);
}

void check_reduce(const char* op, DType dtype, ReduceOp reduce) {
  const bool floating = dtype == DType::kF32 || dtype == DType::kF16 || dtype == DType::kBF16;
  SPARQ_CHECK(reduce != ReduceOp::kAvg || floating,
              "{}: ReduceOp::kAvg needs f32, f16 or bf16, got {}", op, dtype_name(dtype));
}

void check_rank_arg(const char* op, const char* what, int value, int size) {
  SPARQ_CHECK(value >= 0 && value < size, "{}: {} {} is outside the world of {} ranks", op, what,
              value, size);
}

void check_tag(const char* op, int tag) {
  SPARQ_CHECK(tag >= 0, "{}: tag {} is negative", op, tag);
}

void check_buffer(const char* op, const char* what, const void* buffer, std::size_t bytes) {
  SPARQ_CHECK(buffer != nullptr || bytes == 0, "{}: {} is null but {} bytes were requested", op,
              what, bytes);
}

}  // namespace sparq::comm
