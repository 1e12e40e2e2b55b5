// Gpt2Tokenizer::merge_long: BPE merges of one long piece in O(n log n).
//
// Note [Long pieces]
// encoder.py's bpe() rescans the whole word for its lowest-ranked pair once per round, so a
// piece costs O(n x rounds), up to O(n^2) while the rounds grow with the piece: GPT-2's
// pre-tokenizer keeps a run of letters (or digits, or symbols) whole, and prepare_data took
// 9.5 s on a 200,000-letter run without a space and 175 s on a 2,000,000-letter one (review,
// 2026-12-07; 0.14 s and 0.61 s now). Here the word is a linked list and its
// adjacent pairs sit in a heap ordered by (rank, position). Each round pops every entry of
// the lowest rank and merges those still valid left to right, which is encoder.py's round
// (every occurrence of the best pair, left to right, non-overlapping) exactly; the pairs a
// merge creates wait for the next round, whatever their rank, as encoder.py's rescan would
// find them only then. So the result equals merge_rounds' for any merges table, not only for
// one whose ranks grow with the tokens they use (tests/data/gpt2_tokenizer_test.cpp).
#include <algorithm>
#include <functional>
#include <limits>
#include <queue>
#include <vector>

#include "data/gpt2_tokenizer.h"

namespace sparq::data {
namespace {

// A candidate merge of the node at `left` with its successor, valid while both still hold
// the ids they had when it was pushed.
struct PairEntry {
  std::uint32_t rank;
  std::uint32_t left;
  std::uint32_t left_id;
  std::uint32_t right_id;
  // std::priority_queue keeps the largest on top: "greater" here is "later".
  bool operator>(const PairEntry& o) const {
    return rank != o.rank ? rank > o.rank : left > o.left;
  }
};

constexpr std::uint32_t kNone = std::numeric_limits<std::uint32_t>::max();

}  // namespace

void Gpt2Tokenizer::merge_long(std::string_view piece, std::vector<std::uint32_t>* word) const {
  const auto n = static_cast<std::uint32_t>(piece.size());
  std::vector<std::uint32_t> id(n), next(n), prev(n);
  std::vector<bool> alive(n, true);
  for (std::uint32_t i = 0; i < n; ++i) {
    id[i] = byte_ids_[static_cast<std::uint8_t>(piece[i])];
    next[i] = i + 1 < n ? i + 1 : kNone;
    prev[i] = i > 0 ? i - 1 : kNone;
  }
  std::priority_queue<PairEntry, std::vector<PairEntry>, std::greater<>> heap;
  const auto push = [&](std::uint32_t left) {
    if (left == kNone || next[left] == kNone) return;
    const auto it = merges_.find((static_cast<std::uint64_t>(id[left]) << 32) | id[next[left]]);
    if (it != merges_.end()) heap.push({it->second.rank, left, id[left], id[next[left]]});
  };
  for (std::uint32_t i = 0; i + 1 < n; ++i) push(i);

  std::vector<PairEntry> round;
  std::vector<std::uint32_t> merged_at;
  while (!heap.empty()) {
    const std::uint32_t rank = heap.top().rank;
    round.clear();
    while (!heap.empty() && heap.top().rank == rank) {  // left to right: the heap's order
      round.push_back(heap.top());
      heap.pop();
    }
    const std::uint32_t merged =
        merges_.find((static_cast<std::uint64_t>(round[0].left_id) << 32) | round[0].right_id)
            ->second.merged;
    merged_at.clear();
    for (std::size_t k = 0; k < round.size(); ++k) {
      const PairEntry& e = round[k];
      // A node next to two merges was pushed twice; one merge of it per round.
      if (k > 0 && round[k - 1].left == e.left) continue;
      const std::uint32_t right = alive[e.left] ? next[e.left] : kNone;
      if (right == kNone || id[e.left] != e.left_id || id[right] != e.right_id) continue;
      id[e.left] = merged;
      alive[right] = false;
      next[e.left] = next[right];
      if (next[right] != kNone) prev[next[right]] = e.left;
      merged_at.push_back(e.left);
    }
    // The pairs the round made, for the rounds after it (Note [Long pieces]).
    for (const std::uint32_t at : merged_at) {
      if (!alive[at]) continue;
      push(prev[at]);
      push(at);
    }
  }
  word->clear();
  for (std::uint32_t i = 0; i != kNone; i = next[i]) word->push_back(id[i]);
}

}  // namespace sparq::data
