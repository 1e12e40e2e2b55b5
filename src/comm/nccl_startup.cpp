// make_nccl_communicator (nccl_communicator.h): picks this rank's device, refuses a world
// where a rank lacks one or two ranks share one, and initialises NCCL over the bootstrap
// communicator, every failure agreed before any rank enters NCCL's init alone.
#include <cuda_runtime.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "comm/device_identity.h"
#include "comm/nccl_check.h"
#include "comm/nccl_communicator.h"
#include "core/buffer.h"
#include "core/check.h"
#include "core/cuda/cuda_check.h"
#include "core/cuda/cuda_handles.h"
#include "core/log.h"

namespace sparq::comm {
namespace {

// ncclCommInitRankConfig in non-blocking mode, polled until it settles or `timeout_s` passes;
// the error names NCCL's result and its last message (NCCL_DEBUG=WARN says more).
Status start_nccl(ncclComm_t* comm, int size, const ncclUniqueId& id, int rank, ncclConfig_t config,
                  double timeout_s) {
  const auto failure = [&](ncclResult_t result, const std::string& what) {
    return Status::error("make_nccl_communicator: {}: {}{}{}", what, ncclGetErrorString(result),
                         *ncclGetLastError(*comm) ? ": " : "", ncclGetLastError(*comm));
  };
  const ncclResult_t init = ncclCommInitRankConfig(comm, size, id, rank, &config);
  if (init != ncclSuccess && init != ncclInProgress) {
    return failure(init, "ncclCommInitRankConfig");
  }
  const auto start = std::chrono::steady_clock::now();
  for (;;) {
    ncclResult_t state = ncclSuccess;
    const ncclResult_t query = ncclCommGetAsyncError(*comm, &state);
    if (query != ncclSuccess) return failure(query, "ncclCommGetAsyncError after the init");
    if (state == ncclSuccess) return Status::ok();
    if (state != ncclInProgress) return failure(state, "ncclCommInitRankConfig");
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() >
        timeout_s) {
      return Status::error(
          "make_nccl_communicator: ncclCommInitRankConfig still in progress "
          "after {} s (comm.timeout_s)",
          timeout_s);
    }
    std::this_thread::yield();
  }
}

}  // namespace

Result<std::unique_ptr<NcclCommunicator>> make_nccl_communicator(Communicator& bootstrap,
                                                                 NcclOptions options) {
  if (bootstrap.device() != Device::kCPU) {
    return Status::error(
        "make_nccl_communicator: the bootstrap communicator ('{}') must use "
        "host buffers",
        bootstrap.backend());
  }
  const int rank = bootstrap.rank(), size = bootstrap.size();
  if (options.emulate.ranks > 0 && size > 1) {
    return Status::error(
        "make_nccl_communicator: an emulated world of {} ranks stands in for a "
        "cluster on ONE GPU; this world has {} ranks of its own",
        options.emulate.ranks, size);
  }
  const int devices = cuda_available() ? cuda::device_count() : 0;
  // Local rank on this host, from everyone's host-name hash.
  const std::int64_t host = static_cast<std::int64_t>(std::hash<std::string>{}(log::host_name()));
  std::vector<std::int64_t> hosts(size);
  bootstrap.allgather(&host, hosts.data(), 1, DType::kI64);
  int local_rank = 0;
  for (int r = 0; r < rank; ++r) local_rank += hosts[r] == host ? 1 : 0;
  const int device = options.device >= 0 ? options.device : local_rank;
  // Agree on failure so that no rank enters NCCL init alone.
  std::int32_t bad = device < devices ? 0 : 1, any_bad = 0;
  bootstrap.allreduce(&bad, &any_bad, 1, DType::kI32, ReduceOp::kSum);
  if (any_bad != 0) {
    return Status::error(
        "make_nccl_communicator: {} rank(s) lack a CUDA device (rank {} wants "
        "device {} on {}, which has {} visible); NCCL needs one device per rank",
        any_bad, rank, device, log::host_name(), devices);
  }
  CUDA_CHECK(cudaSetDevice(device));
  // Two ranks of this host on one physical GPU: refused here, by all ranks alike
  // (comm/device_identity.h).
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  DeviceIdentity mine;
  mine.host = host;
  std::memcpy(&mine.uuid_high, prop.uuid.bytes, 8);
  std::memcpy(&mine.uuid_low, prop.uuid.bytes + 8, 8);
  std::vector<DeviceIdentity> identities(size);
  static_assert(sizeof(DeviceIdentity) == 3 * sizeof(std::int64_t));
  bootstrap.allgather(&mine, identities.data(), 3, DType::kI64);
  if (const auto shared = first_shared_device(identities)) {
    return Status::error(
        "make_nccl_communicator: ranks {} and {} on one host opened the same GPU (this rank: "
        "device {} of {} visible, CUDA_VISIBLE_DEVICES={}); NCCL needs one GPU per rank: bind "
        "a different GPU to each rank or let every rank see all of the host's GPUs",
        shared->first, shared->second, device, devices,
        std::getenv("CUDA_VISIBLE_DEVICES") ? std::getenv("CUDA_VISIBLE_DEVICES") : "unset");
  }
  // NCCL's start is the step most likely to fail on a new machine (its topology probe, shared
  // memory, a sandbox): a failure is returned, agreed by every rank, rather than ending the
  // job, so that the caller can say what to do (a one-rank trainer falls back to the thread
  // queue) and NCCL's reason reaches the log (review, 2026-12-07: it aborted the process).
  ncclUniqueId id{};
  std::int32_t id_failed = 0, any_id_failed = 0;
  ncclResult_t id_result = ncclSuccess;
  if (rank == 0) {
    id_result = ncclGetUniqueId(&id);
    id_failed = id_result == ncclSuccess ? 0 : 1;
  }
  bootstrap.allreduce(&id_failed, &any_id_failed, 1, DType::kI32, ReduceOp::kSum);
  if (any_id_failed != 0) {
    return Status::error("make_nccl_communicator: ncclGetUniqueId failed on rank 0{}",
                         rank == 0 ? std::string(": ") + ncclGetErrorString(id_result) : "");
  }
  bootstrap.broadcast(&id, sizeof(id), DType::kU8, 0);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // so that init and every call can be polled, timed out and aborted
  ncclComm_t raw = nullptr;
  const Status started = start_nccl(&raw, size, id, rank, config, options.timeout_s);
  NcclCommHandle handle(raw);
  std::int32_t failed = started.is_ok() ? 0 : 1, any_failed = 0;
  bootstrap.allreduce(&failed, &any_failed, 1, DType::kI32, ReduceOp::kSum);
  if (any_failed != 0) {
    handle.abort();
    if (!started.is_ok()) return started;
    return Status::error("make_nccl_communicator: NCCL's start failed on {} other rank(s)",
                         any_failed);
  }
  return std::make_unique<NcclCommunicator>(std::move(handle), cuda::Stream(), rank, size, device,
                                            options.timeout_s, options.emulate);
}

}  // namespace sparq::comm
