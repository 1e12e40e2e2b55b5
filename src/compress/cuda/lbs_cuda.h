// Sparse messages on a CUDA device: lbs (compress/lbs.h) and, below, topk. lbs, with exact
// selection: the first `size` bytes of the
// output are the CPU's message for the same input and context, where size = 12 +
// index_bytes + the value run, read from the message's own header (sparse_format.h). The
// buffer has a fixed capacity (lbs_capacity: the index section at its bitmap bound), which is
// what NCCL's plain allgather needs; the host never waits for the size.
//
// Steps, all enqueued on `stream`: exact top-k (topk_cuda.h) of a = g + e (error feedback
// fused: the sum is formed in e) into ascending indices and their values; each index's
// delta-varint length and, by a prefix sum, its byte offset; the header, choosing the smaller
// index coding on the device; the index section; the kept values through the block codec
// (block_codec_cuda.h) with their bucket positions for stochastic rounding; and, with error
// feedback, e[i] -= D(m)[i] at the kept positions, rounded as the CPU rounds it (the product,
// then the sum). Every pointer is device memory; `out` is 4-byte aligned. fmt-free.
// Only `bits`, `block` and (decoding) nothing else of LbsArgs matter to lbs_decode.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace sparq::cuda {

struct LbsArgs {
  int bits = 4;
  std::size_t block = 256;
  bool stochastic = false;
  std::uint64_t key = 0;             // step_key(ctx.seed, ctx.step)
  std::uint64_t stream = 0;          // compression_stream(ctx, ctx.rank)
  std::uint64_t first_position = 0;  // ctx.offset
};

// Bytes an lbs message of k kept entries out of n can take at most.
std::size_t lbs_capacity(std::size_t n, std::size_t k, const LbsArgs& args);
std::size_t lbs_scratch_bytes(std::size_t n, std::size_t k);

// Encodes the k largest |a| of a = g + e into out[0..lbs_capacity). With g == nullptr, e
// holds a itself and is only read (no error feedback); otherwise a = g + e is formed in e and
// e = a - D(m) is left behind.
void lbs_encode(const float* g, float* e, std::size_t n, std::size_t k, const LbsArgs& args,
                std::uint8_t* out, void* scratch, std::size_t scratch_bytes,
                cudaStream_t stream);

// Decoding, the CPU's LbsCompressor::decode for a message of k kept entries out of n (k is
// the same on every rank: the density and n are): out = alpha * D(in) (add == false) or
// out += alpha * D(in). The index section is read in either coding: its varints (or bits)
// are found by a prefix sum over the section, and each kept value is added to its position
// as the CPU adds it (the product, then the sum).
// A received message is validated on the device as it is decoded (the structure the CPU's
// check_sparse_prefix checks: the header against k, n and the value width; the index count;
// indices in range, strictly ascending, varints at most 5 bytes, nothing after the last; and
// for lbs the block scales check_block_scales checks): a
// message that fails adds nothing, so no write lands outside `out`, and its reason
// (SparseInvalid) goes to *invalid when that is still 0. `invalid` (device memory) may be null.
enum SparseInvalid : std::uint32_t {
  kSparseValid = 0,
  kSparseBadHeader = 1,   // count != k (or out of range), unknown coding, value width, index size
  kSparseBadCount = 2,    // a different number of indices than k (or bitmap bits past n)
  kSparseBadIndices = 3,  // an index >= n, out of order, an overlong or unterminated varint
  kSparseBadScale = 4,    // lbs, blockquant: a block scale negative, infinite or NaN (f16 bits
                          // > 0x7bff); qsgd, terngrad, sign: a negative f32 scale
};
std::size_t lbs_decode_scratch_bytes(std::size_t n, std::size_t k);
void lbs_decode(const std::uint8_t* in, std::size_t n, std::size_t k, const LbsArgs& args,
                float alpha, bool add, float* out, void* scratch, std::size_t scratch_bytes,
                cudaStream_t stream, std::uint32_t* invalid = nullptr);

// topk (compress/topk.h, exact selection) through the same selection and index coding, with
// its values as f32: the CPU's message bytes, residual (exactly 0 at the kept positions) and
// decode (one fma per value, as g++ contracts `out += alpha * v` on FMA hosts). Scratch:
// lbs_scratch_bytes / lbs_decode_scratch_bytes.
std::size_t topk_capacity(std::size_t n, std::size_t k);
// After lbs_decode or topk_decode of k indices out of n, until the next call with the same
// scratch: the message's indices (ascending) and its verdict (SparseInvalid); the indices
// mean something only when *verdict == kSparseValid (the tree strategy reads them).
struct SparseDecoded {
  const std::uint32_t* idx = nullptr;
  const std::uint32_t* verdict = nullptr;
};
SparseDecoded sparse_decoded(const void* scratch, std::size_t n, std::size_t k);
// After lbs_encode or topk_encode, until the next call with the same scratch: the k kept
// indices, ascending (dgc masks its momentum there).
const std::uint32_t* sparse_kept_indices(const void* scratch);
void topk_encode(const float* g, float* e, std::size_t n, std::size_t k, std::uint8_t* out,
                 void* scratch, std::size_t scratch_bytes, cudaStream_t stream);
void topk_decode(const std::uint8_t* in, std::size_t n, std::size_t k, float alpha, bool add,
                 float* out, void* scratch, std::size_t scratch_bytes, cudaStream_t stream,
                 std::uint32_t* invalid = nullptr);

// topk_sampled, threshold and lbs with sampled selection: the same messages, with a selection
// whose count only the device knows (varcount_select_cuda.h), written into the header. The
// capacity for the most entries it can keep (topk_capacity / lbs_capacity of
// sparse_max_count) holds every smaller count's message too: the index bound of fewer
// entries exceeds the most's by at most 3 bytes (sparse_bound.h), which the 4 bytes of slack
// cover, and the value run only shrinks.
struct SparseSelection {
  bool sampled = true;       // TopkSelector::sampled with k; else at_least(threshold)
  std::size_t k = 0;         // sampled: the target count
  std::uint64_t key = 0;     // sampled: step_key(ctx.seed, ctx.step)
  std::uint64_t stream = 0;  // sampled: compression_stream(ctx, ctx.rank)
  float threshold = 0;       // at_least
};
// The most entries such a message keeps out of n: min(sampled_max(k), n), or n.
std::size_t sparse_max_count(std::size_t n, const SparseSelection& sel);
// Encode and decode scratch (the larger of the two), either codec.
std::size_t sparse_selected_scratch_bytes(std::size_t n, const SparseSelection& sel);
// As topk_encode, with `sel`'s selection: capacity topk_capacity(n, sparse_max_count(n, sel)).
void topk_encode_selected(const float* g, float* e, std::size_t n, const SparseSelection& sel,
                          std::uint8_t* out, void* scratch, std::size_t scratch_bytes,
                          cudaStream_t stream);
// As lbs_encode with sel's selection (sampled; the rounding draws come from `args`).
void lbs_encode_selected(const float* g, float* e, std::size_t n, const SparseSelection& sel,
                         const LbsArgs& args, std::uint8_t* out, void* scratch,
                         std::size_t scratch_bytes, cudaStream_t stream);
// As lbs_decode and topk_decode, for a message of between min_count and max_count entries
// (its header says how many; one outside the range fails validation with kSparseBadHeader).
void lbs_decode_counted(const std::uint8_t* in, std::size_t n, std::size_t min_count,
                        std::size_t max_count, const LbsArgs& args, float alpha, bool add,
                        float* out, void* scratch, std::size_t scratch_bytes, cudaStream_t stream,
                        std::uint32_t* invalid = nullptr);
void topk_decode_counted(const std::uint8_t* in, std::size_t n, std::size_t min_count,
                         std::size_t max_count, float alpha, bool add, float* out, void* scratch,
                         std::size_t scratch_bytes, cudaStream_t stream,
                         std::uint32_t* invalid = nullptr);

}  // namespace sparq::cuda
