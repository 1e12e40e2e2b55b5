// What each row of a batch's logits predicts (Note [Prediction rule], prediction_rule.h), for
// scoring: logits [rows, width] f32 on the context's device, the prediction taken over the
// first `real` columns. A CUDA tensor is reduced on the device and only one int32 per row
// comes back to the host (GPT-2 124M's eval batch of 16 x 1024 rows holds 3.3 GB of logits:
// copying them to the host to take the argmax there cost more than the forward).
// Synchronous: `out` (host, rows int32) is complete on return. Evaluation only.
#pragma once

#include <cstdint>

#include "core/buffer.h"
#include "core/exec_context.h"
#include "core/tensor.h"

namespace sparq {

// `scratch` is a device buffer the call may grow (rows int32); kept by the caller so that an
// evaluation loop allocates it once. Unused on the CPU.
void row_predictions(const Tensor& logits, std::int64_t real, std::int32_t* out,
                     const ExecContext& context, Buffer& scratch);

// One host row of `real` values, in the fused CPU head's two passes: a maximum that skips NaN,
// then the first index equal to it; the same answer as predicted_index_by_keys
// (prediction_rule.h), which the tests hold it to, in a form that vectorizes (the key fold's
// 64-bit compares took about 7x as long on rows of 50257: review, 2026-12-05).
std::int32_t predicted_index(const float* row, std::int64_t real);

}  // namespace sparq
