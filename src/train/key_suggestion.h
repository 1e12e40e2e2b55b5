// "did you mean ...?" for an unknown config key: the known key a user most likely meant.
#pragma once

#include <string>
#include <vector>

namespace sparq::train {

// The key of `known` (dotted paths, as the reader asked for them) nearest `unknown`, or "":
//   * a key of another framework for a sparq key (train.batch_size -> train.micro_batch,
//     optim.learning_rate -> optim.lr), in the unknown key's own section;
//   * a misspelling: the known key at the smallest edit distance, if at most a third of the
//     key's length (at least 2), so that "optim.lrr" finds optim.lr and nothing far is offered;
//   * a key put in the wrong section: the one known key with the same last part
//     (optimizer.lr -> optim.lr).
std::string nearest_known_key(const std::string& unknown, const std::vector<std::string>& known);

}  // namespace sparq::train
