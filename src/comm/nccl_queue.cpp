#include "comm/nccl_queue.h"

#if SPARQ_HAS_NCCL
#include "comm/nccl_communicator.h"
#include "comm/stream_engine.h"
#include "core/cuda/device_resources.h"
#endif

namespace sparq::comm {

#if SPARQ_HAS_NCCL
bool nccl_queue_built() { return true; }
#else
bool nccl_queue_built() { return false; }
#endif

#if SPARQ_HAS_NCCL
namespace {

// Owns the NCCL communicator and the engine that uses it (declared in that order, so the
// engine, which drains its tasks on destruction, goes first).
class NcclQueue final : public CommQueue {
 public:
  NcclQueue(std::unique_ptr<NcclCommunicator> comm, StreamCommEngine::Options options)
      : comm_(std::move(comm)), engine_(*comm_, std::move(options)) {}

  using CommQueue::submit;
  CommHandle submit(std::string name, std::int64_t step, Task task) override {
    return engine_.submit(std::move(name), step, std::move(task));
  }
  Status wait(const CommHandle& handle) override { return engine_.wait(handle); }
  Status wait_all() override { return engine_.wait_all(); }
  Mark mark_producer() override { return engine_.mark_producer(); }
  bool gate(const CommHandle& handle, void* consumer) override {
    return engine_.gate(handle, consumer);
  }
  std::size_t in_flight() const override { return engine_.in_flight(); }
  Communicator& communicator() const override { return *comm_; }
  const std::string& queue_name() const override { return engine_.queue_name(); }

 private:
  std::unique_ptr<NcclCommunicator> comm_;
  StreamCommEngine engine_;
};

}  // namespace

Result<std::unique_ptr<CommQueue>> make_nccl_queue(Communicator& bootstrap,
                                                   const ExecContext& context,
                                                   NcclQueueOptions options) {
  if (!context.is_cuda()) {
    return Status::error("make_nccl_queue: the execution context is {}, not a CUDA device",
                         context.describe());
  }
  const NcclOptions nccl_options{
      .device = context.ordinal(), .timeout_s = options.timeout_s, .emulate = options.emulate};
  SPARQ_ASSIGN_OR_RETURN(std::unique_ptr<NcclCommunicator> nccl,
                         make_nccl_communicator(bootstrap, nccl_options));
  StreamCommEngine::Options engine_options{.timeout_s = options.timeout_s,
                                           .name = "nccl buckets",
                                           .trace = options.trace,
                                           .producer = context.cuda().stream.get()};
  return std::unique_ptr<CommQueue>(new NcclQueue(std::move(nccl), std::move(engine_options)));
}

#else

Result<std::unique_ptr<CommQueue>> make_nccl_queue(Communicator&, const ExecContext&,
                                                   NcclQueueOptions) {
  return Status::error("the GPU bucket queue needs NCCL, and this sparq was built without it");
}

#endif

}  // namespace sparq::comm
