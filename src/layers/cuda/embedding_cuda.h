// CUDA implementation of Embedding's lookups (layers/embedding.h), Note [Layer dispatch]:
// device pointers, enqueued on `stream`, never synced (except the id check below). The tied
// head's products are Linear's (layers/cuda/linear_cuda.h). fmt-free for nvcc.
//
// Ids. The CPU checks every id on the host; a device check would need a sync per call, so
// on the device ids are trusted to the data loader (shards are checked against the
// vocabulary when read) and the kernels only make a bad id harmless: a lookup writes zeros
// for it (adds nothing when accumulating) and the backward drops its row, never touching
// memory outside the table. first_invalid_id() is the explicit check for tests and debug
// builds.
//
// Determinism. The backward sorts (id, row) pairs with CUB's stable radix sort, then one
// block per distinct id adds that id's rows in ascending row order onto the old dtable row:
// the CPU's order exactly, so dtable gets the CPU's bits, and no atomics are involved.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace sparq::cuda {

// y[i] (=|+=) table[ids[i]] for i in [0, n); table [at least num, dim], y [n, dim]. An id
// outside [0, num) reads zeros here and adds nothing in embedding_backward: the layer passes
// its valid ids as num, so the padded rows of a table stay untouched.
void embedding_forward(const std::int32_t* ids, const float* table, float* y, std::int64_t n,
                       std::int64_t num, std::int64_t dim, bool accumulate, cudaStream_t stream);

// Device scratch bytes embedding_backward needs for n ids into a table of num rows.
std::size_t embedding_backward_scratch_bytes(std::int64_t n, std::int64_t num);
// dtable[ids[i]] += dy[i] for i in [0, n), rows of each id in ascending i. `scratch` holds at
// least embedding_backward_scratch_bytes(n, num) device bytes, owned by the caller (the layer
// keeps it across steps, so the training step allocates nothing).
void embedding_backward(const std::int32_t* ids, const float* dy, float* dtable, std::int64_t n,
                        std::int64_t num, std::int64_t dim, void* scratch,
                        std::size_t scratch_bytes, cudaStream_t stream);

// Row (b, t) of y [batch, seq, dim] (=|+=) table[t].
void embedding_forward_positions(const float* table, float* y, std::int64_t batch, std::int64_t seq,
                                 std::int64_t dim, bool accumulate, cudaStream_t stream);

// dtable[t] += sum over b of dy[b, t] (batch rows summed in ascending b first, as on the CPU).
void embedding_backward_positions(const float* dy, float* dtable, std::int64_t batch,
                                  std::int64_t seq, std::int64_t dim, cudaStream_t stream);

struct InvalidId {
  std::int64_t position = -1;  // the first i with ids[i] outside [0, num), or -1 if none
  std::int32_t id = 0;         // ids[position]
};
// Checks ids on the device and SYNCHRONIZES the stream to report: for tests and debug builds.
InvalidId first_invalid_id(const std::int32_t* ids, std::int64_t n, std::int64_t num,
                           cudaStream_t stream);

}  // namespace sparq::cuda
