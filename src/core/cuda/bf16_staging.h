// Bf16Staging: device memory for the bf16 copies of GEMM operands that a context with
// GemmPrecision::kBF16 multiplies (Note [bf16 GEMM operands], core/cuda/mixed_gemm.h).
// A few numbered slots, each a StreamScratch (stream_scratch.h: grown to its largest request,
// reused in stream order), so a slot's contents are valid until the next request for the
// same slot.
#pragma once

#include <cuda_runtime_api.h>

#include <array>
#include <cstddef>
#include <cstdint>

#include "core/cuda/stream_scratch.h"

namespace sparq::cuda {

class Bf16Staging {
 public:
  // Slot roles: operands A and B of one product, and a long-lived copy (attention keeps the
  // staged qkv there across its several products).
  static constexpr int kOperandA = 0, kOperandB = 1, kKept = 2, kSlots = 3;

  // Room for `count` bf16 values in slot `index`.
  std::uint16_t* slot(int index, std::size_t count, cudaStream_t stream);
  std::size_t bytes() const;  // device memory held, for the memory log

 private:
  std::array<StreamScratch, kSlots> slots_;
};

}  // namespace sparq::cuda
