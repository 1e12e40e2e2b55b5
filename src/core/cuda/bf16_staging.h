// Bf16Staging: device memory for the bf16 copies of GEMM operands that a context with
// GemmPrecision::kBF16 multiplies (Note [bf16 GEMM operands], core/cuda/mixed_gemm.h).
// A few numbered slots, each grown to its largest request and then reused. Reuse needs no
// event: everything of one context runs on its one stream, so the GEMM that reads a slot has
// finished before the next cast into that slot starts. A slot's contents are therefore valid
// until the next request for the same slot.
// Growing frees the old slot only after the stream has drained (a queued GEMM may still read
// it); growth happens in the first steps only, while the shapes reach their maximum.
#pragma once

#include <cuda_runtime_api.h>

#include <array>
#include <cstddef>
#include <cstdint>

#include "core/buffer.h"

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
  std::array<Buffer, kSlots> slots_;
};

}  // namespace sparq::cuda
