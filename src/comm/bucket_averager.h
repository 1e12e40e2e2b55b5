// BucketAverager: what the WFBP scheduler (wfbp_scheduler.h) calls to average one complete
// bucket across the ranks. The trainer binds compress::GradientExchange to it directly (error
// feedback, compression, the aggregation strategy, decompression, in place); a program that
// averages without compression can hand it a function.
#pragma once

#include <cstdint>
#include <functional>
#include <utility>

#include "comm/bucket_plan.h"
#include "comm/communicator.h"
#include "core/status.h"

namespace sparq::comm {

// Averages one complete bucket in place across the ranks; called once per bucket and step,
// in launch order, by the queue that runs the bucket's task.
class BucketAverager {
 public:
  virtual ~BucketAverager() = default;
  virtual Status average_bucket(Communicator& comm, const Bucket& bucket, std::int64_t step) = 0;
};

// A BucketAverager made of a function: for tests and for programs that average without
// compression (the trainer binds the GradientExchange itself).
class FunctionAverager final : public BucketAverager {
 public:
  using Fn = std::function<Status(Communicator&, const Bucket&, std::int64_t step)>;
  explicit FunctionAverager(Fn fn) : fn_(std::move(fn)) {}
  Status average_bucket(Communicator& comm, const Bucket& bucket, std::int64_t step) override {
    return fn_(comm, bucket, step);
  }

 private:
  Fn fn_;
};

}  // namespace sparq::comm
