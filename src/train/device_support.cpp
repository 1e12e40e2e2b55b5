// check_device_support (train_config.h): what train.device: cuda cannot run yet, judged on
// the config alone, so the dry run can say it on a machine without a GPU.
#include <utility>

#include "compress/aggregation.h"
#include "compress/device_codec.h"
#include "compress/registry.h"
#include "train/train_config.h"

namespace sparq::train {

Status check_device_support(const TrainConfig& c) {
  // Note [bf16 GEMM operands] (core/cuda/mixed_gemm.h): what bf16 covers, and where.
  if (c.train.precision == "bf16" && c.model.arch == ModelArch::kVgg) {
    return Status::error(
        "{}: train.precision: bf16 covers the GEMM layers of gpt2 and bert; "
        "vgg's convolutions run on cuDNN in fp32 only; use precision fp32",
        c.where());
  }
  if (c.train.device != Device::kCUDA) return Status::ok();
  if (c.compress.compress.compression_off()) return Status::ok();
  // The device compressors count a bucket's elements in 32 bits (CUB's scans and selections):
  // a bucket of 2^31 floats (8 GiB) or more aborted in its first compressed step, where the
  // CPU path compresses it (review, 2026-12-07). A bucket is at most comm.bucket_mb (or
  // first_bucket_mb): a larger tensor is split (comm/bucket_plan.h).
  for (const auto& [key, mb] : {std::pair{"comm.bucket_mb", c.comm.plan.bucket_mb},
                                std::pair{"comm.first_bucket_mb", c.comm.plan.first_bucket_mb}}) {
    if (mb >= 8192) {
      return Status::error(
          "{}: {}: {} MiB is 2^31 floats or more, which the GPU compressors cannot index (they "
          "count in 32 bits); use less than 8192 with train.device: cuda",
          c.where(), key, mb);
    }
  }
  // The GPU compression path so far: compressors with a CUDA twin, by the strategies built
  // on the device for them (compress::device_strategy_built).
  SPARQ_ASSIGN_OR_RETURN(auto compressor, compress::make_compressor(c.compress.compress));
  if (!compressor->capabilities().device_twin) {
    return Status::error(
        "{}: compress.name: {} has no GPU implementation yet; with train.device: cuda use "
        "{}, or train.device: cpu",
        c.where(), c.compress.compress.name, compress::kDeviceCompressorsHint);
  }
  // `auto` is the compressor's own strategy (gtopk's is tree).
  const std::string strategy(c.compress.aggregation == "auto"
                                 ? aggregation_name(compressor->aggregation())
                                 : std::string_view(c.compress.aggregation));
  if (!compress::device_strategy_built(strategy, compressor->capabilities())) {
    // The tree is refused for topk_sampled alone (its lists' length varies): not offered back.
    return Status::error(
        "{}: compress.aggregation: {} is not built on the GPU yet for {} (issue 17); use {} "
        "with train.device: cuda",
        c.where(), strategy, c.compress.compress.name,
        strategy == "tree" ? "allgather or two_phase"
                           : "allgather, two_phase or tree (allreduce for fp16 and bf16, "
                             "low_rank for powersgd)");
  }
  if (c.comm.plan_mode != "fixed") {
    return Status::error(
        "{}: comm.plan: {} with train.device: cuda is not built yet; use "
        "comm.plan: fixed",
        c.where(), c.comm.plan_mode);
  }
  return Status::ok();
}

}  // namespace sparq::train
