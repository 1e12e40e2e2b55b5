// Public API: adding an aggregation strategy, the collective that turns every rank's
// compressed message for a bucket into the same averaged gradient on all ranks
// (docs/embedding.md, "Aggregation strategies").
//
//   class MyAggregator final : public sparq::compress::Aggregator { ... };
//   sparq::Status s = sparq::compress::register_aggregation({
//       .name = "my_strategy",
//       .summary = "one line",
//       .accepts = [](const sparq::compress::Compressor& c) {  // by capabilities, not names
//         return c.capabilities().self_contained ? sparq::Status::ok()
//                                                : sparq::Status::error("{}: ...", c.name());
//       },
//       .factory = [](const sparq::compress::AggregatorOptions&) {
//         return std::unique_ptr<sparq::compress::Aggregator>(new MyAggregator);
//       }});
//
// `compress.aggregation: my_strategy` then selects it. The built-in strategies (allreduce,
// allgather, two_phase, tree, low_rank) are registered through the same function, and accept
// a compressor by its CompressorCapabilities (sparq/compressor.h). A strategy must
// issue the same collectives in the same order on every rank (Note [Rank-identical collective
// order], comm/communicator.h) and leave every rank with identical floats.
//
// Threads: accepts and the factory run on the thread that builds the trainer, run() on its
// communication thread while backward goes on (docs/embedding.md, "Which thread runs extension
// code"). The step simulator (simulate, comm.plan: auto) and the GPU path take built-in
// strategies only.
//
// Stable: register_aggregation, AggregationRegistration, aggregation_names, the Aggregator
// interface, AggregatorOptions, encode_maybe_ef, check_received, and the Communicator
// collectives (comm/communicator.h).
#pragma once

#include "comm/communicator.h"
#include "compress/aggregation.h"
#include "compress/error_feedback.h"
#include "sparq/compressor.h"
