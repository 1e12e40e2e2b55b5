// The in-code config of the run_training() tests under MPI: the default config's GPT-2 tiny
// on the Markov source, narrowed to a vocabulary of 256 and 64 positions, `steps` steps, one
// evaluation batch, no progress lines.
#pragma once

#include <cstdint>

#include "train/run.h"

namespace sparq::train::testing {

inline TrainConfig small_markov_run(std::int64_t steps) {
  TrainConfig c = default_train_config().value();
  c.model = make_model_config("gpt2-tiny", {{"vocab_size", "256"}, {"n_ctx", "64"}}).value();
  c.data.markov.vocab_size = 256;
  c.train.steps = steps;
  c.train.eval_batches = 1;
  c.log.progress_interval = 0;
  return c;
}

}  // namespace sparq::train::testing
