// The device twins (device_codec.h) of the codecs without a selection step: fp16/bf16 casts,
// randomk (positions drawn, not chosen), qsgd, terngrad and signsgd/onebit. Each message is a
// function of every value (and, for the scaled ones, a span-wide scale), computed in one or two
// passes; the selecting and block codecs (lbs, topk, blockquant) are in device_codec.cpp, dgc in
// dgc_device_codec.cpp. Built only with CUDA; device_codec.cpp holds the CPU-only stubs.
#include <cuda_runtime_api.h>

#include "compress/cuda/dense_cast_cuda.h"
#include "compress/cuda/qsgd_cuda.h"
#include "compress/cuda/randomk_cuda.h"
#include "compress/cuda/scaled_codes_cuda.h"
#include "compress/device_codec.h"
#include "compress/options.h"
#include "compress/random_streams.h"
#include "core/check.h"

namespace sparq::compress {
namespace {

cudaStream_t as_stream(void* stream) { return static_cast<cudaStream_t>(stream); }

// The scratch word of a scale check: for a received message (`invalid` given), null for one's
// own, which is trusted.
std::uint32_t* verdict_scratch(void* scratch, std::size_t scratch_size, std::uint32_t* invalid,
                               const char* codec) {
  if (invalid == nullptr) return nullptr;
  SPARQ_CHECK(scratch != nullptr && scratch_size >= sizeof(std::uint32_t),
              "{} device decode: no scratch for the scale check", codec);
  return static_cast<std::uint32_t*>(scratch);
}

// The span-wide sums' scratch of an encode: checked as lbs and topk check theirs, so that a
// short scratch ends the job naming the codec instead of being written past (review,
// 2026-12-06; every caller sizes it with scratch_bytes() today).
void* sums_scratch(void* scratch, std::size_t scratch_size, std::size_t n, const char* codec) {
  const std::size_t need = cuda::scaled_codes_scratch_bytes(n);
  SPARQ_CHECK(scratch != nullptr && scratch_size >= need,
              "{} device encode: scratch of {} bytes for a bucket of {} needs {}", codec,
              scratch_size, n, need);
  return scratch;
}

// fp16 / bf16: the message is u16[n] of a / P (dense_cast.h).
class DenseCastDeviceCodec final : public DeviceCodec {
 public:
  explicit DenseCastDeviceCodec(bool half)
      : format_(half ? cuda::Cast16::kF16 : cuda::Cast16::kBF16) {}

  std::size_t capacity(std::size_t n, const EncodeContext&) const override { return 2 * n; }
  std::size_t scratch_bytes(std::size_t, const EncodeContext&) const override { return 0; }
  void encode(const float* g, float* e, std::size_t n, const EncodeContext& ctx, std::uint8_t* msg,
              void*, std::size_t, void* stream) override {
    auto* out = reinterpret_cast<std::uint16_t*>(msg);
    if (e != nullptr) {
      cuda::cast16_encode_with_feedback(format_, g, e, n, ctx.world_size, out, as_stream(stream));
    } else {
      cuda::cast16_encode(format_, g, n, ctx.world_size, out, as_stream(stream));
    }
  }
  void decode(const std::uint8_t* msg, std::size_t n, const EncodeContext& ctx, float alpha,
              bool add, float* out, void*, std::size_t, void* stream,
              std::uint32_t*) const override {
    cuda::cast16_decode(format_, reinterpret_cast<const std::uint16_t*>(msg), n, ctx.world_size,
                        alpha, add, out, as_stream(stream));
  }

 private:
  cuda::Cast16 format_;
};

class RandomkDeviceCodec final : public DeviceCodec {
 public:
  explicit RandomkDeviceCodec(double density) : density_(density) {}

  std::size_t capacity(std::size_t n, const EncodeContext& ctx) const override {
    return 4 * args(n, ctx).k;
  }
  std::size_t scratch_bytes(std::size_t, const EncodeContext&) const override { return 0; }
  void encode(const float* g, float* e, std::size_t n, const EncodeContext& ctx, std::uint8_t* msg,
              void*, std::size_t, void* stream) override {
    cuda::randomk_encode(e ? g : nullptr, e ? e : const_cast<float*>(g), n, args(n, ctx), msg,
                         as_stream(stream));
  }
  void decode(const std::uint8_t* msg, std::size_t n, const EncodeContext& ctx, float alpha,
              bool add, float* out, void*, std::size_t, void* stream,
              std::uint32_t*) const override {
    cuda::randomk_decode(msg, n, args(n, ctx), alpha, add, out, as_stream(stream));
  }

 private:
  // randomk.cpp's k (the step's density) and its rank-shared draw.
  cuda::RandomkArgs args(std::size_t n, const EncodeContext& ctx) const {
    return {k_for(density_for(density_, ctx), n), step_key(ctx.seed, ctx.step),
            compression_stream(ctx, /*rank=*/0)};
  }
  double density_;
};

class QsgdDeviceCodec final : public DeviceCodec {
 public:
  QsgdDeviceCodec(int levels, int bits, std::size_t chunk)
      : levels_(levels), bits_(bits), chunk_(chunk) {}

  std::size_t capacity(std::size_t n, const EncodeContext&) const override {
    return 4 * ((n + chunk_ - 1) / chunk_) + packed_code_bytes(n, bits_);
  }
  // The norm check's verdict word (decode).
  std::size_t scratch_bytes(std::size_t, const EncodeContext&) const override {
    return sizeof(std::uint32_t);
  }
  void encode(const float* g, float* e, std::size_t n, const EncodeContext& ctx, std::uint8_t* msg,
              void*, std::size_t, void* stream) override {
    cuda::qsgd_encode(e ? g : nullptr, e ? e : const_cast<float*>(g), n, args(ctx), msg,
                      as_stream(stream));
  }
  // A received message (invalid given) has its norms checked, as check_message does on the
  // CPU; one's own message is trusted.
  void decode(const std::uint8_t* msg, std::size_t n, const EncodeContext& ctx, float alpha,
              bool add, float* out, void* scratch, std::size_t scratch_size, void* stream,
              std::uint32_t* invalid) const override {
    cuda::qsgd_decode(msg, n, args(ctx), alpha, add, out, as_stream(stream),
                      verdict_scratch(scratch, scratch_size, invalid, "qsgd"), invalid);
  }

 private:
  // qsgd.cpp's rounding draws: the sender's stream, addressed by bucket position.
  cuda::QsgdArgs args(const EncodeContext& ctx) const {
    return {
        levels_,   bits_, chunk_, step_key(ctx.seed, ctx.step), compression_stream(ctx, ctx.rank),
        ctx.offset};
  }
  int levels_, bits_;
  std::size_t chunk_;
};

// terngrad and signsgd/onebit: an f32 scale from span-wide sums, then a code per value.
class TernGradDeviceCodec final : public DeviceCodec {
 public:
  explicit TernGradDeviceCodec(double clip_sigma) : clip_sigma_(clip_sigma) {}

  std::size_t capacity(std::size_t n, const EncodeContext&) const override {
    return 4 + (n + 3) / 4;
  }
  std::size_t scratch_bytes(std::size_t n, const EncodeContext&) const override {
    return cuda::scaled_codes_scratch_bytes(n);
  }
  void encode(const float* g, float* e, std::size_t n, const EncodeContext& ctx, std::uint8_t* msg,
              void* scratch, std::size_t scratch_size, void* stream) override {
    // terngrad.cpp's rounding draws: the sender's stream, addressed by bucket position.
    const cuda::TernGradArgs args{clip_sigma_, step_key(ctx.seed, ctx.step),
                                  compression_stream(ctx, ctx.rank), ctx.offset};
    cuda::terngrad_encode(e ? g : nullptr, e ? e : const_cast<float*>(g), n, args, msg,
                          sums_scratch(scratch, scratch_size, n, "terngrad"), as_stream(stream));
  }
  void decode(const std::uint8_t* msg, std::size_t n, const EncodeContext&, float alpha, bool add,
              float* out, void* scratch, std::size_t scratch_size, void* stream,
              std::uint32_t* invalid) const override {
    cuda::terngrad_decode(msg, n, alpha, add, out, as_stream(stream),
                          verdict_scratch(scratch, scratch_size, invalid, "terngrad"), invalid);
  }

 private:
  double clip_sigma_;
};

class SignDeviceCodec final : public DeviceCodec {
 public:
  explicit SignDeviceCodec(bool rms) : rms_(rms) {}

  std::size_t capacity(std::size_t n, const EncodeContext&) const override {
    return 4 + (n + 7) / 8;
  }
  std::size_t scratch_bytes(std::size_t n, const EncodeContext&) const override {
    return cuda::scaled_codes_scratch_bytes(n);
  }
  void encode(const float* g, float* e, std::size_t n, const EncodeContext&, std::uint8_t* msg,
              void* scratch, std::size_t scratch_size, void* stream) override {
    cuda::sign_encode(e ? g : nullptr, e ? e : const_cast<float*>(g), n, rms_, msg,
                      sums_scratch(scratch, scratch_size, n, "sign"), as_stream(stream));
  }
  void decode(const std::uint8_t* msg, std::size_t n, const EncodeContext&, float alpha, bool add,
              float* out, void* scratch, std::size_t scratch_size, void* stream,
              std::uint32_t* invalid) const override {
    cuda::sign_decode(msg, n, alpha, add, out, as_stream(stream),
                      verdict_scratch(scratch, scratch_size, invalid, "sign"), invalid);
  }

 private:
  bool rms_;
};

}  // namespace

std::unique_ptr<DeviceCodec> make_terngrad_device_codec(double clip_sigma) {
  return std::make_unique<TernGradDeviceCodec>(clip_sigma);
}
std::unique_ptr<DeviceCodec> make_sign_device_codec(bool rms) {
  return std::make_unique<SignDeviceCodec>(rms);
}
std::unique_ptr<DeviceCodec> make_dense_cast_device_codec(bool half) {
  return std::make_unique<DenseCastDeviceCodec>(half);
}
std::unique_ptr<DeviceCodec> make_randomk_device_codec(double density) {
  return std::make_unique<RandomkDeviceCodec>(density);
}
std::unique_ptr<DeviceCodec> make_qsgd_device_codec(int levels, int code_bits, std::size_t chunk) {
  return std::make_unique<QsgdDeviceCodec>(levels, code_bits, chunk);
}

}  // namespace sparq::compress
