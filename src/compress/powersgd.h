// powersgd (Vogels et al. 2019): rank-r approximation of each weight gradient by one step of
// warm-started power iteration, exchanged as its factors. A bucket is viewed as matrices
// (set_layout: one [rows, cols] segment per layer weight, e.g. [out, in] or a conv's
// [out, in*kh*kw]); 1-D tensors, tensors below min_compress_numel and every float not in a
// segment are sent dense. Aggregation: low_rank (powersgd_aggregator.h), which runs the
// collectives between the factor steps below (first_factor ... finish_exchange):
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

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "compress/compressor.h"
#include "compress/config.h"

namespace sparq::compress {

class PowerSgdCompressor final : public Compressor {
 public:
  struct Options {
    int rank = 4;
    std::size_t min_compress_numel = 4096;
    bool alternate = false;
    std::string rank_key = "compress.powersgd.rank";  // as the trainer's config names it
    static Result<Options> parse(ConfigReader& reader);
  };
  explicit PowerSgdCompressor(Options options) : options_(std::move(options)) {}

  // Declares the bucket's matrices. Without a layout a bucket of n floats is viewed as one
  // [n / c, c] matrix, c = floor(sqrt(n)), plus a dense tail.
  Status set_layout(std::size_t n, std::vector<MatrixSegment> segments) override;
  // Builds the plan for n floats and draws the initial Q (idempotent).
  void prepare(std::size_t n, const EncodeContext& ctx);

  std::string_view name() const override { return "powersgd"; }
  Aggregation aggregation() const override { return Aggregation::kLowRank; }
  // Not summable: D(m) = P Q^T is not linear in the message. Not self-contained: the factors
  // mean something only summed over the ranks, and the warm start must stay rank-identical.
  CompressorCapabilities capabilities() const override {
    // device_twin: its GPU form is the whole low_rank exchange on the device
    // (device_low_rank.h), not a message codec, so device_codec() stays nullptr.
    return {.self_contained = false, .needs_matrix_layout = true, .device_twin = true};
  }
  void encode(std::span<const float> a, const EncodeContext& ctx, Message& msg) override;
  // Size, header and indices (compressor.h); see the layout above.
  Status check_message(std::span<const std::uint8_t> msg, std::size_t n,
                       const EncodeContext& ctx) const override;
  void decode(std::span<const std::uint8_t> msg, std::span<float> out, float alpha, DecodeMode mode,
              const EncodeContext& ctx) const override;
  std::optional<std::size_t> fixed_message_bytes(std::size_t n) const override;
  DType wire_dtype() const override { return DType::kF32; }
  double contraction_delta(std::size_t) const override { return 0.0; }

  // One exchange of the low_rank strategy, whose collectives come between these steps, in
  // this order, on a = M + e (or a copy of the gradient) of the whole bucket, after
  // prepare(). Every message is f32 and is allreduced (sum) before the next step.
  //   first_factor   this rank's first message: P = M Q (alternate, even exchanges: M orth(Q);
  //                  odd exchanges: Q = M^T orth(P)), then the dense floats.
  //   keep_first     its sum over the ranks: keeps the summed factor (and the warm start of
  //                  the previous exchange, for an all-zero step).
  //   second_factor  full variant only (sends_second_factor()): Q = M^T orth(P summed).
  //   keep_second    its sum over the ranks.
  //   finish_exchange  bucket = M_hat averaged (the dense floats from the summed first
  //                  message), e = a - M_hat on matrices and 0 on dense floats when
  //                  error_feedback, the warm start kept through an all-zero step.
  void first_factor(std::span<const float> a, std::vector<float>& msg);
  void keep_first(std::span<const float> summed);
  bool sends_second_factor() const;
  void second_factor(std::span<const float> a, std::vector<float>& msg);
  void keep_second(std::span<const float> summed);
  void finish_exchange(std::span<float> bucket, std::span<float> a, bool error_feedback,
                       std::span<const float> summed_first, float inv_world);

  const std::vector<MatrixSegment>& matrices() const { return matrices_; }
  // The current Q factor of matrix m ([cols, r], row-major), identical on every rank.
  const std::vector<float>& q_factor(std::size_t m) const { return q_[m]; }
  // The factors of the current exchange, [rows, r] (empty before the first alternate
  // exchange), and the number of exchanges so far (its parity is saved).
  const std::vector<float>& p_factor(std::size_t m) const { return p_[m]; }
  std::uint64_t exchanges() const { return exchanges_; }
  // For the GPU strategy (device_low_rank.h), which keeps the factors on the device and runs
  // the exchange there: installs them, and the exchange count, before save_state.
  void set_factors(std::vector<std::vector<float>> p, std::vector<std::vector<float>> q,
                   std::uint64_t exchanges);
  // Its dense floats: [offset, count) ranges of the bucket outside the matrices, in order.
  std::vector<std::pair<std::size_t, std::size_t>> dense_ranges() const;
  bool alternate() const { return options_.alternate; }
  std::size_t rank() const { return static_cast<std::size_t>(options_.rank); }
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
};

// Orthonormalises the r columns of a row-major [rows, r] matrix in place (modified
// Gram-Schmidt with two projection passes, Note [Gram-Schmidt twice]; dot products in double
// over fixed chunks of rows, Note [PowerSGD's fixed summation order], powersgd_math.h). A
// column that depends on earlier ones becomes a unit direction orthogonal to them; an exactly
// zero column is left as zeros.
void orthonormalize_columns(float* m, std::size_t rows, std::size_t r);

// The exchange's thin products (one side has r columns), row-major, for matrix s at m:
// out[rows, r] = M F, out[cols, r] = M^T F, out[rows, cols] = P Q^T. Each output element is
// one fma chain in a fixed order (Note [PowerSGD's fixed summation order], powersgd_math.h),
// so results are identical on every rank whatever its thread count, and on the GPU; public
// so that a reference of the exchange computes the very same floats (powersgd_test.cpp).
void times_factor(const float* m, const MatrixSegment& s, const float* f, std::size_t r,
                  float* out);
void times_t_factor(const float* m, const MatrixSegment& s, const float* f, std::size_t r,
                    float* out);
void outer_factors(const float* p, const float* q, const MatrixSegment& s, std::size_t r,
                   float* out);

}  // namespace sparq::compress
