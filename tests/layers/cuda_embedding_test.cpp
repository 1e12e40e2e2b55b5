// Embedding on CUDA against its CPU twin: lookups with and without positions added, the tied
// head (logits = x W^T and its two gradients), the deterministic backward over repeated ids,
// and bad ids found and kept away from memory outside the table. Split from
// cuda_dense_test.cpp; the same conventions (guard bands, NaN-filled outputs, stated bounds).
// Skipped without a device.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "core/rng.h"
#include "cuda_layer_test_util.h"
#include "layer_test_util.h"
#include "layers/embedding.h"

#if SPARQ_HAS_CUDA
#include "core/cuda/device_resources.h"
#include "layers/cuda/embedding_cuda.h"

namespace sparq {
namespace {

using testing::bind_in;
using testing::download;
using testing::expect_close;
using testing::expect_device;
using testing::GuardedDeviceArray;
using testing::nans;
using testing::random_floats;
using testing::uploads_done;
using testing::view;
// FP32 cuBLAS against the CPU's Eigen GEMM (the tied head): summation order only.
using testing::kGemmBound;

class CudaEmbedding : public testing::CudaLayerTest {};

// Ids with many repeats (a third of them from a small range) and both ends of the table.
std::vector<std::int32_t> repeated_ids(std::int64_t n, std::int64_t num) {
  Rng rng(5, 1);
  std::vector<std::int32_t> ids(static_cast<std::size_t>(n));
  for (auto& id : ids) id = static_cast<std::int32_t>(rng.below(rng.below(3) == 0 ? 7 : num));
  ids[0] = static_cast<std::int32_t>(num - 1);
  ids[1] = 0;
  return ids;
}

TEST_F(CudaEmbedding, EmbeddingLookupsAndTiedHeadMatchTheCpu) {
  const std::int64_t num = 103, dim = 37, batch = 3, seq = 29, n = batch * seq;
  Embedding cpu_emb("wte", {num, dim}), gpu_emb("wte", {num, dim});
  ParamStore cpu_store = bind_in(ExecContext::cpu(), cpu_emb);
  ParamStore gpu_store = bind_in(*ctx_, gpu_emb);
  const auto dtable = [&](const ParamStore& s) { return s.grad("wte.weight"); };
  std::vector<std::int32_t> ids = repeated_ids(n, num);
  const Tensor ids_h(ids.data(), DType::kI32, {batch, seq});
  GuardedDeviceArray<std::int32_t> ids_d(ids);
  uploads_done();

  // Lookup, then positions added on top: copies and one add each, the CPU's bits.
  std::vector<float> y(n * dim);
  GuardedDeviceArray<float> y_d(nans(y.size()));
  uploads_done();
  cpu_emb.forward(ids_h, view(y, {batch, seq, dim}));
  gpu_emb.forward(ids_d.view({batch, seq}), y_d.view({batch, seq, dim}));
  expect_device(y_d, y, 0.0, "lookup");
  cpu_emb.forward_positions(view(y, {batch, seq, dim}), /*accumulate=*/true);
  gpu_emb.forward_positions(y_d.view({batch, seq, dim}), /*accumulate=*/true);
  expect_device(y_d, y, 0.0, "lookup + positions");
  cpu_emb.forward(ids_h, view(y, {batch, seq, dim}), /*accumulate=*/true);
  gpu_emb.forward(ids_d.view({batch, seq}), y_d.view({batch, seq, dim}), /*accumulate=*/true);
  expect_device(y_d, y, 0.0, "accumulating lookup");
  cpu_emb.forward_positions(view(y, {batch, seq, dim}), /*accumulate=*/false);
  gpu_emb.forward_positions(y_d.view({batch, seq, dim}), /*accumulate=*/false);
  expect_device(y_d, y, 0.0, "positions");

  // Scatter-add: each id's rows in ascending order onto the old gradient, as the CPU does,
  // so the device gradient is the CPU's bit for bit, after one call and after two.
  auto dy = random_floats(n * dim, 31);
  GuardedDeviceArray<float> dy_d(dy);
  uploads_done();
  for (int call = 1; call <= 2; ++call) {
    SCOPED_TRACE("backward call " + std::to_string(call));
    cpu_emb.backward(ids_h, view(dy, {batch, seq, dim}));
    gpu_emb.backward(ids_d.view({batch, seq}), dy_d.view({batch, seq, dim}));
    expect_close(download(dtable(gpu_store)), testing::to_vector(dtable(cpu_store)), 0.0,
                 "dtable (lookup)");
  }
  EXPECT_TRUE(dy_d.guards_intact() && ids_d.guards_intact());
  cpu_emb.backward_positions(view(dy, {batch, seq, dim}));
  gpu_emb.backward_positions(dy_d.view({batch, seq, dim}));
  expect_close(download(dtable(gpu_store)), testing::to_vector(dtable(cpu_store)), 0.0,
               "dtable (+ positions)");

  // Tied head: logits = x table^T and its backward, adding into the same dtable.
  auto x = random_floats(n * dim, 32), dlogits = random_floats(n * num, 33);
  std::vector<float> logits(n * num), dx(n * dim);
  GuardedDeviceArray<float> x_d(x), dlogits_d(dlogits), logits_d(nans(logits.size())),
      dx_d(nans(dx.size()));
  uploads_done();
  cpu_emb.project(view(x, {n, dim}), view(logits, {n, num}));
  gpu_emb.project(x_d.view({n, dim}), logits_d.view({n, num}));
  expect_device(logits_d, logits, kGemmBound, "logits");
  cpu_emb.project_backward(view(x, {n, dim}), view(dlogits, {n, num}), view(dx, {n, dim}));
  gpu_emb.project_backward(x_d.view({n, dim}), dlogits_d.view({n, num}), dx_d.view({n, dim}));
  expect_device(dx_d, dx, kGemmBound, "dx (head)");
  expect_close(download(dtable(gpu_store)), testing::to_vector(dtable(cpu_store)), kGemmBound,
               "dtable (+ head)");
}

#ifdef NDEBUG
// A release build does not check device ids (check_ids, debug only): an id in the padded rows
// [valid, num) must then read zeros and add no gradient, as the padded rows take none from the
// loss, instead of training a row that must stay inert (review). Debug builds stop at it.
TEST_F(CudaEmbedding, EmbeddingIdsInThePaddedRowsReadZerosAndAddNothing) {
  const std::int64_t num = 24, valid = 20, dim = 9, n = 4;
  Embedding emb("wte", {.num = num, .dim = dim, .valid = valid});
  ParamStore store = bind_in(*ctx_, emb);
  std::vector<std::int32_t> ids = {3, 21, 19, 22};  // 21 and 22 are padded rows
  GuardedDeviceArray<std::int32_t> ids_d(ids);
  GuardedDeviceArray<float> y_d(nans(n * dim));
  auto dy = random_floats(n * dim, 41);
  GuardedDeviceArray<float> dy_d(dy);
  uploads_done();
  emb.forward(ids_d.view({n}), y_d.view({n, dim}));
  emb.backward(ids_d.view({n}), dy_d.view({n, dim}));
  const std::vector<float> y = download(y_d.view({n, dim}));
  const std::vector<float> dtable = download(store.grad("wte.weight"));
  for (std::int64_t j = 0; j < dim; ++j) {
    EXPECT_EQ(y[1 * dim + j], 0.0f) << j;
    EXPECT_EQ(y[3 * dim + j], 0.0f) << j;
    for (std::int64_t row = valid; row < num; ++row) EXPECT_EQ(dtable[row * dim + j], 0.0f) << row;
    EXPECT_EQ(dtable[3 * dim + j], dy[0 * dim + j]) << j;  // a valid id still lands
  }
}
#endif

TEST_F(CudaEmbedding, EmbeddingBadIdsAreFoundAndNeverTouchMemoryOutsideTheTable) {
  const std::int64_t num = 103, dim = 37, n = 41;
  std::vector<std::int32_t> ids = repeated_ids(n, num);
  ids[9] = -1;
  ids[5] = static_cast<std::int32_t>(num);  // the first bad position
  GuardedDeviceArray<std::int32_t> ids_d(ids);
  uploads_done();
  const cudaStream_t stream = ctx_->cuda().stream.get();
  const cuda::InvalidId bad = cuda::first_invalid_id(ids_d.data(), n, num, stream);
  EXPECT_EQ(bad.position, 5);
  EXPECT_EQ(bad.id, num);
  EXPECT_EQ(cuda::first_invalid_id(ids_d.data(), 5, num, stream).position, -1);

  // The raw kernels (the layer only checks ids in debug builds): a bad id reads as a zero
  // row and its gradient row is dropped, with the table and the outputs untouched around.
  GuardedDeviceArray<float> table(random_floats(num * dim, 41)), y(nans(n * dim));
  uploads_done();
  cuda::embedding_forward(ids_d.data(), table.data(), y.data(), n, num, dim, false, stream);
  const auto got = y.download(), rows = table.download();
  for (std::int64_t i = 0; i < n; ++i) {
    for (std::int64_t j = 0; j < dim; ++j) {
      const bool ok = ids[i] >= 0 && ids[i] < num;
      ASSERT_EQ(got[i * dim + j], ok ? rows[ids[i] * dim + j] : 0.0f) << i << " " << j;
    }
  }
  EXPECT_TRUE(y.guards_intact());
  auto dy = random_floats(n * dim, 42);
  GuardedDeviceArray<float> dy_d(dy), dtable(std::vector<float>(num * dim, 0.0f));
  uploads_done();
  // Guarded scratch of exactly the size the launcher asks for: it must write nowhere else.
  GuardedDeviceArray<std::uint8_t> scratch(cuda::embedding_backward_scratch_bytes(n, num));
  cuda::embedding_backward(ids_d.data(), dy_d.data(), dtable.data(), n, num, dim, scratch.data(),
                           scratch.size(), stream);
  EXPECT_TRUE(scratch.guards_intact());
  std::vector<float> want(num * dim, 0.0f);
  for (std::int64_t i = 0; i < n; ++i) {
    if (ids[i] < 0 || ids[i] >= num) continue;
    for (std::int64_t j = 0; j < dim; ++j) want[ids[i] * dim + j] += dy[i * dim + j];
  }
  expect_device(dtable, want, 0.0, "dtable without the bad rows");
}

}  // namespace
}  // namespace sparq
#endif  // SPARQ_HAS_CUDA
