// The golden checks of golden_test.cpp (CPU) and cuda_golden_test.cpp (GPU), written once
// for any ExecContext: a model of a golden file with its formula weights and stored inputs,
// one forward + backward against the phase's reference values (loss, logits, every parameter
// gradient), and a short plain-SGD loss trajectory. On a CUDA context the weights and inputs
// are uploaded and the results read back on the host; the comparisons are the same.
#pragma once

#include <memory>
#include <string>

#include "core/buffer.h"
#include "core/exec_context.h"
#include "models/golden_io.h"
#include "models/model.h"

namespace sparq::testing {

struct GoldenCase {
  Golden golden;
  std::unique_ptr<Model> model;
  ParamStore store;
  Batch batch;                // on the store's device
  Buffer device_inputs[7];    // CUDA runs: the uploaded batch fields
  double rtol = 1e-4;         // relative bound of every comparison
};

// Builds the model of `file` in `context`, checks its parameters against the reference's
// (names, order, shapes), loads the formula weights and assembles the batch. `spec_suffix`
// adds model keys to the case's spec (" fused_head=0").
void load_golden_case(const std::string& file, const ExecContext& context, GoldenCase* out,
                      const std::string& spec_suffix = "");
// Reloads the formula weights (after a phase or a trajectory changed them).
void reload_formula_weights(GoldenCase& c);
// One forward + backward (plain forward(): the fused head recomputes its pass in backward);
// loss, logits (unless the fused head keeps none) and every gradient.
void check_golden_phase(GoldenCase& c, const std::string& phase, bool training);
// SGD steps as the trainer runs them (forward_for_backward, Note [Eager head gradient]).
void check_golden_trajectory(GoldenCase& c);

}  // namespace sparq::testing
