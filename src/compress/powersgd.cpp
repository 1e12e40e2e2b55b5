#include "compress/powersgd.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/check.h"
#include "core/ops.h"
#include "core/rng.h"

namespace sparq::compress {

Result<PowerSgdCompressor::Options> PowerSgdCompressor::Options::parse(ConfigReader& reader) {
  Options o;
  SPARQ_ASSIGN_OR_RETURN(std::int64_t rank, reader.integer("rank", 4, 1, 1024));
  SPARQ_ASSIGN_OR_RETURN(std::int64_t min_numel,
                         reader.integer("min_compress_numel", 4096, 1, std::int64_t{1} << 40));
  SPARQ_ASSIGN_OR_RETURN(o.alternate, reader.boolean("alternate", false));
  SPARQ_RETURN_IF_ERROR(reader.finish());
  o.rank = static_cast<int>(rank);
  o.min_compress_numel = static_cast<std::size_t>(min_numel);
  o.rank_key = reader.full_key("rank");
  return o;
}

Status PowerSgdCompressor::set_layout(std::size_t n, std::vector<MatrixSegment> segments) {
  std::sort(segments.begin(), segments.end(),
            [](const auto& x, const auto& y) { return x.offset < y.offset; });
  const std::size_t r = static_cast<std::size_t>(options_.rank);
  matrices_.clear();
  dense_.clear();
  std::size_t pos = 0;
  for (const MatrixSegment& s : segments) {
    const std::size_t numel = s.rows * s.cols;
    if (s.offset < pos || s.offset + numel > n) {
      return Status::error("powersgd: tensor '{}' [{}, {}] at {} overlaps another or leaves the "
                           "bucket of {}", s.name, s.rows, s.cols, s.offset, n);
    }
    if (s.offset > pos) dense_.push_back({pos, s.offset - pos});
    bool compress = s.rows > 1 && s.cols > 1 && numel >= options_.min_compress_numel;
    // A piece of a split tensor may hold a few rows only ("numel mod cap" floats at the
    // cut): dense, where it refused a rank every whole tensor allows (review, 2026-12-06).
    if (compress && s.piece && s.rows < r) compress = false;
    if (compress && r > std::min(s.rows, s.cols)) {
      return Status::error("{}: {} exceeds min(rows, cols) = {} of tensor '{}' [{}, {}]",
                           options_.rank_key, r, std::min(s.rows, s.cols), s.name, s.rows, s.cols);
    }
    if (compress) {
      matrices_.push_back(s);
    } else if (numel > 0) {
      dense_.push_back({s.offset, numel});
    }
    pos = s.offset + numel;
  }
  if (pos < n) dense_.push_back({pos, n - pos});
  n_ = n;
  planned_ = true;
  p_.assign(matrices_.size(), {});
  q_.assign(matrices_.size(), {});
  exchanges_ = 0;
  return Status::ok();
}

void PowerSgdCompressor::plan_default(std::size_t n) {
  const std::size_t cols = std::max<std::size_t>(1, static_cast<std::size_t>(std::sqrt(double(n))));
  const std::size_t rows = n / cols;
  std::vector<MatrixSegment> segments;
  if (std::min(rows, cols) >= static_cast<std::size_t>(options_.rank)) {
    segments.push_back({"bucket", 0, rows, cols});
  }
  const Status s = set_layout(n, segments);
  SPARQ_CHECK(s.is_ok(), "{}", s.message());
}

void PowerSgdCompressor::prepare(std::size_t n, const EncodeContext& ctx) {
  if (!planned_) plan_default(n);
  SPARQ_CHECK(n == n_, "powersgd: planned for {} floats, got {}", n_, n);
  const std::size_t r = static_cast<std::size_t>(options_.rank);
  for (std::size_t m = 0; m < matrices_.size(); ++m) {
    if (!q_[m].empty()) continue;
    q_[m].resize(matrices_[m].cols * r);
    // Rank 0's stream: every rank starts from the same Q.
    fill_normal(q_[m].data(), q_[m].size(), 0.0f, 1.0f, ctx.seed,
                make_stream(RngPurpose::kCompression, 0, ctx.bucket_id * 4099u + static_cast<std::uint32_t>(m)));
  }
}

std::size_t PowerSgdCompressor::factor_floats(bool p) const {
  std::size_t total = 0;
  for (const auto& s : matrices_) total += (p ? s.rows : s.cols) * options_.rank;
  return total;
}

std::size_t PowerSgdCompressor::dense_floats() const {
  std::size_t total = 0;
  for (const Range& d : dense_) total += d.count;
  return total;
}

std::optional<std::size_t> PowerSgdCompressor::fixed_message_bytes(std::size_t n) const {
  if (!planned_ || n != n_) return std::nullopt;
  return 4 * (factor_floats(true) + factor_floats(false) + dense_floats());
}

void PowerSgdCompressor::encode(std::span<const float> a, const EncodeContext& ctx,
                                Message& msg) {
  prepare(a.size(), ctx);
  const std::size_t r = static_cast<std::size_t>(options_.rank);
  msg.resize(*fixed_message_bytes(a.size()));
  float* p = reinterpret_cast<float*>(msg.data());
  float* q = p + factor_floats(true);
  float* dense = q + factor_floats(false);
  for (std::size_t m = 0; m < matrices_.size(); ++m) {
    const MatrixSegment& s = matrices_[m];
    times_factor(a.data() + s.offset, s, q_[m].data(), r, p);
    orthonormalize_columns(p, s.rows, r);
    times_t_factor(a.data() + s.offset, s, p, r, q);
    std::copy(q, q + s.cols * r, q_[m].begin());  // warm start
    p += s.rows * r;
    q += s.cols * r;
  }
  for (const Range& d : dense_) {
    std::memcpy(dense, a.data() + d.offset, 4 * d.count);
    dense += d.count;
  }
}


Status PowerSgdCompressor::check_message(std::span<const std::uint8_t> msg, std::size_t n,
                           const EncodeContext& ctx) const {
  // The factor shapes come from the layout, planned by set_layout() or the first encode().
  if (!planned_ || n != n_) {
    return Status::error("powersgd: no matrix layout for {} floats (planned: {})", n,
                         planned_ ? std::to_string(n_) : std::string("none"));
  }
  return check_message_size(*this, msg, n, *fixed_message_bytes(n));
}

void PowerSgdCompressor::decode(std::span<const std::uint8_t> msg, std::span<float> out,
                                float alpha, DecodeMode mode, const EncodeContext&) const {
  SPARQ_CHECK(planned_ && out.size() == n_ && msg.size() == *fixed_message_bytes(n_),
              "powersgd: message of {} bytes for {} floats", msg.size(), out.size());
  const std::size_t r = static_cast<std::size_t>(options_.rank);
  const float* p = reinterpret_cast<const float*>(msg.data());
  const float* q = p + factor_floats(true);
  const float* dense = q + factor_floats(false);
  std::vector<float> approx;
  for (const MatrixSegment& s : matrices_) {
    approx.resize(s.rows * s.cols);
    outer_factors(p, q, s, r, approx.data());
    float* y = out.data() + s.offset;
    if (mode == DecodeMode::kSet) ops::fill(y, approx.size(), 0.0f);
    ops::axpy(alpha, approx.data(), y, approx.size());
    p += s.rows * r;
    q += s.cols * r;
  }
  for (const Range& d : dense_) {
    float* y = out.data() + d.offset;
    if (mode == DecodeMode::kSet) ops::fill(y, d.count, 0.0f);
    ops::axpy(alpha, dense, y, d.count);
    dense += d.count;
  }
}

// Which factor goes first: full sends P then Q; alternate sends P on even exchanges and Q on
// odd ones (exchanges_ changes only in finish_exchange, so every step of one exchange agrees).
bool PowerSgdCompressor::sends_second_factor() const { return !options_.alternate; }

void PowerSgdCompressor::first_factor(std::span<const float> a, std::vector<float>& msg) {
  const std::size_t r = static_cast<std::size_t>(options_.rank);
  const bool first_is_p = !options_.alternate || exchanges_ % 2 == 0;
  msg.resize(factor_floats(first_is_p) + dense_floats());
  float* f = msg.data();
  for (std::size_t m = 0; m < matrices_.size(); ++m) {
    const MatrixSegment& s = matrices_[m];
    const float* mat = a.data() + s.offset;
    if (first_is_p) {
      if (options_.alternate) orthonormalize_columns(q_[m].data(), s.cols, r);
      times_factor(mat, s, q_[m].data(), r, f);
      f += s.rows * r;
    } else {
      orthonormalize_columns(p_[m].data(), s.rows, r);
      times_t_factor(mat, s, p_[m].data(), r, f);
      f += s.cols * r;
    }
  }
  for (const Range& d : dense_) {
    std::memcpy(f, a.data() + d.offset, 4 * d.count);
    f += d.count;
  }
}

void PowerSgdCompressor::keep_first(std::span<const float> summed) {
  const std::size_t r = static_cast<std::size_t>(options_.rank);
  const bool first_is_p = !options_.alternate || exchanges_ % 2 == 0;
  SPARQ_CHECK(summed.size() == factor_floats(first_is_p) + dense_floats(),
              "powersgd: first message of {} floats", summed.size());
  // A zero matrix (every rank's M == 0: a frozen layer, or a step whose non-finite gradients
  // were sent as zeros) makes the new factors zero, and a zero warm start would keep them zero
  // forever. Such a step keeps the previous factors as the next warm start (finish_exchange);
  // the decision depends on the summed factors only, so it is the same on every rank.
  warm_start_backup_.assign(q_.begin(), q_.end());
  if (options_.alternate) warm_start_backup_.insert(warm_start_backup_.end(), p_.begin(), p_.end());
  const float* f = summed.data();
  for (std::size_t m = 0; m < matrices_.size(); ++m) {
    const std::size_t len = (first_is_p ? matrices_[m].rows : matrices_[m].cols) * r;
    auto& keep = first_is_p ? p_[m] : q_[m];
    keep.assign(f, f + len);
    f += len;
  }
}

void PowerSgdCompressor::second_factor(std::span<const float> a, std::vector<float>& msg) {
  // Full variant: orthonormalise the summed P, then Q = M^T P for one more allreduce.
  const std::size_t r = static_cast<std::size_t>(options_.rank);
  msg.resize(factor_floats(false));
  float* q = msg.data();
  for (std::size_t m = 0; m < matrices_.size(); ++m) {
    const MatrixSegment& s = matrices_[m];
    orthonormalize_columns(p_[m].data(), s.rows, r);
    times_t_factor(a.data() + s.offset, s, p_[m].data(), r, q);
    q += s.cols * r;
  }
}

void PowerSgdCompressor::keep_second(std::span<const float> summed) {
  const std::size_t r = static_cast<std::size_t>(options_.rank);
  SPARQ_CHECK(summed.size() == factor_floats(false), "powersgd: second message of {} floats",
              summed.size());
  const float* q = summed.data();
  for (std::size_t m = 0; m < matrices_.size(); ++m) {
    q_[m].assign(q, q + matrices_[m].cols * r);
    q += matrices_[m].cols * r;
  }
}

void PowerSgdCompressor::finish_exchange(std::span<float> bucket, std::span<float> a,
                                         bool error_feedback, std::span<const float> summed_first,
                                         float inv_world) {
  const std::size_t r = static_cast<std::size_t>(options_.rank);
  const bool first_is_p = !options_.alternate || exchanges_ % 2 == 0;
  // Decode: M_hat = P Q^T with the summed factor scaled by 1/world (Q in the full variant and
  // on odd alternate exchanges, P on even ones).
  for (std::size_t m = 0; m < matrices_.size(); ++m) {
    const MatrixSegment& s = matrices_[m];
    auto& summed = !options_.alternate || !first_is_p ? q_[m] : p_[m];
    ops::scale(summed.data(), summed.size(), inv_world);
    float* y = bucket.data() + s.offset;
    outer_factors(p_[m].data(), q_[m].data(), s, r, y);
    if (error_feedback) ops::axpy(-1.0f, y, a.data() + s.offset, s.rows * s.cols);
  }
  // The dense floats follow the first message's factor.
  const float* dense_sum = summed_first.data() + factor_floats(first_is_p);
  for (const Range& d : dense_) {
    for (std::size_t i = 0; i < d.count; ++i) bucket[d.offset + i] = dense_sum[i] * inv_world;
    if (error_feedback) ops::fill(a.data() + d.offset, d.count, 0.0f);
    dense_sum += d.count;
  }
  const auto all_zero = [](const std::vector<float>& v) {
    return std::all_of(v.begin(), v.end(), [](float x) { return x == 0.0f; });
  };
  for (std::size_t m = 0; m < matrices_.size(); ++m) {
    if (all_zero(q_[m])) q_[m] = warm_start_backup_[m];
    // An alternate P still unset before this exchange has no backup: it stays zeros.
    const auto& p_backup = options_.alternate ? warm_start_backup_[matrices_.size() + m] : p_[m];
    if (options_.alternate && all_zero(p_[m]) && !p_backup.empty()) p_[m] = p_backup;
  }
  ++exchanges_;
}

void PowerSgdCompressor::set_factors(std::vector<std::vector<float>> p,
                                     std::vector<std::vector<float>> q, std::uint64_t exchanges) {
  SPARQ_CHECK(p.size() == matrices_.size() && q.size() == matrices_.size(),
              "powersgd: factors for {} matrices, planned {}", p.size(), matrices_.size());
  p_ = std::move(p);
  q_ = std::move(q);
  exchanges_ = exchanges;
}

std::vector<std::pair<std::size_t, std::size_t>> PowerSgdCompressor::dense_ranges() const {
  std::vector<std::pair<std::size_t, std::size_t>> out;
  for (const Range& d : dense_) out.emplace_back(d.offset, d.count);
  return out;
}

// State layout: u64 parity, then per matrix u64 |P|, f32 P, u64 |Q|, f32 Q.
void PowerSgdCompressor::save_state(std::vector<std::uint8_t>& out) const {
  std::size_t bytes = 8;
  for (std::size_t m = 0; m < matrices_.size(); ++m) bytes += 16 + 4 * (p_[m].size() + q_[m].size());
  out.resize(bytes);
  std::uint8_t* w = out.data();
  const std::uint64_t parity = exchanges_ % 2;
  std::memcpy(w, &parity, 8);
  w += 8;
  for (std::size_t m = 0; m < matrices_.size(); ++m) {
    for (const auto* v : {&p_[m], &q_[m]}) {
      const std::uint64_t len = v->size();
      std::memcpy(w, &len, 8);
      if (len) std::memcpy(w + 8, v->data(), 4 * len);
      w += 8 + 4 * len;
    }
  }
}

Status PowerSgdCompressor::load_state(std::span<const std::uint8_t> in) {
  if (!planned_) return Status::error("powersgd: set_layout or prepare before load_state");
  if (in.empty()) {
    // No state (StateMerge's reset to the initial value, state_merge.h): a fresh compressor,
    // whose next exchange draws Q as the first one does. save_state() never writes this.
    p_.assign(matrices_.size(), {});
    q_.assign(matrices_.size(), {});
    exchanges_ = 0;
    return Status::ok();
  }
  std::size_t pos = 0;
  auto get = [&](void* data, std::size_t bytes) {
    if (pos + bytes > in.size()) return false;
    if (bytes == 0) return true;  // an empty factor's data() may be null: no memcpy then
    std::memcpy(data, in.data() + pos, bytes);
    pos += bytes;
    return true;
  };
  std::uint64_t parity = 0;
  if (!get(&parity, 8)) return Status::error("powersgd: saved state truncated");
  std::vector<std::vector<float>> p(matrices_.size()), q(matrices_.size());
  for (std::size_t m = 0; m < matrices_.size(); ++m) {
    for (auto* v : {&p[m], &q[m]}) {
      std::uint64_t len = 0;
      if (!get(&len, 8) || len > in.size()) return Status::error("powersgd: saved state truncated");
      v->resize(len);
      if (!get(v->data(), 4 * len)) return Status::error("powersgd: saved state truncated");
    }
  }
  if (pos != in.size()) return Status::error("powersgd: saved state has trailing bytes");
  // A factor is empty (not drawn yet) or exactly [rows or cols, rank]: a state saved with
  // another rank (options_.rank_key, as the config names it) or layout would otherwise be read
  // past its end.
  const std::size_t r = rank();
  for (std::size_t m = 0; m < matrices_.size(); ++m) {
    const MatrixSegment& s = matrices_[m];
    const bool p_fits = p[m].empty() || p[m].size() == s.rows * r;
    const bool q_fits = q[m].empty() || q[m].size() == s.cols * r;
    if (!p_fits || !q_fits) {
      return Status::error(
          "powersgd: saved factors of tensor '{}' [{}, {}] hold {} and {} floats, not the {} and "
          "{} of rank {}: was the state saved with another {}?",
          s.name, s.rows, s.cols, p[m].size(), q[m].size(), s.rows * r, s.cols * r, r,
          options_.rank_key);
    }
  }
  // An odd exchange of the alternating scheme starts from the P of the one before (Q alone
  // is drawn when missing): a state with an odd parity and no P read an empty factor
  // (review, 2026-12-06: accepted, then a null read in first_factor).
  if (options_.alternate && parity % 2 == 1) {
    for (std::size_t m = 0; m < matrices_.size(); ++m) {
      if (p[m].empty()) {
        return Status::error(
            "powersgd: saved state is at an odd exchange of the alternating scheme but holds "
            "no P factor for tensor '{}': the state is damaged or not powersgd's",
            matrices_[m].name);
      }
    }
  }
  p_ = std::move(p);
  q_ = std::move(q);
  exchanges_ = parity;
  return Status::ok();
}

}  // namespace sparq::compress
