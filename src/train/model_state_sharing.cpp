// Trainer::share_model_state (trainer.h).
#include <fmt/format.h>

#include <vector>

#include "core/tensor_copy.h"
#include "train/trainer.h"

namespace sparq::train {

// Note [Model state follows rank 0]
// BatchNorm's running statistics are updated by every rank from its own batches, so the
// replicas' statistics drift apart while their parameters stay identical (review,
// 2026-12-06: 0.019 apart after 4 steps of vgg-tiny), and an evaluation summed each rank's
// scores under its own statistics: the score of no single model. As PyTorch DDP, which
// broadcasts a module's buffers from rank 0, rank 0's statistics are the model's: they are
// broadcast before every evaluation and every checkpoint, so that what is evaluated, what
// every rank saves and what rank 0 exports is one model. Training never reads them (train
// mode normalises with the batch's statistics), and rank 0's own never change by the
// broadcast, so when it happens changes neither the parameters nor rank 0's history: an
// interrupted and resumed run evaluates and saves what the uninterrupted one does.
Status Trainer::share_model_state(const std::string& what) {
  const std::vector<StateTensor> state = model_->state();
  if (comm_.size() == 1 || state.empty()) return Status::ok();
  return run_control("model state broadcast (" + what + ")", [&](comm::Communicator& c) {
    std::vector<char> staging;
    for (const StateTensor& s : state) {
      const auto n = static_cast<std::size_t>(s.tensor.numel());
      if (s.tensor.device() == c.device()) {
        c.broadcast(s.tensor.raw(), n, s.tensor.dtype(), 0);
        continue;
      }
      // A communicator on the other side (a CUDA model on MPI): through the host.
      staging.resize(s.tensor.nbytes());
      copy_to_host(s.tensor, staging.data());
      c.broadcast(staging.data(), n, s.tensor.dtype(), 0);
      copy_from_host(staging.data(), s.tensor);
    }
    return Status::ok();
  });
}

}  // namespace sparq::train
