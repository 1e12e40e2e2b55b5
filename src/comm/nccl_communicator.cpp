#include "comm/nccl_communicator.h"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <thread>
#include <utility>
#include <vector>

#include "comm/arg_checks.h"
#include "comm/byte_model.h"
#include "comm/nccl_check.h"
#include "core/buffer.h"
#include "core/check.h"
#include "core/cuda/cuda_check.h"
#include "core/cuda/stream_delay.h"
#include "core/log.h"

namespace sparq::comm {
namespace {

ncclDataType_t nccl_reduce_type(DType dtype, const char* op) {
  switch (dtype) {
    case DType::kF32:
      return ncclFloat32;
    case DType::kF16:
      return ncclFloat16;
    case DType::kBF16:
      return ncclBfloat16;
    case DType::kI32:
      return ncclInt32;
    case DType::kI64:
      return ncclInt64;
    case DType::kU8:
      return ncclUint8;
    case DType::kU16:
      break;
  }
  SPARQ_FATAL("{}: NCCL cannot reduce {} (it has no 16-bit integer type)", op, dtype_name(dtype));
}

ncclRedOp_t nccl_op(ReduceOp op) { return op == ReduceOp::kAvg ? ncclAvg : ncclSum; }

bool overlaps(const void* a, std::size_t an, const void* b, std::size_t bn) {
  const auto pa = reinterpret_cast<std::uintptr_t>(a), pb = reinterpret_cast<std::uintptr_t>(b);
  return an > 0 && bn > 0 && pa < pb + bn && pb < pa + an;
}

const char* cbytes(const void* p, std::size_t offset) {
  return static_cast<const char*>(p) + offset;
}
char* bytes_at(void* p, std::size_t offset) { return static_cast<char*>(p) + offset; }

}  // namespace

void nccl_call_failed(const char* call, ncclResult_t result, const char* file, int line) {
  fatal_error(file, line,
              std::string("NCCL call failed: ") + call + ": " + ncclGetErrorString(result));
}

NcclCommHandle::~NcclCommHandle() { release(); }
NcclCommHandle::NcclCommHandle(NcclCommHandle&& o) noexcept
    : comm_(std::exchange(o.comm_, nullptr)) {}
NcclCommHandle& NcclCommHandle::operator=(NcclCommHandle&& o) noexcept {
  if (this != &o) {
    release();
    comm_ = std::exchange(o.comm_, nullptr);
  }
  return *this;
}
void NcclCommHandle::release() {
  if (comm_ == nullptr) return;
  // Finalise flushes outstanding work; a communicator in an error state, or one whose
  // finalise does not complete within the bound (a peer gone), is aborted instead.
  constexpr double kFinalizeBoundSeconds = 60;
  ncclResult_t state = ncclSuccess;
  ncclCommGetAsyncError(comm_, &state);
  if (state == ncclSuccess) {
    // The communicator is non-blocking, so finalise normally answers ncclInProgress and
    // completes in the background: poll its state until it is ncclSuccess.
    const ncclResult_t finalize = ncclCommFinalize(comm_);
    if (finalize != ncclSuccess && finalize != ncclInProgress) state = finalize;
  }
  const auto start = std::chrono::steady_clock::now();
  while (state == ncclSuccess || state == ncclInProgress) {
    ncclCommGetAsyncError(comm_, &state);
    if (state == ncclSuccess) break;
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() >
        kFinalizeBoundSeconds) {
      state = ncclInternalError;
      break;
    }
    std::this_thread::yield();
  }
  if (state == ncclSuccess) {
    ncclCommDestroy(comm_);
  } else {
    ncclCommAbort(comm_);
  }
  comm_ = nullptr;
}
void NcclCommHandle::abort() {
  if (comm_ != nullptr) ncclCommAbort(std::exchange(comm_, nullptr));
}

NcclCommunicator::NcclCommunicator(NcclCommHandle comm, cuda::Stream stream, int rank, int size,
                                   int device, double timeout_s, EmulatedLink emulate)
    : comm_(std::move(comm)),
      stream_(std::move(stream)),
      rank_(rank),
      size_(size),
      device_(device),
      timeout_s_(timeout_s),
      emulate_(emulate),
      priced_size_(emulate.ranks > 0 ? emulate.ranks : size) {
  SPARQ_CHECK(emulate.ranks <= 0 || size == 1,
              "NcclCommunicator: an emulated world (emulate.ranks = {}) needs a one-rank "
              "communicator, not {} ranks",
              emulate.ranks, size);
}

std::vector<std::size_t> NcclCommunicator::priced_counts(
    std::span<const std::size_t> counts) const {
  if (priced_size_ == size_) return {counts.begin(), counts.end()};
  return std::vector<std::size_t>(priced_size_, counts[rank_]);
}

void NcclCommunicator::fail(const std::string& message) {
  comm_.abort();
  SPARQ_FATAL("NCCL rank {} of {} (device {}): {}", rank_, size_, device_, message);
}

void NcclCommunicator::settle(const char* what) {
  const auto start = std::chrono::steady_clock::now();
  for (;;) {
    ncclResult_t state = ncclSuccess;
    NCCL_CHECK(ncclCommGetAsyncError(comm_.get(), &state));
    if (state == ncclSuccess) return;
    if (state != ncclInProgress) fail(std::string(what) + ": " + ncclGetErrorString(state));
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() >
        timeout_s_) {
      fail(fmt::format("{} still in progress after {} s; communicator aborted", what, timeout_s_));
    }
    std::this_thread::yield();
  }
}

void NcclCommunicator::wait_event(cudaEvent_t event, const std::string& what, double timeout_s) {
  const auto start = std::chrono::steady_clock::now();
  for (;;) {
    const cudaError_t query = cudaEventQuery(event);
    if (query == cudaSuccess) return;
    if (query != cudaErrorNotReady) CUDA_CHECK(query);
    ncclResult_t state = ncclSuccess;
    NCCL_CHECK(ncclCommGetAsyncError(comm_.get(), &state));
    if (state != ncclSuccess && state != ncclInProgress) {
      fail(what + ": asynchronous NCCL error: " + ncclGetErrorString(state));
    }
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() >
        timeout_s) {
      fail(fmt::format("{} did not complete within {} s; communicator aborted", what, timeout_s));
    }
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

void NcclCommunicator::drain(const std::string& what) {
  done_.record(stream_.get());
  wait_event(done_.get(), what, timeout_s_);
}

void NcclCommunicator::finish(const char* op, WireBytes wire) {
  settle(op);  // the call is on the stream now (a non-blocking call may still be queuing it)
  if (emulate_.enabled()) cuda::enqueue_stream_delay(emulate_.call_us(wire), stream_.get());
  if (synchronous_) {
    done_.record(stream_.get());
    wait_event(done_.get(), op, timeout_s_);
  }
  count(wire.sent, wire.received);
}

const void* NcclCommunicator::stage(const void* in, std::size_t bytes) {
  if (staging_.size() < bytes) {
    drain("growing the staging buffer");  // the old scratch may still be in use
    staging_ = Buffer::device(bytes);
  }
  CUDA_CHECK(cudaMemcpyAsync(staging_.data(), in, bytes, cudaMemcpyDeviceToDevice, stream_.get()));
  return staging_.data();
}

void NcclCommunicator::allreduce(const void* in, void* out, std::size_t count, DType dtype,
                                 ReduceOp op) {
  check_reduce("allreduce", dtype, op);
  const std::size_t bytes = count * dtype_size(dtype);
  // The buffer checks every backend makes (arg_checks.h); NCCL's own refusal of a null
  // buffer named neither the call nor the buffer (review, 2026-12-06).
  check_buffer("allreduce", "input", in, bytes);
  check_buffer("allreduce", "output", out, bytes);
  if (in != out && overlaps(in, bytes, out, bytes)) in = stage(in, bytes);
  NCCL_CHECK(ncclAllReduce(in, out, count, nccl_reduce_type(dtype, "allreduce"), nccl_op(op),
                           comm_.get(), stream_.get()));
  finish("allreduce", ring_allreduce_bytes(count, dtype_size(dtype), rank_, priced_size_));
}

void NcclCommunicator::allgather(const void* in, void* out, std::size_t count, DType dtype) {
  const std::size_t bytes = count * dtype_size(dtype);
  check_buffer("allgather", "input", in, bytes);
  check_buffer("allgather", "output", out, bytes * size_);
  const bool in_place = in == cbytes(out, rank_ * bytes);
  if (!in_place && overlaps(in, bytes, out, bytes * size_)) in = stage(in, bytes);
  NCCL_CHECK(ncclAllGather(in, out, bytes, ncclUint8, comm_.get(), stream_.get()));
  const std::vector<std::size_t> counts(priced_size_, count);
  finish("allgather", ring_allgatherv_bytes(counts, dtype_size(dtype), rank_));
}

void NcclCommunicator::allgatherv(const void* in, void* out, std::span<const std::size_t> counts,
                                  std::span<const std::size_t> displs, DType dtype) {
  check_per_rank("allgatherv", "counts", counts, size_);
  std::vector<std::size_t> packed;
  if (displs.empty()) displs = packed = packed_displs(counts);
  check_per_rank("allgatherv", "displs", displs, size_);
  const std::size_t es = dtype_size(dtype), bytes = counts[rank_] * es;
  const std::size_t out_bytes = extent(counts, displs) * es;
  check_buffer("allgatherv", "input", in, bytes);
  check_buffer("allgatherv", "output", out, out_bytes);
  void* own = bytes_at(out, displs[rank_] * es);
  // An input overlapping the output but not its own slot is staged, as the header promises
  // (it went straight into an overlapping cudaMemcpyAsync: review, 2026-12-06).
  if (in != own && overlaps(in, bytes, out, out_bytes)) in = stage(in, bytes);
  if (in != own && counts[rank_] > 0) {
    CUDA_CHECK(
        cudaMemcpyAsync(own, in, counts[rank_] * es, cudaMemcpyDeviceToDevice, stream_.get()));
  }
  // Each rank broadcasts its block in place from its slot of the output.
  NCCL_CHECK(ncclGroupStart());
  for (int r = 0; r < size_; ++r) {
    void* slot = bytes_at(out, displs[r] * es);
    NCCL_CHECK(ncclBroadcast(slot, slot, counts[r] * es, ncclUint8, r, comm_.get(), stream_.get()));
  }
  NCCL_CHECK(ncclGroupEnd());
  finish("allgatherv", ring_allgatherv_bytes(priced_counts(counts), es, rank_));
}

void NcclCommunicator::reduce_scatter(const void* in, void* out,
                                      std::span<const std::size_t> counts, DType dtype,
                                      ReduceOp op) {
  check_per_rank("reduce_scatter", "counts", counts, size_);
  check_reduce("reduce_scatter", dtype, op);
  const std::size_t es = dtype_size(dtype), total = total_count(counts);
  check_buffer("reduce_scatter", "input", in, total * es);
  check_buffer("reduce_scatter", "output", out, counts[rank_] * es);
  const auto offsets = packed_displs(counts);
  const bool in_place = out == cbytes(in, offsets[rank_] * es);
  if (!in_place && overlaps(in, total * es, out, counts[rank_] * es)) in = stage(in, total * es);
  const ncclDataType_t type = nccl_reduce_type(dtype, "reduce_scatter");
  bool even = true;
  for (std::size_t c : counts) even = even && c == counts[0];
  if (even) {
    NCCL_CHECK(
        ncclReduceScatter(in, out, counts[0], type, nccl_op(op), comm_.get(), stream_.get()));
  } else {
    // Uneven blocks: one reduce per owner, grouped so NCCL schedules them together.
    NCCL_CHECK(ncclGroupStart());
    for (int r = 0; r < size_; ++r) {
      NCCL_CHECK(ncclReduce(cbytes(in, offsets[r] * es), out, counts[r], type, nccl_op(op), r,
                            comm_.get(), stream_.get()));
    }
    NCCL_CHECK(ncclGroupEnd());
  }
  finish("reduce_scatter", ring_reduce_scatter_bytes(priced_counts(counts), es, rank_));
}

void NcclCommunicator::alltoall(const void* in, void* out, std::size_t count, DType dtype) {
  const std::vector<std::size_t> counts(size_, count);
  alltoallv(in, counts, {}, out, counts, {}, dtype);
}

void NcclCommunicator::alltoallv(const void* in, std::span<const std::size_t> send_counts,
                                 std::span<const std::size_t> send_displs, void* out,
                                 std::span<const std::size_t> recv_counts,
                                 std::span<const std::size_t> recv_displs, DType dtype) {
  check_per_rank("alltoallv", "send_counts", send_counts, size_);
  check_per_rank("alltoallv", "recv_counts", recv_counts, size_);
  std::vector<std::size_t> ps, pr;
  if (send_displs.empty()) send_displs = ps = packed_displs(send_counts);
  if (recv_displs.empty()) recv_displs = pr = packed_displs(recv_counts);
  const std::size_t es = dtype_size(dtype);
  std::size_t in_end = 0, out_end = 0;
  for (int r = 0; r < size_; ++r) {
    in_end = std::max(in_end, (send_displs[r] + send_counts[r]) * es);
    out_end = std::max(out_end, (recv_displs[r] + recv_counts[r]) * es);
  }
  check_buffer("alltoallv", "input", in, in_end);
  check_buffer("alltoallv", "output", out, out_end);
  // Send/recv pairs cannot run in place: stage any input that overlaps the output.
  if (overlaps(in, in_end, out, out_end)) in = stage(in, in_end);
  SPARQ_CHECK(send_counts[rank_] == recv_counts[rank_],
              "alltoallv: rank {} sends {} elements to itself but expects {}", rank_,
              send_counts[rank_], recv_counts[rank_]);
  // The block to itself first: nothing may be enqueued on a non-blocking communicator's
  // stream between a group's end and the state settling (finish's settle).
  if (send_counts[rank_] > 0) {
    CUDA_CHECK(cudaMemcpyAsync(bytes_at(out, recv_displs[rank_] * es),
                               cbytes(in, send_displs[rank_] * es), send_counts[rank_] * es,
                               cudaMemcpyDeviceToDevice, stream_.get()));
  }
  NCCL_CHECK(ncclGroupStart());
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    NCCL_CHECK(ncclSend(cbytes(in, send_displs[r] * es), send_counts[r] * es, ncclUint8, r,
                        comm_.get(), stream_.get()));
    NCCL_CHECK(ncclRecv(bytes_at(out, recv_displs[r] * es), recv_counts[r] * es, ncclUint8, r,
                        comm_.get(), stream_.get()));
  }
  NCCL_CHECK(ncclGroupEnd());
  finish("alltoallv",
         alltoallv_bytes(priced_counts(send_counts), priced_counts(recv_counts), es, rank_));
}

void NcclCommunicator::broadcast(void* buffer, std::size_t count, DType dtype, int root) {
  check_rank_arg("broadcast", "root", root, size_);
  const std::size_t es = dtype_size(dtype);
  check_buffer("broadcast", "buffer", buffer, count * es);
  NCCL_CHECK(
      ncclBroadcast(buffer, buffer, count * es, ncclUint8, root, comm_.get(), stream_.get()));
  finish("broadcast", chain_broadcast_bytes(count, es, rank_, root, priced_size_));
}

void NcclCommunicator::barrier() {
  if (staging_.size() < 4) {
    // As in stage(): a smaller scratch may still be read by a queued collective, and freeing
    // it would wait on the device without this call's bounded wait.
    if (staging_.size() > 0) drain("growing the staging buffer for a barrier");
    staging_ = Buffer::device(4);
  }
  NCCL_CHECK(ncclAllReduce(staging_.data(), staging_.data(), 1, ncclInt32, ncclSum, comm_.get(),
                           stream_.get()));
  settle("barrier");
  if (emulate_.enabled()) cuda::enqueue_stream_delay(emulate_.call_us({}), stream_.get());
  done_.record(stream_.get());
  wait_event(done_.get(), "barrier", timeout_s_);  // a barrier is synchronous by definition
  count(0, 0);
}

void NcclCommunicator::send(const void* buffer, std::size_t count, DType dtype, int peer, int tag) {
  check_rank_arg("send", "peer", peer, size_);
  check_tag("send", tag);  // NCCL has no tags; the rule is every backend's (arg_checks.h)
  const std::size_t bytes = count * dtype_size(dtype);
  check_buffer("send", "buffer", buffer, bytes);
  NCCL_CHECK(ncclSend(buffer, bytes, ncclUint8, peer, comm_.get(), stream_.get()));
  finish("send", {.sent = bytes});
}

void NcclCommunicator::recv(void* buffer, std::size_t count, DType dtype, int peer, int tag) {
  check_rank_arg("recv", "peer", peer, size_);
  check_tag("recv", tag);
  const std::size_t bytes = count * dtype_size(dtype);
  check_buffer("recv", "buffer", buffer, bytes);
  NCCL_CHECK(ncclRecv(buffer, bytes, ncclUint8, peer, comm_.get(), stream_.get()));
  finish("recv", {.received = bytes});
}

}  // namespace sparq::comm
