// check_device_support (train_config.h): what train.device: cuda cannot run yet, judged on
// the config alone, so the dry run can say it on a machine without a GPU.
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
