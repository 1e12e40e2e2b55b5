// powersgd (Vogels et al. 2019): rank-r approximation of each weight gradient by one step of
// warm-started power iteration, exchanged as its factors. A bucket is viewed as matrices
// (set_layout: one [rows, cols] segment per layer weight, e.g. [out, in] or a conv's
// [out, in*kh*kw]); 1-D tensors, tensors below min_compress_numel and every float not in a
// segment are sent dense. Aggregation: allreduce, through Compressor::self_aggregate:
//
//   full (alternate = false), two allreduces per step, for every matrix M = a (g + e):
//     P = M Q;  allreduce(P, sum) with the dense floats;  P = orth(P);
//     Q = M^T P;  allreduce(Q) / world;  M_hat = P Q^T;  Q is kept (warm start).
//   alternate = true (one allreduce per step, ACP-SGD style): even exchanges send
//     P = M orth(Q) and decode M_hat = P orth(Q)^T; odd exchanges send Q = M^T orth(P) and
//     decode M_hat = orth(P) Q^T. The fixed factor is shared, so the result is exactly the
//     average of the ranks' decoded contributions a_r orth(Q) orth(Q)^T (or orth(P)...).
//   Error feedback: e = a - M_hat on matrices, 0 on dense floats (they are sent exactly).
//
// Q starts as N(0, 1) from Philox (seed, bucket, segment) identical on every rank.
// State (saveable): the Q (and for alternate the P) factors and the exchange parity.
// Single-message form (encode/decode, used without a communicator): [P | Q | dense] as f32,
// bytes 4 (sum of (rows + cols) r + dense), with P = orth(M Q), Q = M^T P, D = P Q^T.
// Config keys: rank [1, 1024] = 4, min_compress_numel [1, 2^40] = 4096,
//              alternate {true, false} = false.
// A rank above min(rows, cols) of a compressible tensor is rejected by set_layout with a
// message naming the rank key and the tensor. Contraction: none guaranteed (delta 0).
#pragma once

#include <string>
#include <vector>

#include "compress/compressor.h"
#include "compress/config.h"

namespace sparq::compress {

struct MatrixSegment {
  std::string name;
  std::size_t offset = 0;  // in floats, inside the bucket
  std::size_t rows = 0;
  std::size_t cols = 0;
};

class PowerSgdCompressor final : public Compressor {
 public:
  struct Options {
    int rank = 4;
    std::size_t min_compress_numel = 4096;
    bool alternate = false;
    std::string rank_key = "compress.rank";
    static Result<Options> parse(ConfigReader& reader);
  };
  explicit PowerSgdCompressor(Options options) : options_(std::move(options)) {}

  // Declares the bucket's matrices. Without a layout a bucket of n floats is viewed as one
  // [n / c, c] matrix, c = floor(sqrt(n)), plus a dense tail.
  Status set_layout(std::size_t n, std::vector<MatrixSegment> segments);
  // Builds the plan for n floats and draws the initial Q (idempotent).
  void prepare(std::size_t n, const EncodeContext& ctx);

  std::string_view name() const override { return "powersgd"; }
  Aggregation aggregation() const override { return Aggregation::kAllreduce; }
  void encode(std::span<const float> a, const EncodeContext& ctx, Message& msg) override;
  // Size, header and indices (compressor.h); see the layout above.
  Status check_message(std::span<const std::uint8_t> msg, std::size_t n,
                       const EncodeContext& ctx) const override;
  void decode(std::span<const std::uint8_t> msg, std::span<float> out, float alpha,
              DecodeMode mode, const EncodeContext& ctx) const override;
  std::optional<std::size_t> fixed_message_bytes(std::size_t n) const override;
  DType wire_dtype() const override { return DType::kF32; }
  double contraction_delta(std::size_t) const override { return 0.0; }
  bool self_aggregate(std::span<float> bucket, ErrorFeedback* ef, comm::Communicator& comm,
                      const EncodeContext& ctx, std::size_t& payload_bytes) override;

  const std::vector<MatrixSegment>& matrices() const { return matrices_; }
  // The current Q factor of matrix m ([cols, r], row-major), identical on every rank.
  const std::vector<float>& q_factor(std::size_t m) const { return q_[m]; }
  void save_state(std::vector<std::uint8_t>& out) const override;
  Status load_state(std::span<const std::uint8_t> in) override;
  // Elastic resume: P and Q are the results of allreduces, the same on every rank, and do not
  // depend on the world size: rank 0's (replicated rule, state_merge.h), unless the bucket
  // plan changed (then they belong to other matrices: reset).
  std::unique_ptr<StateMerge> state_merge(const MergeShape& shape) const override {
    return replicated_merge(shape);
  }

 private:
  struct Range {
    std::size_t offset, count;
  };
  void plan_default(std::size_t n);
  std::size_t factor_floats(bool p) const;  // sum of rows * r (p) or cols * r (q)
  std::size_t dense_floats() const;

  Options options_;
  std::size_t n_ = 0;
  bool planned_ = false;
  std::vector<MatrixSegment> matrices_;
  std::vector<Range> dense_;
  std::vector<std::vector<float>> p_, q_;  // per matrix: [rows, r] and [cols, r], row-major
  std::vector<std::vector<float>> warm_start_backup_;  // q_ (then p_, alternate) before a step
  std::uint64_t exchanges_ = 0;
  std::vector<float> scratch_, send_, fixed_;
};

// Orthonormalises the r columns of a row-major [rows, r] matrix in place (modified
// Gram-Schmidt in double); a column that becomes ~0 is left as zeros.
void orthonormalize_columns(float* m, std::size_t rows, std::size_t r);

}  // namespace sparq::compress
