// dgc's CUDA twin (device_codec.h): the CPU's DgcCompressor under ErrorFeedback, step for
// step, on the device. With error feedback (a = e + u is the residual's accumulation):
//   the clipping norm ||g||^2        span_stats (Note [Fixed-partition sums]), on the device
//   u = m u + s g                    dgc_cuda.h, dgc_math.h's arithmetic
//   a = u + e, top-k, message, e = a - D(m)   the topk twin (lbs_cuda.h), the same bytes
//   u = 0 at the kept indices        dgc_cuda.h, from the selection's indices
// Without error feedback the CPU compressor never accumulates: plain top-k of g, as there.
// The momentum u is this codec's state (one per bucket, like the CPU compressor instance),
// allocated at the first encode and saved in the CPU's format (save_floats), so a checkpoint
// written on one device resumes on the other.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <vector>

#include "compress/byte_io.h"
#include "compress/cuda/dgc_cuda.h"
#include "compress/cuda/lbs_cuda.h"
#include "compress/cuda/span_stats_cuda.h"
#include "compress/device_codec.h"
#include "compress/dgc.h"
#include "compress/options.h"
#include "core/buffer.h"
#include "core/cuda/cuda_check.h"
#include "core/cuda/sync_copy.h"

namespace sparq::compress {
namespace {

class DgcDeviceCodec final : public DeviceCodec {
 public:
  explicit DgcDeviceCodec(DgcCompressor::Options options) : options_(options) {}

  std::size_t capacity(std::size_t n, const EncodeContext& ctx) const override {
    return cuda::topk_capacity(n, k(n, ctx));
  }
  std::size_t scratch_bytes(std::size_t n, const EncodeContext& ctx) const override {
    const std::size_t kept = k(n, ctx);
    return std::max(cuda::lbs_scratch_bytes(n, kept), cuda::lbs_decode_scratch_bytes(n, kept));
  }

  void encode(const float* g, float* e, std::size_t n, const EncodeContext& ctx, std::uint8_t* msg,
              void* scratch, std::size_t scratch_size, void* stream_ptr) override {
    const auto stream = static_cast<cudaStream_t>(stream_ptr);
    const std::size_t kept = k(n, ctx);
    if (e == nullptr) {  // topk_encode only reads its `e` argument without error feedback
      cuda::topk_encode(nullptr, const_cast<float*>(g), n, kept, msg, scratch, scratch_size,
                        stream);
      return;
    }
    float* u = momentum(ctx.offset + n, stream) + ctx.offset;
    touched_ = std::max(touched_, ctx.offset + n);
    const cuda::DgcArgs args{static_cast<float>(options_.momentum), options_.clip_norm,
                             ctx.world_size};
    if (options_.clip_norm > 0) {
      cuda::span_stats(g, n, StatTerm::kSquare, StatTerm::kNone, stats_scratch(n),
                       norm_sq_.as<SpanStats>(), stream);
    }
    cuda::dgc_momentum(g, u, n, args, norm_sq_.as<SpanStats>(), stream);
    if (input_measurement_ != nullptr) {  // ||a||^2, a = u + e (set_input_measurement)
      cuda::span_stats(u, n, StatTerm::kSquare, StatTerm::kNone, stats_scratch(n),
                       input_measurement_, stream, e);
    }
    cuda::topk_encode(u, e, n, kept, msg, scratch, scratch_size, stream);  // a = u + e in e
    cuda::dgc_mask(u, cuda::sparse_kept_indices(scratch), kept, stream);
  }

  void decode(const std::uint8_t* msg, std::size_t n, const EncodeContext& ctx, float alpha,
              bool add, float* out, void* scratch, std::size_t scratch_size, void* stream,
              std::uint32_t* invalid) const override {
    cuda::topk_decode(msg, n, k(n, ctx), alpha, add, out, scratch, scratch_size,
                      static_cast<cudaStream_t>(stream), invalid);
  }

  void set_input_measurement(SpanStats* input) override { input_measurement_ = input; }
  bool has_state() const override { return true; }
  // With error feedback, the momentum, clipping-norm scratch and norm for the whole bucket,
  // zeroed; without it encode never touches them (plain top-k), so nothing is allocated.
  // Outside any step, so the device-wide waits of zeroing and freeing are harmless here.
  // Momentum already held (a state loaded first, a second call) is kept, zero-extended.
  void prepare(std::size_t bucket_floats, bool error_feedback) override {
    if (!error_feedback) return;
    if (bucket_floats > floats_) {
      Buffer grown = Buffer::device(floats_zeroed_bytes(bucket_floats), /*zeroed=*/true);
      if (floats_ > 0) cuda::copy_synchronously(grown.data(), u_.data(), floats_ * sizeof(float));
      u_ = std::move(grown);
      floats_ = bucket_floats;
    }
    const std::size_t stats_bytes = cuda::span_stats_scratch_bytes(bucket_floats) + 1;
    if (norm_scratch_.size() < stats_bytes) norm_scratch_ = Buffer::device(stats_bytes);
    if (norm_sq_.size() == 0) norm_sq_ = Buffer::device(sizeof(SpanStats), /*zeroed=*/true);
  }
  // The entries encodes have reached (`touched_`), as many as the CPU's u_ holds.
  void save_state(std::vector<std::uint8_t>& out) const override {
    std::vector<float> host(touched_);
    if (touched_ > 0) {
      // After the last encode, which may still be queued.
      cuda::copy_synchronously(host.data(), u_.data(), touched_ * sizeof(float));
    }
    save_floats(host, out);
  }
  Status load_state(std::span<const std::uint8_t> in) override {
    std::vector<float> host;
    SPARQ_RETURN_IF_ERROR(load_floats(in, host, "dgc momentum"));
    CUDA_CHECK(cudaDeviceSynchronize());
    // Never smaller than prepare()'s: a state saved before the first exchange is empty.
    floats_ = std::max(host.size(), floats_);
    touched_ = host.size();
    u_ = Buffer::device(floats_zeroed_bytes(floats_), /*zeroed=*/true);
    if (!host.empty()) {
      // Landed before the next encode: Note [Synchronous copies and non-blocking streams].
      cuda::copy_synchronously(u_.data(), host.data(), host.size() * sizeof(float));
    }
    return Status::ok();
  }

 private:
  // DgcCompressor::encode's k: the density warm-up's, else dgc's own schedule.
  std::size_t k(std::size_t n, const EncodeContext& ctx) const {
    return k_for(
        ctx.density > 0 ? ctx.density : dgc_density_at(options_, ctx.step - ctx.warmup_origin), n);
  }
  // span_stats's scratch for n entries, reused in stream order (sized by prepare()).
  void* stats_scratch(std::size_t n) {
    if (norm_scratch_.size() < cuda::span_stats_scratch_bytes(n)) {
      norm_scratch_ = Buffer::device(cuda::span_stats_scratch_bytes(n) + 1);
    }
    return norm_scratch_.data();
  }
  static std::size_t floats_zeroed_bytes(std::size_t floats) { return floats * sizeof(float) + 4; }
  // The momentum of at least `floats` entries, zero-extended as the CPU's u_.resize() is.
  // prepare() sized it for the bucket, so within a training step this never grows; a codec
  // used without prepare() (as some gpu tests use it) grows it here, zeroing on the stream.
  float* momentum(std::size_t floats, cudaStream_t stream) {
    if (floats > floats_) {
      Buffer grown = Buffer::device(floats_zeroed_bytes(floats));
      CUDA_CHECK(cudaMemsetAsync(grown.data(), 0, floats_zeroed_bytes(floats), stream));
      if (floats_ > 0) {
        CUDA_CHECK(cudaMemcpyAsync(grown.data(), u_.data(), floats_ * sizeof(float),
                                   cudaMemcpyDeviceToDevice, stream));
        CUDA_CHECK(cudaStreamSynchronize(stream));  // before the old buffer is freed
      }
      u_ = std::move(grown);
      floats_ = floats;
    }
    if (norm_sq_.size() == 0) {
      norm_sq_ = Buffer::device(sizeof(SpanStats));
      CUDA_CHECK(cudaMemsetAsync(norm_sq_.data(), 0, sizeof(SpanStats), stream));
    }
    return u_.as<float>();
  }

  DgcCompressor::Options options_;
  Buffer u_;  // the momentum, floats_ entries (device)
  std::size_t floats_ = 0;
  std::size_t touched_ = 0;  // the extent encodes reached (the CPU's u_.size())
  Buffer norm_sq_;  // one SpanStats: ||g||^2 for the clipping scale (device)
  Buffer norm_scratch_;
  SpanStats* input_measurement_ = nullptr;  // set_input_measurement (device)
};

}  // namespace

std::unique_ptr<DeviceCodec> make_dgc_device_codec(const DgcCompressor::Options& options) {
  return std::make_unique<DgcDeviceCodec>(options);
}

}  // namespace sparq::compress
