// RowSparseGrad: the gradient of an embedding lookup kept as the rows it touches, for the
// tied embedding split (Note [Tied embedding split], models/model.h). A lookup of n ids
// touches at most n of the table's rows, so its gradient is sent as those rows, exactly,
// instead of as part of a dense [num, dim] table.
//
//   rows    the distinct ids of the batch, ascending
//   values  [rows.size(), dim]: values[k] is the sum of dy over the positions whose id is
//           rows[k], added in position order (the order the dense scatter-add uses)
//
// Host memory; sized for the largest batch seen, reused after.
#pragma once

#include <cstdint>
#include <vector>

namespace sparq {

struct RowSparseGrad {
  std::int64_t dim = 0;
  std::vector<std::int32_t> rows;
  std::vector<float> values;
  // Scratch of the gather: slot of each table row in `rows`, -1 when absent (num entries,
  // all -1 between calls).
  std::vector<std::int32_t> slot_of;

  std::size_t count() const { return rows.size(); }
  void clear() {
    rows.clear();
    values.clear();
  }
};

}  // namespace sparq
