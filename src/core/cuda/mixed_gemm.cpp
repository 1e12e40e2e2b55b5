#include "core/cuda/mixed_gemm.h"

#include "core/cuda/cuda_gemm.h"
#include "core/cuda/cuda_ops.h"

namespace sparq::cuda {

// A row-major matrix of `rows` rows and `cols` used columns with leading dimension `ld`
// spans (rows - 1) * ld + cols elements; a transposed operand is stored with its dimensions
// swapped.
std::int64_t operand_a_extent(const GemmShape& s) {
  const std::int64_t rows = s.trans_a ? s.k : s.m, cols = s.trans_a ? s.m : s.k;
  const std::int64_t ld = s.lda ? s.lda : cols;
  return rows == 0 || cols == 0 ? 0 : (rows - 1) * ld + cols;
}

std::int64_t operand_b_extent(const GemmShape& s) {
  const std::int64_t rows = s.trans_b ? s.n : s.k, cols = s.trans_b ? s.k : s.n;
  const std::int64_t ld = s.ldb ? s.ldb : cols;
  return rows == 0 || cols == 0 ? 0 : (rows - 1) * ld + cols;
}

const std::uint16_t* stage_bf16(const DeviceResources& device, int slot, const float* src,
                                std::size_t n) {
  const cudaStream_t stream = device.stream.get();
  std::uint16_t* dst = device.bf16_staging.slot(slot, n, stream);
  cast_to_bf16(src, dst, n, stream);
  return dst;
}

void layer_gemm(const DeviceResources& device, const GemmShape& shape, float alpha, const float* a,
                const float* b, float beta, float* c) {
  if (device.gemm_precision == GemmPrecision::kF32) {
    gemm(device.cublas, shape, alpha, a, b, beta, c);
    return;
  }
  // Same offsets in the staged copies: the leading dimensions carry over unchanged.
  const std::uint16_t* a16 = stage_bf16(device, Bf16Staging::kOperandA, a,
                                        static_cast<std::size_t>(operand_a_extent(shape)));
  const std::uint16_t* b16 = stage_bf16(device, Bf16Staging::kOperandB, b,
                                        static_cast<std::size_t>(operand_b_extent(shape)));
  gemm_bf16(device.cublas, shape, alpha, a16, b16, beta, c);
}

}  // namespace sparq::cuda
