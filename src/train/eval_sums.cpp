#include "train/eval_sums.h"

#include <bit>
#include <vector>

namespace sparq::train {

void EvalSums::add_batch(double mean_loss, std::int64_t targets, std::int64_t right) {
  loss += mean_loss * static_cast<double>(targets);
  count += targets;
  correct += right;
}

EvalSums world_eval_sums(comm::Communicator& comm, const EvalSums& mine) {
  // The doubles travel as their bits in int64 words: one allgather, no f64 type needed.
  constexpr std::size_t kWords = 4;
  const std::int64_t words[kWords] = {std::bit_cast<std::int64_t>(mine.loss), mine.count,
                                      mine.correct, std::bit_cast<std::int64_t>(mine.source_loss)};
  std::vector<std::int64_t> all(kWords * static_cast<std::size_t>(comm.size()));
  comm.allgather(words, all.data(), kWords, DType::kI64);
  EvalSums total;
  for (std::size_t r = 0; r < static_cast<std::size_t>(comm.size()); ++r) {
    const std::int64_t* w = all.data() + kWords * r;
    total.loss += std::bit_cast<double>(w[0]);
    total.count += w[1];
    total.correct += w[2];
    total.source_loss += std::bit_cast<double>(w[3]);
  }
  return total;
}

}  // namespace sparq::train
