// nearest_known_key (key_suggestion.h).
#include "train/key_suggestion.h"

#include <algorithm>
#include <string_view>
#include <utility>

namespace sparq::train {
namespace {

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::pair<std::string_view, std::string_view> split_last(std::string_view key) {
  const std::size_t dot = key.rfind('.');
  if (dot == std::string_view::npos) return {std::string_view(), key};
  return {key.substr(0, dot), key.substr(dot + 1)};
}

// Other frameworks' names for sparq's keys (PyTorch, DeepSpeed, llm.c, HF Trainer).
constexpr std::pair<std::string_view, std::string_view> kOtherNames[] = {
    {"batch_size", "micro_batch"},
    {"micro_batch_size", "micro_batch"},
    {"train_batch_size", "micro_batch"},
    {"learning_rate", "lr"},
    {"max_steps", "steps"},
    {"num_steps", "steps"},
    {"iterations", "steps"},
    {"grad_accum", "accumulation"},
    {"gradient_accumulation_steps", "accumulation"},
    {"max_grad_norm", "clip_norm"},
    {"grad_clip", "clip_norm"},
    {"warmup", "warmup_steps"},
    {"compressor", "name"},
    {"block_size", "seq_len"},
};

}  // namespace

std::string nearest_known_key(const std::string& unknown, const std::vector<std::string>& known) {
  const auto [section, last] = split_last(unknown);
  const auto is_known = [&](const std::string& key) {
    return std::find(known.begin(), known.end(), key) != known.end();
  };
  for (const auto& [other, ours] : kOtherNames) {
    if (last != other) continue;
    const std::string key =
        section.empty() ? std::string(ours) : std::string(section) + "." + std::string(ours);
    if (is_known(key)) return key;
  }
  std::string best;
  std::size_t best_distance = std::max<std::size_t>(2, unknown.size() / 3) + 1;
  std::string same_last;
  int same_last_count = 0;
  for (const std::string& key : known) {
    if (key.empty() || key.back() == '.') continue;  // a free-form section's prefix
    const std::size_t d = edit_distance(unknown, key);
    if (d < best_distance) {
      best_distance = d;
      best = key;
    }
    if (split_last(key).second == last) {
      same_last = key;
      ++same_last_count;
    }
  }
  if (!best.empty()) return best;
  return same_last_count == 1 ? same_last : std::string();
}

}  // namespace sparq::train
