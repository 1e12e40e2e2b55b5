#include "compress/device_low_rank.h"

#include <algorithm>

#include "compress/device_exchange.h"

#if SPARQ_HAS_CUDA
#include <cuda_runtime_api.h>

#include "compress/cuda/feedback_cuda.h"
#include "compress/cuda/powersgd_cuda.h"
#include "core/cuda/cuda_check.h"
#include "core/cuda/sync_copy.h"
#endif

namespace sparq::compress {

#if SPARQ_HAS_CUDA
namespace {

cudaStream_t as_stream(void* stream) { return static_cast<cudaStream_t>(stream); }

void copy_async(float* dst, const float* src, std::size_t floats, void* stream) {
  if (floats == 0) return;
  CUDA_CHECK(cudaMemcpyAsync(dst, src, 4 * floats, cudaMemcpyDeviceToDevice, as_stream(stream)));
}

Buffer device_floats(std::size_t floats) { return Buffer::device(4 * floats + 16, true); }

}  // namespace

void DeviceLowRank::upload(comm::Communicator& comm, void* stream) {
  // The factors' buffers are replaced: queued work (earlier buckets' collectives, or this
  // bucket's before a resume) may still read them.
  drain_exchange_stream(comm, stream, "powersgd: uploading the factors");
  const auto& matrices = psgd_.matrices();
  const std::size_t r = psgd_.rank();
  p_at_.clear();
  q_at_.clear();
  p_floats_ = q_floats_ = 0;
  for (const MatrixSegment& s : matrices) {
    p_at_.push_back(p_floats_);
    q_at_.push_back(q_floats_);
    p_floats_ += s.rows * r;
    q_floats_ += s.cols * r;
  }
  dense_floats_ = 0;
  for (const auto& [offset, count] : psgd_.dense_ranges()) dense_floats_ += count;
  p_ = device_floats(p_floats_);
  q_ = device_floats(q_floats_);
  backup_p_ = device_floats(p_floats_);
  backup_q_ = device_floats(q_floats_);
  first_ = device_floats(std::max(p_floats_, q_floats_) + dense_floats_);
  second_ = device_floats(q_floats_);
  std::size_t partial = 1;
  for (const MatrixSegment& s : matrices) {
    partial = std::max(partial, cuda::psgd_partial_doubles(std::max(s.rows, s.cols)));
  }
  partial_ = Buffer::device(8 * partial);
  p_set_ = !matrices.empty();
  for (std::size_t m = 0; m < matrices.size(); ++m) {
    const std::vector<float>& q = psgd_.q_factor(m);
    const std::vector<float>& p = psgd_.p_factor(m);
    // Note [Synchronous copies and non-blocking streams]: the exchange stream must see them.
    cuda::copy_synchronously(q_.as<float>() + q_at_[m], q.data(), 4 * q.size());
    if (p.empty()) {
      p_set_ = false;
    } else {
      cuda::copy_synchronously(p_.as<float>() + p_at_[m], p.data(), 4 * p.size());
    }
  }
  exchanges_ = psgd_.exchanges();
  uploaded_ = true;
}

Status DeviceLowRank::run(std::span<float> bucket, float* residual, comm::Communicator& comm,
                          const EncodeContext& ctx_in, const ExecContext& exec,
                          float* own_decoded) {
  SPARQ_RETURN_IF_ERROR(check_device_communicator(comm, ctx_in));
  void* stream = device_exchange_stream(comm, exec);
  const cudaStream_t s = as_stream(stream);
  EncodeContext ctx = ctx_in;
  ctx.rank = comm.rank();
  ctx.world_size = comm.size();
  ctx.offset = 0;
  const std::size_t n = bucket.size();
  psgd_.prepare(n, ctx);  // the plan and the initial Q, on the host
  if (!uploaded_) upload(comm, stream);
  const auto& matrices = psgd_.matrices();
  const auto dense = psgd_.dense_ranges();
  const std::size_t r = psgd_.rank();
  const bool alternate = psgd_.alternate();
  float* p = p_.as<float>();
  float* q = q_.as<float>();
  auto* partial = partial_.as<double>();

  // a = g + e in the residual, or a copy of g (Compressor::accumulate's bits).
  float* a = residual;
  if (residual != nullptr) {
    cuda::accumulate_gradient(bucket.data(), residual, n, s);
  } else {
    // Note [No unbounded waits in the exchange]: a replaced buffer goes after a bounded drain.
    reserve_exchange_buffer(a_copy_, 4 * n + 16, comm, stream);
    a = a_copy_.as<float>();
    copy_async(a, bucket.data(), n, stream);
  }
  const bool collective = exchanges_with_collective(comm);

  // The first message: a factor per matrix, then the dense floats (first_factor).
  const bool first_is_p = !alternate || exchanges_ % 2 == 0;
  float* first = first_.as<float>();
  for (std::size_t m = 0; m < matrices.size(); ++m) {
    const MatrixSegment& seg = matrices[m];
    const float* mat = a + seg.offset;
    if (first_is_p) {
      if (alternate) cuda::psgd_orthonormalize(q + q_at_[m], seg.cols, r, partial, s);
      cuda::psgd_times_factor(mat, seg.rows, seg.cols, q + q_at_[m], r, first + p_at_[m], s);
    } else {
      cuda::psgd_orthonormalize(p + p_at_[m], seg.rows, r, partial, s);
      cuda::psgd_times_t_factor(mat, seg.rows, seg.cols, p + p_at_[m], r, first + q_at_[m], s);
    }
  }
  const std::size_t factor_floats = first_is_p ? p_floats_ : q_floats_;
  std::size_t at = factor_floats;
  for (const auto& [offset, count] : dense) {
    copy_async(first + at, a + offset, count, stream);
    at += count;
  }
  if (collective) comm.allreduce(first, first, at, DType::kF32, comm::ReduceOp::kSum);
  payload_bytes_ = 4 * at;

  // keep_first: the warm starts before this exchange, then the summed factor. The message
  // lays the factors out as p_ / q_ do (matrix after matrix), so one copy keeps them.
  const bool p_was_set = p_set_;
  copy_async(backup_q_.as<float>(), q, q_floats_, stream);
  if (alternate && p_was_set) copy_async(backup_p_.as<float>(), p, p_floats_, stream);
  copy_async(first_is_p ? p : q, first, factor_floats, stream);
  if (first_is_p) p_set_ = true;

  if (!alternate) {  // second_factor and keep_second: Q = M^T orth(P), summed
    float* second = second_.as<float>();
    for (std::size_t m = 0; m < matrices.size(); ++m) {
      const MatrixSegment& seg = matrices[m];
      cuda::psgd_orthonormalize(p + p_at_[m], seg.rows, r, partial, s);
      cuda::psgd_times_t_factor(a + seg.offset, seg.rows, seg.cols, p + p_at_[m], r,
                                second + q_at_[m], s);
    }
    if (collective) {
      comm.allreduce(second, second, q_floats_, DType::kF32, comm::ReduceOp::kSum);
    }
    payload_bytes_ += 4 * q_floats_;
    copy_async(q, second, q_floats_, stream);
  }

  // finish_exchange: M_hat with the summed factor over the world, e = a - M_hat.
  const float inv_world = 1.0f / static_cast<float>(comm.size());
  for (std::size_t m = 0; m < matrices.size(); ++m) {
    const MatrixSegment& seg = matrices[m];
    const bool summed_is_q = !alternate || !first_is_p;
    float* summed = summed_is_q ? q + q_at_[m] : p + p_at_[m];
    cuda::psgd_scale(summed, summed, (summed_is_q ? seg.cols : seg.rows) * r, inv_world, s);
    cuda::psgd_decode(p + p_at_[m], q + q_at_[m], seg.rows, seg.cols, r, bucket.data() + seg.offset,
                      residual != nullptr ? a + seg.offset : nullptr, s);
  }
  at = factor_floats;
  for (const auto& [offset, count] : dense) {
    cuda::psgd_scale(first + at, bucket.data() + offset, count, inv_world, s);
    if (residual != nullptr && count > 0) CUDA_CHECK(cudaMemsetAsync(a + offset, 0, 4 * count, s));
    at += count;
  }
  for (std::size_t m = 0; m < matrices.size(); ++m) {
    const MatrixSegment& seg = matrices[m];
    cuda::psgd_restore_if_zero(q + q_at_[m], backup_q_.as<float>() + q_at_[m], seg.cols * r, s);
    if (alternate && p_was_set) {
      cuda::psgd_restore_if_zero(p + p_at_[m], backup_p_.as<float>() + p_at_[m], seg.rows * r, s);
    }
  }
  ++exchanges_;
  if (own_decoded != nullptr) copy_async(own_decoded, bucket.data(), n, stream);
  return Status::ok();
}

void DeviceLowRank::save_state(std::vector<std::uint8_t>& out) {
  if (uploaded_) {  // the device holds the current factors: hand them back first
    const auto& matrices = psgd_.matrices();
    const std::size_t r = psgd_.rank();
    std::vector<std::vector<float>> p(matrices.size()), q(matrices.size());
    for (std::size_t m = 0; m < matrices.size(); ++m) {
      q[m].resize(matrices[m].cols * r);
      // After the last exchange, which may still be queued.
      cuda::copy_synchronously(q[m].data(), q_.as<float>() + q_at_[m], 4 * q[m].size());
      if (!p_set_) continue;
      p[m].resize(matrices[m].rows * r);
      cuda::copy_synchronously(p[m].data(), p_.as<float>() + p_at_[m], 4 * p[m].size());
    }
    psgd_.set_factors(std::move(p), std::move(q), exchanges_);
  }
  psgd_.save_state(out);
}

Status DeviceLowRank::load_state(std::span<const std::uint8_t> in) {
  SPARQ_RETURN_IF_ERROR(psgd_.load_state(in));
  uploaded_ = false;  // the loaded factors go up at the next run
  return Status::ok();
}
#else
Status DeviceLowRank::run(std::span<float>, float*, comm::Communicator&, const EncodeContext& ctx,
                          const ExecContext&, float*) {
  return Status::error("bucket {}: exchanging a GPU store needs sparq built with CUDA",
                       ctx.bucket_id);
}
void DeviceLowRank::save_state(std::vector<std::uint8_t>& out) { psgd_.save_state(out); }
Status DeviceLowRank::load_state(std::span<const std::uint8_t> in) { return psgd_.load_state(in); }
#endif

}  // namespace sparq::compress
