#include "comm/sparse_rows.h"

#include "comm/gather.h"
#include "core/check.h"

namespace sparq::comm {

void SparseRowExchange::add_average(Communicator& comm, std::span<const std::int32_t> rows,
                                    std::span<const float> values, std::int64_t dim,
                                    float* table_grad, std::int64_t num_rows) {
  SPARQ_CHECK(dim > 0 && values.size() == rows.size() * static_cast<std::size_t>(dim),
              "sparse rows: {} values for {} rows of width {}", values.size(), rows.size(), dim);
  const auto p = static_cast<std::size_t>(comm.size());
  const std::int64_t mine = static_cast<std::int64_t>(rows.size());
  counts_.assign(p, 0);
  comm.allgather(&mine, counts_.data(), 1, DType::kI64);
  row_counts_.resize(p);
  value_counts_.resize(p);
  std::size_t total = 0;
  for (std::size_t r = 0; r < p; ++r) {
    // A rank sends each of its rows once (sparse_rows.h), so at most the table's rows.
    row_counts_[r] = checked_peer_size(counts_[r], static_cast<std::size_t>(num_rows),
                                       static_cast<int>(r), "its sparse row count");
    value_counts_[r] = row_counts_[r] * static_cast<std::size_t>(dim);
    total += row_counts_[r];
  }
  all_rows_.resize(total);
  all_values_.resize(total * static_cast<std::size_t>(dim));
  comm.allgatherv(rows.data(), all_rows_.data(), row_counts_, {}, DType::kI32);
  comm.allgatherv(values.data(), all_values_.data(), value_counts_, {}, DType::kF32);
  last_rows_ = total;
  last_payload_bytes_ = sizeof(mine) + rows.size_bytes() + values.size_bytes();

  const float scale = 1.0f / static_cast<float>(p);
  for (std::size_t k = 0; k < total; ++k) {
    const std::int32_t row = all_rows_[k];
    SPARQ_CHECK(row >= 0 && row < num_rows, "sparse rows: row {} outside [0, {})", row, num_rows);
    float* dst = table_grad + static_cast<std::int64_t>(row) * dim;
    const float* src = all_values_.data() + k * static_cast<std::size_t>(dim);
    for (std::int64_t j = 0; j < dim; ++j) dst[j] += scale * src[j];
  }
}

}  // namespace sparq::comm
