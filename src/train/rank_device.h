// One GPU per rank (train.device: cuda): which device a rank opens. The launcher tells each
// process its rank among the processes of its node (Open MPI's OMPI_COMM_WORLD_LOCAL_RANK,
// MPICH's MPI_LOCALRANKID, Slurm's SLURM_LOCALID); the local rank is the CUDA ordinal, so
// the GPUs of a node are shared out one per rank without any configuration.
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

// Opens the rank's GPU: an error when the node has fewer visible GPUs than local ranks
// (naming both counts and CUDA_VISIBLE_DEVICES) or when sparq was built without CUDA.
// `precision`: how its GEMMs multiply (Note [bf16 GEMM operands]).
Result<std::unique_ptr<ExecContext>> open_rank_device(const LocalRank& local,
                                                      GemmPrecision precision);

}  // namespace sparq::train
