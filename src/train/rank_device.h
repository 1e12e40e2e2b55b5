// One GPU per rank (train.device: cuda): which device a rank opens. The launcher tells each
// process its rank among the processes of its node (Open MPI's OMPI_COMM_WORLD_LOCAL_RANK,
// MPICH's MPI_LOCALRANKID, Slurm's SLURM_LOCALID); when every rank sees all the node's GPUs,
// the local rank is the CUDA ordinal, so they are shared out one per rank without any
// configuration. A launcher that binds one GPU to each process (srun --gpus-per-task=1, or
// CUDA_VISIBLE_DEVICES set per rank) leaves each rank one visible device, which it opens.
// Two ranks of a node on one physical GPU are refused before NCCL starts
// (comm/device_identity.h).
#pragma once

#include <memory>
#include <string>

#include "core/exec_context.h"
#include "core/status.h"

namespace sparq::train {

struct LocalRank {
  int rank = 0;        // among the processes of this node
  int size = 1;        // processes on this node
  std::string source;  // the environment variable it came from, or "single process"
};

// The local rank from the launcher's environment. A single-process job is local rank 0 of
// 1; a multi-process job whose launcher sets none of the variables is an error that names
// them (guessing could put two ranks on one GPU).
Result<LocalRank> local_rank_from_environment(int world_size);

// The CUDA ordinal a rank opens among the `visible` devices of its process:
//   * visible >= local.size (every rank sees the node's GPUs): local.rank;
//   * visible == 1 (the launcher bound one GPU to this process): 0;
//   * otherwise an error naming both counts and `visible_mask` (CUDA_VISIBLE_DEVICES, or null).
Result<int> rank_device_ordinal(const LocalRank& local, int visible, const char* visible_mask);

// Opens the rank's GPU (rank_device_ordinal's choice); an error when there is none to open or
// when sparq was built without CUDA. `precision`: how its GEMMs multiply (Note [bf16 GEMM
// operands]).
Result<std::unique_ptr<ExecContext>> open_rank_device(const LocalRank& local,
                                                      GemmPrecision precision);

}  // namespace sparq::train
