// Import of Hugging Face GPT-2 checkpoints (model.safetensors of GPT2Model / GPT2LMHeadModel)
// into a sparq GPT-2 store: the name mapping and the Conv1D -> Linear transposes. The file
// format itself is train/safetensors.h.
#pragma once

#include <cstdint>
#include <string>

#include "core/param_store.h"
#include "core/status.h"

namespace sparq::train {

// Loads a Hugging Face GPT-2 checkpoint (model.safetensors of GPT2Model / GPT2LMHeadModel,
// names with or without the "transformer." prefix) into a sparq GPT-2 store:
//   wte.weight [V, C]                  -> wte.weight [padded V, C]; real rows copied, the
//                                         padding rows set to zero
//   wpe.weight [n_ctx, C]              -> wpe.weight
//   h.<l>.ln_1 / ln_2 / ln_f .{weight, bias} -> same names
//   h.<l>.attn.c_attn.weight [C, 3C]   -> h.<l>.attn.qkv.weight [3C, C]  (transposed: HF's
//   h.<l>.attn.c_proj.weight [C, C]    -> h.<l>.attn.proj.weight           Conv1D stores
//   h.<l>.mlp.c_fc.weight [C, 4C]      -> h.<l>.mlp.fc.weight [4C, C]      [in, out], sparq's
//   h.<l>.mlp.c_proj.weight [4C, C]    -> h.<l>.mlp.proj.weight [C, 4C]    Linear [out, in])
//   biases of those four               -> the matching .bias
// lm_head.weight (tied to wte) and the attention buffers h.<l>.attn.bias / masked_bias are
// skipped. Every sparq parameter must be covered; any other tensor, a missing one, or a
// shape that disagrees (n_layer, n_embd, n_ctx) is an error naming the tensor. n_head is not
// stored in the file and cannot be checked. When vocab_size > 0 the file's vocabulary must
// have exactly that many rows; otherwise any count up to the store's padded rows is taken.
// As with import_safetensors, a failed import leaves the store unchanged. With check_only,
// everything but the tied head's values is validated from the header alone and nothing is
// copied (the store may be unallocated or on a device).
Status import_gpt2_hf(ParamStore& store, const std::string& path, std::int64_t vocab_size = 0,
                      bool check_only = false);

}  // namespace sparq::train
