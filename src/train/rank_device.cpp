#include "train/rank_device.h"

#include <cstdlib>

namespace sparq::train {
namespace {

// The first of `names` set in the environment, as an integer; false when none is set.
bool env_int(std::initializer_list<const char*> names, int* value, std::string* source) {
  for (const char* name : names) {
    const char* text = std::getenv(name);
    if (text == nullptr || *text == '\0') continue;
    char* end = nullptr;
    const long v = std::strtol(text, &end, 10);
    if (*end != '\0' || v < 0) continue;
    *value = static_cast<int>(v);
    if (source) *source = name;
    return true;
  }
  return false;
}

}  // namespace

Result<LocalRank> local_rank_from_environment(int world_size) {
  LocalRank local;
  if (!env_int({"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"}, &local.rank,
               &local.source)) {
    if (world_size > 1) {
      return Status::error("train.device: cuda with {} ranks needs the launcher's local rank "
                           "(OMPI_COMM_WORLD_LOCAL_RANK, MPI_LOCALRANKID or SLURM_LOCALID), "
                           "and none is set: launch with mpirun or srun",
                           world_size);
    }
    local.source = "single process";
    return local;
  }
  // The node's rank count from the same launcher as the rank: an Open MPI job inside a
  // Slurm allocation has SLURM_NTASKS_PER_NODE of the allocation, not of this job (review).
  const char* size_name = local.source == "OMPI_COMM_WORLD_LOCAL_RANK"
                              ? "OMPI_COMM_WORLD_LOCAL_SIZE"
                          : local.source == "MPI_LOCALRANKID" ? "MPI_LOCALNRANKS"
                                                              : "SLURM_NTASKS_PER_NODE";
  local.size = local.rank + 1;
  env_int({size_name}, &local.size, nullptr);
  return local;
}

Result<int> rank_device_ordinal(const LocalRank& local, int visible, const char* visible_mask) {
  const char* mask = visible_mask ? visible_mask : "unset";
  if (visible == 0) {
    return Status::error(
        "train.device: cuda, but this process sees no GPU "
        "(CUDA_VISIBLE_DEVICES={}); use train.device: cpu",
        mask);
  }
  if (visible >= local.size) return local.rank;
  if (visible == 1) return 0;  // one GPU bound to this process by the launcher
  return Status::error(
      "train.device: cuda needs one GPU per rank, but this node runs {} rank(s) and this "
      "process sees {} GPU(s) (CUDA_VISIBLE_DEVICES={}); let every rank see the node's GPUs "
      "or bind one to each (srun --gpus-per-task=1), start fewer ranks per node, or use "
      "train.device: cpu",
      local.size, visible, mask);
}

Result<std::unique_ptr<ExecContext>> open_rank_device(const LocalRank& local,
                                                      GemmPrecision precision) {
#if !SPARQ_HAS_CUDA
  // Without this, a build without CUDA said "this process sees no GPU" on a GPU host too
  // (new-user review, 2026-12-06).
  (void)local;
  (void)precision;
  return Status::error(
      "train.device: cuda, but this sparq was built without CUDA (sparq_info: 'CUDA: not "
      "built'; the CUDA toolkit was not found when it was configured): rebuild where nvcc is "
      "installed, or use train.device: cpu");
#else
  SPARQ_ASSIGN_OR_RETURN(const int ordinal,
                         rank_device_ordinal(local, ExecContext::cuda_device_count(),
                                             std::getenv("CUDA_VISIBLE_DEVICES")));
  return ExecContext::create_cuda(ordinal, precision);
#endif
}

}  // namespace sparq::train
