// Copies between a tensor on any device and host memory, for the few places that must see
// device data on the host: checkpoints, safetensors import/export, evaluation scores, the
// parameter checksum. Synchronous (the copy is complete on return, after the device's queued
// work), so never use them inside a training step's hot path. Plus the two tensor-level ops
// the training step needs outside the layers (BERT's first-token gather, the
// gradient-accumulation scaling), which run in the context like a layer.
#pragma once

#include <cstddef>
#include <vector>

#include "core/exec_context.h"
#include "core/tensor.h"

namespace sparq {

// Copies t.nbytes() bytes of `t` into `host`.
void copy_to_host(const Tensor& t, void* host);
// Copies t.nbytes() bytes from `host` into `t`.
void copy_from_host(const void* host, const Tensor& t);

// dst = src for two f32 tensors of equal size on the context's device (asynchronous on a CUDA
// context's compute stream, like the layers).
void copy_tensor(const Tensor& src, const Tensor& dst, const ExecContext& context);

// t *= alpha for an f32 tensor on the context's device (asynchronous on a CUDA context's
// compute stream).
void scale_in_place(const Tensor& t, float alpha, const ExecContext& context);

// The tensor's f32 values on the host: `t` itself when it is a CPU view (no copy; valid
// while t's storage lives), else a copy held in `staging`.
const float* host_floats(const Tensor& t, std::vector<float>& staging);

}  // namespace sparq
