// device_strategy_built, and the device twins (device_codec.h) of the codecs that select or
// quantize by block: lbs, topk, topk_sampled, threshold and blockquant. The one-pass codecs
// are in device_codec_one_pass.cpp, dgc in dgc_device_codec.cpp; without CUDA, the stubs below.
#include "compress/device_codec.h"

#if SPARQ_HAS_CUDA
#include <cuda_runtime_api.h>

#include <algorithm>

#include "compress/cuda/block_codec_cuda.h"
#include "compress/cuda/lbs_cuda.h"
#include "compress/options.h"
#include "compress/random_streams.h"
#include "compress/topk_select.h"
#include "core/check.h"
#endif

namespace sparq::compress {

bool device_strategy_built(std::string_view strategy, const CompressorCapabilities& caps) {
  if (!caps.device_twin) return false;
  // powersgd's twin is its own exchange, low_rank, run whole on the device
  // (device_low_rank.h), not a message codec the other strategies could carry.
  if (caps.needs_matrix_layout) return strategy == aggregation_name(Aggregation::kLowRank);
  if (strategy == aggregation_name(Aggregation::kAllgather)) return true;
  // two_phase re-encodes region averages, which needs self-contained messages, as on the CPU.
  if (strategy == aggregation_name(Aggregation::kTwoPhase)) return caps.self_contained;
  // The tree merges lists of one fixed k by decode and encode (device_tree.h), as on the CPU.
  if (strategy == aggregation_name(Aggregation::kTree)) {
    return ((caps.sparse_f32 && caps.reselectable) || caps.merges_by_encode) && !caps.count_varies;
  }
  return strategy == aggregation_name(Aggregation::kAllreduce) && caps.summable;
}

#if SPARQ_HAS_CUDA
namespace {

cudaStream_t as_stream(void* stream) { return static_cast<cudaStream_t>(stream); }

// lbs and topk share the selection and index coding, hence the scratch (lbs_cuda.h).
std::size_t sparse_scratch_bytes(std::size_t n, std::size_t kept) {
  const std::size_t enc = cuda::lbs_scratch_bytes(n, kept);
  const std::size_t dec = cuda::lbs_decode_scratch_bytes(n, kept);
  return enc > dec ? enc : dec;
}

// The rounding draws of the CPU codecs (lbs.cpp, blockquant.cpp): Philox at the step's key
// and the bucket's stream, addressed by bucket position.
cuda::LbsArgs lbs_args(const BlockQuantParams& q, const EncodeContext& ctx) {
  return {q.bits, q.block, q.stochastic, step_key(ctx.seed, ctx.step),
          compression_stream(ctx, ctx.rank), ctx.offset};
}

// The sampled selection of topk_sampled and lbs (TopkSelector::sampled's key and stream, as
// both compressors' encode passes them) and the fewest entries its message keeps.
cuda::SparseSelection sampled_selection(double density, std::size_t n, const EncodeContext& ctx) {
  cuda::SparseSelection sel;
  sel.sampled = true;
  sel.k = k_for(density_for(density, ctx), n);
  sel.key = step_key(ctx.seed, ctx.step);
  sel.stream = compression_stream(ctx, ctx.rank);
  return sel;
}
std::size_t fewest_kept(std::size_t n, const cuda::SparseSelection& sel) {
  if (!sel.sampled) return 0;
  return std::min(TopkSelector::sampled_min(sel.k), cuda::sparse_max_count(n, sel));
}

// lbs, with exact selection (k entries) or the sampled one (a count the device chooses).
class LbsDeviceCodec final : public DeviceCodec {
 public:
  LbsDeviceCodec(double density, BlockQuantParams quant, bool sampled)
      : density_(density), quant_(quant), sampled_(sampled) {}

  std::size_t capacity(std::size_t n, const EncodeContext& ctx) const override {
    return cuda::lbs_capacity(n, most(n, ctx), lbs_args(quant_, ctx));
  }
  std::size_t scratch_bytes(std::size_t n, const EncodeContext& ctx) const override {
    return sampled_ ? cuda::sparse_selected_scratch_bytes(n, sampled_selection(density_, n, ctx))
                    : sparse_scratch_bytes(n, k(n, ctx));
  }
  void encode(const float* g, float* e, std::size_t n, const EncodeContext& ctx,
              std::uint8_t* msg, void* scratch, std::size_t scratch_size,
              void* stream) override {
    // Without error feedback the encoders only read their `e` argument.
    const float* grad = e ? g : nullptr;
    float* acc = e ? e : const_cast<float*>(g);
    if (sampled_) {
      cuda::lbs_encode_selected(grad, acc, n, sampled_selection(density_, n, ctx),
                                lbs_args(quant_, ctx), msg, scratch, scratch_size,
                                as_stream(stream));
    } else {
      cuda::lbs_encode(grad, acc, n, k(n, ctx), lbs_args(quant_, ctx), msg, scratch, scratch_size,
                       as_stream(stream));
    }
  }
  void decode(const std::uint8_t* msg, std::size_t n, const EncodeContext& ctx, float alpha,
              bool add, float* out, void* scratch, std::size_t scratch_size,
              void* stream, std::uint32_t* invalid) const override {
    if (sampled_) {
      const cuda::SparseSelection sel = sampled_selection(density_, n, ctx);
      cuda::lbs_decode_counted(msg, n, fewest_kept(n, sel), cuda::sparse_max_count(n, sel),
                               lbs_args(quant_, ctx), alpha, add, out, scratch, scratch_size,
                               as_stream(stream), invalid);
    } else {
      cuda::lbs_decode(msg, n, k(n, ctx), lbs_args(quant_, ctx), alpha, add, out, scratch,
                       scratch_size, as_stream(stream), invalid);
    }
  }

 private:
  // The same k as LbsCompressor::encode (the step's density under a density warm-up).
  std::size_t k(std::size_t n, const EncodeContext& ctx) const {
    return k_for(density_for(density_, ctx), n);
  }
  std::size_t most(std::size_t n, const EncodeContext& ctx) const {
    return sampled_ ? cuda::sparse_max_count(n, sampled_selection(density_, n, ctx)) : k(n, ctx);
  }
  double density_;
  BlockQuantParams quant_;
  bool sampled_;
};

// topk, gtopk (under allgather): the sparse f32 message (sparse_format.h).
class TopkDeviceCodec final : public DeviceCodec {
 public:
  explicit TopkDeviceCodec(double density) : density_(density) {}

  std::size_t capacity(std::size_t n, const EncodeContext& ctx) const override {
    return cuda::topk_capacity(n, k(n, ctx));
  }
  std::size_t scratch_bytes(std::size_t n, const EncodeContext& ctx) const override {
    return sparse_scratch_bytes(n, k(n, ctx));
  }
  void encode(const float* g, float* e, std::size_t n, const EncodeContext& ctx,
              std::uint8_t* msg, void* scratch, std::size_t scratch_size,
              void* stream) override {
    cuda::topk_encode(e ? g : nullptr, e ? e : const_cast<float*>(g), n, k(n, ctx), msg,
                      scratch, scratch_size, as_stream(stream));
  }
  void decode(const std::uint8_t* msg, std::size_t n, const EncodeContext& ctx, float alpha,
              bool add, float* out, void* scratch, std::size_t scratch_size,
              void* stream, std::uint32_t* invalid) const override {
    cuda::topk_decode(msg, n, k(n, ctx), alpha, add, out, scratch, scratch_size,
                      as_stream(stream), invalid);
  }

 private:
  std::size_t k(std::size_t n, const EncodeContext& ctx) const {
    return k_for(density_for(density_, ctx), n);
  }
  double density_;
};

// topk_sampled and threshold: the sparse f32 message with a count the device chooses
// (lbs_cuda.h's SparseSelection); decoded messages are held to the range that selection
// allows (sampled: sampled_min(k) .. min(sampled_max(k), n); threshold: 0 .. n).
class SelectedSparseDeviceCodec final : public DeviceCodec {
 public:
  SelectedSparseDeviceCodec(bool sampled, double density, double threshold)
      : sampled_(sampled), density_(density), threshold_(threshold) {}

  std::size_t capacity(std::size_t n, const EncodeContext& ctx) const override {
    return cuda::topk_capacity(n, cuda::sparse_max_count(n, selection(n, ctx)));
  }
  std::size_t scratch_bytes(std::size_t n, const EncodeContext& ctx) const override {
    return cuda::sparse_selected_scratch_bytes(n, selection(n, ctx));
  }
  void encode(const float* g, float* e, std::size_t n, const EncodeContext& ctx, std::uint8_t* msg,
              void* scratch, std::size_t scratch_size, void* stream) override {
    cuda::topk_encode_selected(e ? g : nullptr, e ? e : const_cast<float*>(g), n, selection(n, ctx),
                               msg, scratch, scratch_size, as_stream(stream));
  }
  void decode(const std::uint8_t* msg, std::size_t n, const EncodeContext& ctx, float alpha,
              bool add, float* out, void* scratch, std::size_t scratch_size, void* stream,
              std::uint32_t* invalid) const override {
    const cuda::SparseSelection sel = selection(n, ctx);
    cuda::topk_decode_counted(msg, n, fewest_kept(n, sel), cuda::sparse_max_count(n, sel), alpha,
                              add, out, scratch, scratch_size, as_stream(stream), invalid);
  }

 private:
  // TopkCompressor::encode's and ThresholdCompressor::encode's selection at ctx.
  cuda::SparseSelection selection(std::size_t n, const EncodeContext& ctx) const {
    if (sampled_) return sampled_selection(density_, n, ctx);
    cuda::SparseSelection sel;
    sel.sampled = false;
    sel.threshold = static_cast<float>(threshold_);
    return sel;
  }
  bool sampled_;
  double density_, threshold_;
};

class BlockQuantDeviceCodec final : public DeviceCodec {
 public:
  explicit BlockQuantDeviceCodec(BlockQuantParams quant) : quant_(quant) {}

  std::size_t capacity(std::size_t n, const EncodeContext&) const override {
    return blockquant_run_bytes(n, quant_);
  }
  // The scale check's verdict word (decode).
  std::size_t scratch_bytes(std::size_t, const EncodeContext&) const override {
    return sizeof(std::uint32_t);
  }
  void encode(const float* g, float* e, std::size_t n, const EncodeContext& ctx,
              std::uint8_t* msg, void*, std::size_t, void* stream) override {
    cuda::BlockCodecArgs args{quant_.bits, quant_.block, quant_.stochastic};
    if (quant_.stochastic) {  // blockquant.cpp's RoundingRng
      args.key = step_key(ctx.seed, ctx.step);
      args.stream = compression_stream(ctx, ctx.rank);
      args.first_position = ctx.offset;
    }
    if (e != nullptr) {
      cuda::blockquant_encode_with_feedback(g, e, n, args, msg, as_stream(stream));
    } else {
      cuda::blockquant_encode_run(g, n, args, msg, as_stream(stream));
    }
  }
  // A received message (invalid given) has its scales checked, as check_message does on the
  // CPU; one's own message is trusted.
  void decode(const std::uint8_t* msg, std::size_t n, const EncodeContext&, float alpha, bool add,
              float* out, void* scratch, std::size_t scratch_size, void* stream,
              std::uint32_t* invalid) const override {
    std::uint32_t* bad = nullptr;
    if (invalid != nullptr) {
      SPARQ_CHECK(scratch != nullptr && scratch_size >= sizeof(std::uint32_t),
                  "blockquant device decode: no scratch for the scale check");
      bad = static_cast<std::uint32_t*>(scratch);
    }
    cuda::blockquant_decode_run(msg, n, quant_.bits, quant_.block, alpha, add, out,
                                as_stream(stream), bad, invalid);
  }

 private:
  BlockQuantParams quant_;
};

}  // namespace

std::unique_ptr<DeviceCodec> make_topk_sampled_device_codec(double density) {
  return std::make_unique<SelectedSparseDeviceCodec>(true, density, 0.0);
}
std::unique_ptr<DeviceCodec> make_threshold_device_codec(double threshold) {
  return std::make_unique<SelectedSparseDeviceCodec>(false, 0.0, threshold);
}
std::unique_ptr<DeviceCodec> make_lbs_device_codec(double density, const BlockQuantParams& quant,
                                                   bool sampled) {
  return std::make_unique<LbsDeviceCodec>(density, quant, sampled);
}
std::unique_ptr<DeviceCodec> make_blockquant_device_codec(const BlockQuantParams& quant) {
  return std::make_unique<BlockQuantDeviceCodec>(quant);
}
std::unique_ptr<DeviceCodec> make_topk_device_codec(double density) {
  return std::make_unique<TopkDeviceCodec>(density);
}

#else

std::unique_ptr<DeviceCodec> make_lbs_device_codec(double, const BlockQuantParams&, bool) {
  return nullptr;
}
std::unique_ptr<DeviceCodec> make_blockquant_device_codec(const BlockQuantParams&) {
  return nullptr;
}
std::unique_ptr<DeviceCodec> make_topk_device_codec(double) { return nullptr; }
std::unique_ptr<DeviceCodec> make_topk_sampled_device_codec(double) { return nullptr; }
std::unique_ptr<DeviceCodec> make_threshold_device_codec(double) { return nullptr; }
std::unique_ptr<DeviceCodec> make_dense_cast_device_codec(bool) { return nullptr; }
std::unique_ptr<DeviceCodec> make_randomk_device_codec(double) { return nullptr; }
std::unique_ptr<DeviceCodec> make_qsgd_device_codec(int, int, std::size_t) { return nullptr; }
std::unique_ptr<DeviceCodec> make_terngrad_device_codec(double) { return nullptr; }
std::unique_ptr<DeviceCodec> make_sign_device_codec(bool) { return nullptr; }
std::unique_ptr<DeviceCodec> make_dgc_device_codec(const DgcCompressor::Options&) {
  return nullptr;
}

#endif

}  // namespace sparq::compress
