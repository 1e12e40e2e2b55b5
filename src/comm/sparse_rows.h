// The exact exchange of a row-sparse gradient: the tied embedding lookup's share (Note [Tied
// embedding split], models/model.h). Each rank holds the distinct rows its batch touched and
// their summed gradients; every rank ends with
//     table_grad[row] += (1 / P) * sum over ranks r of values_r[row]
// for every row any rank sent. Host buffers.
//
// Collectives (Note [Rank-identical collective order], communicator.h): always the same three
// on every rank, a rank with no rows included: allgather of the row counts, then allgatherv of
// the row ids (i32), then allgatherv of the values (f32). Every rank then adds the messages in
// rank order, rows in each message's order, to a table gradient that is identical on all
// ranks, so all ranks compute the same bits.
//
// Payload per rank (last_payload_bytes): 8 + rows * (4 + 4 * dim), against 4 * num * dim for
// the table sent dense. On the wire each allgatherv moves, as a ring, every rank's message
// but one neighbour's through each rank (comm/byte_model.h counts it so).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "comm/communicator.h"

namespace sparq::comm {

class SparseRowExchange {
 public:
  // rows: distinct ids in [0, num_rows); values: rows.size() * dim floats. table_grad:
  // [num_rows, dim], identical on all ranks on entry (the averaged head share).
  void add_average(Communicator& comm, std::span<const std::int32_t> rows,
                   std::span<const float> values, std::int64_t dim, float* table_grad,
                   std::int64_t num_rows);

  std::size_t last_rows() const { return last_rows_; }  // over all ranks
  // This rank's message in the last call: its count, row ids and values.
  std::size_t last_payload_bytes() const { return last_payload_bytes_; }

 private:
  std::vector<std::int64_t> counts_;
  std::vector<std::size_t> row_counts_, value_counts_;
  std::vector<std::int32_t> all_rows_;
  std::vector<float> all_values_;
  std::size_t last_rows_ = 0;
  std::size_t last_payload_bytes_ = 0;
};

}  // namespace sparq::comm
