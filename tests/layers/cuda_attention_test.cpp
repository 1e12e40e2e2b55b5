// The CUDA attention core and MultiHeadAttention against their CPU twins: causal and padded
// masks (including rows with no visible key), dropout off and on with the CPU's exact mask,
// odd shapes (B=3, T=37, C=48, H=4), forward and backward, guard bands on every device
// output, parameter gradients that accumulate. Skipped without a GPU; the dropout draw the
// kernels share with the CPU is tested in shared_math_test.cpp, which every build runs.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "core/threading.h"
#include "cuda_layer_test_util.h"
#include "layers/attention.h"
#include "layers/cuda/attention_dropout.h"

#if SPARQ_HAS_CUDA
#include "core/cuda/device_resources.h"
#endif

namespace sparq {
namespace {

#if SPARQ_HAS_CUDA
using testing::GuardedDeviceArray;
using testing::normalized_error;
using testing::random_floats;

struct MaskCase {
  bool causal;
  bool padding;            // sequence 1 ends in padding; sequence 2 as below
  bool last_fully_padded;  // sequence 2: every key padded (else its first 3 keys)
  float dropout;
};

// Key-valid mask [3, t]: sequence 0 all real, 1 padded after 27 tokens (or t - 5), 2 per case.
std::vector<std::uint8_t> key_valid_for(const MaskCase& mc, std::int64_t t) {
  std::vector<std::uint8_t> valid(static_cast<std::size_t>(3 * t), 1);
  const std::int64_t real = std::min<std::int64_t>(27, t - 5);
  for (std::int64_t j = real; j < t; ++j) valid[t + j] = 0;
  for (std::int64_t j = 0; j < t; ++j) {
    if (mc.last_fully_padded || j < 3) valid[2 * t + j] = 0;
  }
  return valid;
}

const MaskCase kCases[] = {
    {true, false, false, 0.0f},   // causal
    {false, true, true, 0.0f},    // padding, every row of sequence 2 fully masked
    {true, true, false, 0.3f},    // causal + padding: rows 0..2 of sequence 2 see nothing
    {false, false, false, 0.1f},  // bidirectional with dropout
};

// One run of the core on both sides for a mask case: the CPU's materialized kernels and the
// device's in `ctx`, on the same inputs (B=3, T=37, C=48, H=4).
struct CoreRun {
  DropoutKey key;                       // the dropout draws both sides made
  std::vector<float> probs, out, dqkv;  // CPU
  std::vector<float> got_probs, got_out, got_dqkv;
  std::vector<float> got_dropped;  // the device scratch after forward
  bool guards_intact = true;
};

CoreRun run_core(const ExecContext& ctx, const MaskCase& mc) {
  const std::int64_t b = 3, t = 37, c = 48, h = 4, bhtt = b * h * t * t;
  const auto valid = key_valid_for(mc, t);
  CoreRun r;
  AttentionGeom g;
  g.batch = b, g.seq = t, g.dim = c, g.heads = h, g.causal = mc.causal;
  g.key_valid = mc.padding ? valid.data() : nullptr;
  g.dropout_p = mc.dropout;
  g.key = r.key = DropoutKey::make({11, 0, 5, true}, 3);
  const auto qkv = random_floats(b * t * 3 * c, 31), dctx = random_floats(b * t * c, 32);
  r.probs.resize(bhtt), r.out.resize(b * t * c), r.dqkv.resize(qkv.size());
  std::vector<float> scratch(max_threads() * cpu::attention_materialized_scratch_per_slot(t));
  cpu::attention_forward_materialized<float>(g, qkv.data(), r.probs.data(), r.out.data(),
                                             scratch.data(), max_threads());
  cpu::attention_backward_materialized<float>(g, qkv.data(), r.probs.data(), dctx.data(),
                                              r.dqkv.data(), scratch.data(), max_threads());

  GuardedDeviceArray<std::uint8_t> gvalid(valid);
  GuardedDeviceArray<float> gqkv(qkv), gdctx(dctx), gprobs(bhtt), gout(r.out.size()),
      gdqkv(qkv.size()), gscratch(cuda::attention_scratch_floats(b, h, t));
  testing::uploads_done();
  AttentionGeom gg = g;
  gg.key_valid = mc.padding ? gvalid.data() : nullptr;
  cuda::attention_forward(gg, ctx.cuda(), gqkv.data(), gprobs.data(), gout.data(), gscratch.data());
  r.got_probs = gprobs.download();
  r.got_out = gout.download();
  r.got_dropped = gscratch.download();
  cuda::attention_backward(gg, ctx.cuda(), gqkv.data(), gprobs.data(), gdctx.data(), gdqkv.data(),
                           gscratch.data());
  r.got_dqkv = gdqkv.download();
  for (const auto* a : {&gprobs, &gout, &gdqkv, &gscratch}) r.guards_intact &= a->guards_intact();
  return r;
}

TEST(CudaAttentionCore, ForwardAndBackwardMatchCpu) {
  SPARQ_SKIP_WITHOUT_GPU();
  auto ctx = testing::test_cuda_context();
  ASSERT_NE(ctx, nullptr);
  for (const MaskCase& mc : kCases) {
    const CoreRun r = run_core(*ctx, mc);
    const std::int64_t bhtt = static_cast<std::int64_t>(r.probs.size());
    // Scores by cuBLAS and a block-reduced softmax: a few ulps from the CPU's.
    EXPECT_LT(normalized_error(r.got_probs, r.probs), 1e-5) << mc.causal << mc.padding;
    EXPECT_LT(normalized_error(r.got_out, r.out), 1e-5) << mc.causal << mc.padding;
    for (std::int64_t e = 0; e < bhtt; ++e) {  // masked keys and fully masked rows: exact 0
      if (r.probs[e] == 0.0f) {
        ASSERT_EQ(r.got_probs[e], 0.0f) << e;
      }
    }
    if (mc.dropout > 0.0f) {
      // The dropped probabilities use the CPU's mask exactly: scale * p, bit for bit.
      std::vector<float> scales(bhtt);
      cpu::dropout_scales<float>(r.key, 0, bhtt, mc.dropout, scales.data());
      for (std::int64_t e = 0; e < bhtt; ++e) {
        ASSERT_EQ(r.got_dropped[e], scales[e] * r.got_probs[e]) << e;
      }
    }
    // Three GEMMs deep and the softmax backward's cancellation (dP - rowsum(P dP)).
    EXPECT_LT(normalized_error(r.got_dqkv, r.dqkv), 1e-4) << mc.causal << mc.padding;
    EXPECT_TRUE(r.guards_intact);
  }
}

// Note [bf16 GEMM operands]: in a bf16 context the core's four products take bf16-rounded
// operands (qkv, P or the dropped P, dctx, dS), so the results leave the f32 bounds above by
// far but stay within bf16's rounding of the CPU's f32 results (8 significant bits: 2^-9
// relative per operand, a few of them compounded through the softmax and its backward).
TEST(CudaAttentionCore, Bf16ProductsStayWithinBf16RoundingOfTheCpu) {
  SPARQ_SKIP_WITHOUT_GPU();
  auto made = ExecContext::create_cuda(0, GemmPrecision::kBF16);
  ASSERT_TRUE(made.is_ok()) << made.status().message();
  for (const MaskCase& mc : kCases) {
    const CoreRun r = run_core(**made, mc);
    const double probs_error = normalized_error(r.got_probs, r.probs);
    EXPECT_GT(probs_error, 1e-4) << "the scores did not multiply bf16 operands";
    EXPECT_LT(probs_error, 1e-2) << mc.causal << mc.padding;
    EXPECT_LT(normalized_error(r.got_out, r.out), 1e-2) << mc.causal << mc.padding;
    const double grad_error = normalized_error(r.got_dqkv, r.dqkv);
    EXPECT_GT(grad_error, 1e-4);
    EXPECT_LT(grad_error, 3e-2) << mc.causal << mc.padding;
    EXPECT_TRUE(r.guards_intact);
  }
}

// The whole layer in a CUDA context, projections included. Its Linear layers need their
// CUDA path (Linear's own change); without it Linear refuses the device tensors by name.
TEST(CudaMultiHeadAttention, LayerMatchesCpuTwin) {
  SPARQ_SKIP_WITHOUT_GPU();
  auto ctx = testing::test_cuda_context();
  ASSERT_NE(ctx, nullptr);
  const std::int64_t b = 3, seq = 37, c = 48, h = 4;
  for (const MaskCase& mc : kCases) {
    for (const std::int64_t t : {seq, std::int64_t{29}}) {  // the full cache and a shorter T
      const MultiHeadAttention::Config cfg{c, h, seq, b, mc.causal, mc.dropout, 4, 0.2f, 0.1f};
      MultiHeadAttention cpu_mha("attn", cfg), gpu_mha("attn", cfg);
      ParamStore cpu_store = testing::bind_in(ExecContext::cpu(), cpu_mha);
      ParamStore gpu_store = testing::bind_in(*ctx, gpu_mha);
      testing::randomize_both(cpu_store, gpu_store, 9, 0.2f);
      const Shape s{b, t, c};
      const DropoutStep step{17, 0, 2, true};
      auto valid = key_valid_for(mc, t);
      const Tensor hvalid = mc.padding ? Tensor(valid.data(), DType::kU8, {b, t}) : Tensor();
      auto x = random_floats(b * t * c, 33), dy = random_floats(b * t * c, 34);
      std::vector<float> y(x.size()), dx(x.size());
      cpu_mha.forward(testing::view(x, s), testing::view(y, s), hvalid, step);
      cpu_mha.backward(testing::view(x, s), testing::view(dy, s), testing::view(dx, s), step);

      GuardedDeviceArray<std::uint8_t> gvalid(valid);
      GuardedDeviceArray<float> gx(x), gdy(dy), gy(x.size()), gdx(x.size());
      testing::uploads_done();
      const Tensor dvalid = mc.padding ? gvalid.view({b, t}) : Tensor();
      gpu_mha.forward(gx.view(s), gy.view(s), dvalid, step);
      // Two projections around the core: fp32 GEMMs in another order.
      EXPECT_LT(normalized_error(gy.download(), y), 1e-5) << mc.causal << mc.padding << t;
      EXPECT_EQ(gpu_mha.probs().device(), Device::kCUDA);
      EXPECT_LT(
          normalized_error(testing::download(gpu_mha.probs()), testing::to_vector(cpu_mha.probs())),
          1e-5);
      gpu_mha.backward(gx.view(s), gdy.view(s), gdx.view(s), step);
      EXPECT_LT(normalized_error(gdx.download(), dx), 1e-4) << mc.causal << mc.padding << t;
      // Random old gradients in both stores: equal only if both accumulated (+=).
      EXPECT_LT(testing::grad_error(gpu_store, cpu_store), 1e-4) << mc.causal << mc.padding << t;
      EXPECT_TRUE(gy.guards_intact());
      EXPECT_TRUE(gdx.guards_intact());
    }
  }
}
#endif

}  // namespace
}  // namespace sparq
