#include <climits>
#include <cstddef>
#include <cub/device/device_radix_sort.cuh>
#include <string>

#include "core/cuda/cuda_check.h"
#include "layers/cuda/dense_launch.h"
#include "layers/cuda/embedding_cuda.h"

namespace sparq::cuda {
namespace {

__device__ inline bool valid_id(std::int32_t id, std::int64_t num) { return id >= 0 && id < num; }

__global__ void lookup_kernel(const std::int32_t* ids, const float* table, float* y, std::int64_t n,
                              std::int64_t num, std::int64_t dim, bool accumulate) {
  const std::int64_t total = n * dim;
  for (std::int64_t e = dense::first_index(); e < total; e += dense::grid_stride()) {
    const std::int64_t i = e / dim, j = e - i * dim;
    const std::int32_t id = ids[i];
    const float v = valid_id(id, num) ? table[static_cast<std::int64_t>(id) * dim + j] : 0.0f;
    if (accumulate) {
      y[e] += v;
    } else {
      y[e] = v;
    }
  }
}

// The sort's input: key = the id, or `num` (above every valid id) for an invalid one, and
// value = the row. Rows start ascending, and the sort is stable, so each id's rows stay so.
__global__ void sort_input_kernel(const std::int32_t* ids, std::int64_t n, std::int64_t num,
                                  std::uint32_t* keys, std::int32_t* rows) {
  for (std::int64_t i = dense::first_index(); i < n; i += dense::grid_stride()) {
    const std::int32_t id = ids[i];
    keys[i] = static_cast<std::uint32_t>(valid_id(id, num) ? id : num);
    rows[i] = static_cast<std::int32_t>(i);
  }
}

// Block-per-position over the sorted pairs: the block at the first position of a run of
// equal keys owns that id's table row (no other block writes it), and each thread owns
// columns j, adding the run's rows in ascending order onto the old dtable value, which is
// the CPU's order. Other positions, and the sentinel run of invalid ids, do nothing.
__global__ void scatter_add_sorted_kernel(const std::uint32_t* keys, const std::int32_t* rows,
                                          const float* dy, float* dtable, std::int64_t n,
                                          std::int64_t num, std::int64_t dim) {
  for (std::int64_t p = blockIdx.x; p < n; p += gridDim.x) {
    const std::uint32_t id = keys[p];
    if (id >= num || (p > 0 && keys[p - 1] == id)) continue;  // uniform across the block
    float* dst = dtable + static_cast<std::int64_t>(id) * dim;
    for (std::int64_t j = threadIdx.x; j < dim; j += blockDim.x) {
      float acc = dst[j];
      for (std::int64_t q = p; q < n && keys[q] == id; ++q)
        acc += dy[static_cast<std::int64_t>(rows[q]) * dim + j];
      dst[j] = acc;
    }
  }
}

__global__ void positions_forward_kernel(const float* table, float* y, std::int64_t total,
                                         std::int64_t plane, bool accumulate) {
  for (std::int64_t e = dense::first_index(); e < total; e += dense::grid_stride()) {
    const float v = table[e % plane];
    if (accumulate) {
      y[e] += v;
    } else {
      y[e] = v;
    }
  }
}

// One thread per element of the [seq, dim] plane: the batch rows are summed first, in
// ascending b from zero, then added to dtable once, as the CPU does.
__global__ void positions_backward_kernel(const float* dy, float* dtable, std::int64_t batch,
                                          std::int64_t plane) {
  for (std::int64_t i = dense::first_index(); i < plane; i += dense::grid_stride()) {
    float acc = 0.0f;
    for (std::int64_t b = 0; b < batch; ++b) acc += dy[b * plane + i];
    dtable[i] += acc;
  }
}

// Integer atomicMin: the result (the smallest bad position) does not depend on the order.
__global__ void find_invalid_kernel(const std::int32_t* ids, std::int64_t n, std::int64_t num,
                                    unsigned long long* first) {
  for (std::int64_t i = dense::first_index(); i < n; i += dense::grid_stride()) {
    if (!valid_id(ids[i], num)) atomicMin(first, static_cast<unsigned long long>(i));
  }
}

std::size_t align_up(std::size_t bytes) { return (bytes + 255) & ~std::size_t{255}; }

// Sort keys need only the bits of the largest key, the sentinel `num`.
int key_bits(std::int64_t num) {
  int bits = 1;
  while (bits < 32 && (std::int64_t{1} << bits) <= num) ++bits;
  return bits;
}

}  // namespace

void embedding_forward(const std::int32_t* ids, const float* table, float* y, std::int64_t n,
                       std::int64_t num, std::int64_t dim, bool accumulate, cudaStream_t stream) {
  if (n == 0) return;
  lookup_kernel<<<dense::blocks_for(n * dim), dense::kThreads, 0, stream>>>(ids, table, y, n, num,
                                                                            dim, accumulate);
  CUDA_CHECK(cudaGetLastError());
}

namespace {

// Rows are int32 values and CUB counts items in int; the sentinel `num` must fit a key.
void check_backward_size(std::int64_t n, std::int64_t num) {
  if (n > INT_MAX || num >= INT_MAX) {
    fatal_error(__FILE__, __LINE__,
                "embedding backward on CUDA supports up to 2^31 - 1 ids and table rows, got " +
                    std::to_string(n) + " ids, " + std::to_string(num) + " rows");
  }
}

// CUB's temporary storage for sorting n pairs of keys below 2^key_bits(num).
std::size_t sort_temp_bytes(std::int64_t n, std::int64_t num) {
  std::size_t bytes = 0;
  std::uint32_t* keys = nullptr;
  std::int32_t* rows = nullptr;
  CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, bytes, keys, keys, rows, rows,
                                             static_cast<int>(n), 0, key_bits(num)));
  return bytes;
}

}  // namespace

std::size_t embedding_backward_scratch_bytes(std::int64_t n, std::int64_t num) {
  if (n == 0) return 0;
  check_backward_size(n, num);
  // The four key/row arrays, then CUB's temporary storage.
  return 4 * align_up(static_cast<std::size_t>(n) * 4) + sort_temp_bytes(n, num);
}

void embedding_backward(const std::int32_t* ids, const float* dy, float* dtable, std::int64_t n,
                        std::int64_t num, std::int64_t dim, void* scratch_bytes_ptr,
                        std::size_t scratch_bytes, cudaStream_t stream) {
  if (n == 0) return;
  check_backward_size(n, num);
  const int items = static_cast<int>(n), end_bit = key_bits(num);
  const std::size_t array_bytes = align_up(static_cast<std::size_t>(n) * 4);
  std::size_t sort_bytes = sort_temp_bytes(n, num);
  if (scratch_bytes < 4 * array_bytes + sort_bytes) {
    fatal_error(__FILE__, __LINE__,
                "embedding backward: scratch of " + std::to_string(scratch_bytes) +
                    " bytes, needs " + std::to_string(4 * array_bytes + sort_bytes));
  }
  char* scratch = static_cast<char*>(scratch_bytes_ptr);
  std::uint32_t *keys_in = nullptr, *keys_out = nullptr;
  std::int32_t *rows_in = nullptr, *rows_out = nullptr;
  keys_in = reinterpret_cast<std::uint32_t*>(scratch);
  keys_out = reinterpret_cast<std::uint32_t*>(scratch + array_bytes);
  rows_in = reinterpret_cast<std::int32_t*>(scratch + 2 * array_bytes);
  rows_out = reinterpret_cast<std::int32_t*>(scratch + 3 * array_bytes);
  void* sort_temp = scratch + 4 * array_bytes;

  sort_input_kernel<<<dense::blocks_for(n), dense::kThreads, 0, stream>>>(ids, n, num, keys_in,
                                                                          rows_in);
  CUDA_CHECK(cudaGetLastError());
  CUDA_CHECK(cub::DeviceRadixSort::SortPairs(sort_temp, sort_bytes, keys_in, keys_out, rows_in,
                                             rows_out, items, 0, end_bit, stream));
  const unsigned int blocks = static_cast<unsigned int>(n < (1 << 20) ? n : (1 << 20));
  scatter_add_sorted_kernel<<<blocks, dense::kThreads, 0, stream>>>(keys_out, rows_out, dy, dtable,
                                                                    n, num, dim);
  CUDA_CHECK(cudaGetLastError());
}

void embedding_forward_positions(const float* table, float* y, std::int64_t batch, std::int64_t seq,
                                 std::int64_t dim, bool accumulate, cudaStream_t stream) {
  const std::int64_t plane = seq * dim, total = batch * plane;
  if (total == 0) return;
  positions_forward_kernel<<<dense::blocks_for(total), dense::kThreads, 0, stream>>>(
      table, y, total, plane, accumulate);
  CUDA_CHECK(cudaGetLastError());
}

void embedding_backward_positions(const float* dy, float* dtable, std::int64_t batch,
                                  std::int64_t seq, std::int64_t dim, cudaStream_t stream) {
  const std::int64_t plane = seq * dim;
  if (plane == 0) return;
  positions_backward_kernel<<<dense::blocks_for(plane), dense::kThreads, 0, stream>>>(dy, dtable,
                                                                                      batch, plane);
  CUDA_CHECK(cudaGetLastError());
}

InvalidId first_invalid_id(const std::int32_t* ids, std::int64_t n, std::int64_t num,
                           cudaStream_t stream) {
  InvalidId result;
  if (n == 0) return result;
  unsigned long long* first = nullptr;
  CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&first), sizeof(*first), stream));
  CUDA_CHECK(cudaMemsetAsync(first, 0xFF, sizeof(*first), stream));  // ULLONG_MAX: none yet
  find_invalid_kernel<<<dense::blocks_for(n), dense::kThreads, 0, stream>>>(ids, n, num, first);
  CUDA_CHECK(cudaGetLastError());
  unsigned long long host_first = ULLONG_MAX;
  CUDA_CHECK(
      cudaMemcpyAsync(&host_first, first, sizeof(host_first), cudaMemcpyDeviceToHost, stream));
  CUDA_CHECK(cudaFreeAsync(first, stream));
  CUDA_CHECK(cudaStreamSynchronize(stream));
  if (host_first == ULLONG_MAX) return result;
  result.position = static_cast<std::int64_t>(host_first);
  CUDA_CHECK(cudaMemcpyAsync(&result.id, ids + result.position, sizeof(result.id),
                             cudaMemcpyDeviceToHost, stream));
  CUDA_CHECK(cudaStreamSynchronize(stream));
  return result;
}

}  // namespace sparq::cuda
