// apps/train --dry-run, end to end (in test_train_app with train_app_test.cpp): every config
// in configs/ passes it, one larger than memory reports its need, a GPU config can be checked
// where there is no GPU, and the automatic plan says what it priced.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "common/subprocess.h"
#include "train_app_util.h"

namespace {

namespace fs = std::filesystem;

using sparq::testing::ProcessResult;
using sparq::testing::run_train;

TEST(TrainApp, DryRunSucceedsForEveryConfig) {
  int configs = 0;
  for (const auto& entry : fs::directory_iterator(fs::path(SPARQ_SOURCE_DIR) / "configs")) {
    if (entry.path().extension() != ".yaml") continue;
    ++configs;
    const ProcessResult p =
        run_train(0, "--config configs/" + entry.path().filename().string() + " --dry-run");
    EXPECT_EQ(p.exit_code, 0) << entry.path() << "\n" << p.output;
    EXPECT_NE(p.output.find("dry run: configuration valid"), std::string::npos) << p.output;
    EXPECT_NE(p.output.find("bucket plan:"), std::string::npos) << p.output;
    EXPECT_NE(p.output.find("memory:"), std::string::npos) << p.output;
    // The density warm-up is on the compress line, not only in the resolved config (review,
    // 2026-12-07).
    if (entry.path().filename() == "vgg_cifar10_tiny.yaml") {
      EXPECT_NE(p.output.find("dense warm-up 0 steps, density warm-up 600 steps"),
                std::string::npos)
          << p.output;
    }
  }
  EXPECT_GE(configs, 7);
}

// A dry run allocates no activations (models/model.h, RunShape::plan_only): one whose single
// row needs 140 GB (a million-token context, 16 layers) aborted with "out of host memory"
// where training would report the same need (review, 2026-12-07); now it reports it.
TEST(TrainApp, DryRunOfAConfigLargerThanMemoryReportsItsNeed) {
  const ProcessResult p =
      run_train(0,
                "--config configs/default.yaml --set model.n_ctx=1048576 --set model.n_layer=16 "
                "--set data.seq_len=1048576 --set data.markov.train_tokens=1048577 "
                "--set data.markov.eval_tokens=1048577 --set train.micro_batch=1 --dry-run");
  EXPECT_EQ(p.exit_code, 0) << p.output;
  // About 140,000 MiB: the per-thread attention areas make the figure depend on the threads.
  EXPECT_NE(p.output.find("MiB for B=1 T=1048576"), std::string::npos) << p.output;
  EXPECT_NE(p.output.find("memory:    about 14"), std::string::npos) << p.output;
  EXPECT_NE(p.output.find("dry run: configuration valid"), std::string::npos) << p.output;
}

// A GPU config can be checked where there is no GPU: the dry run opens no device, prints the
// device plan and the bucket plan, and says what training would refuse.
TEST(TrainApp, DryRunOnCudaNeedsNoDevice) {
  const ProcessResult p =
      run_train(0, "--config configs/gpt2_wikitext_tiny.yaml --set train.device=cuda --dry-run");
  EXPECT_EQ(p.exit_code, 0) << p.output;
  EXPECT_NE(p.output.find("dry run: configuration valid"), std::string::npos) << p.output;
  EXPECT_NE(p.output.find("device:    cuda, one GPU per rank, f32 GEMMs (not opened in a dry "
                          "run)"),
            std::string::npos)
      << p.output;
  // lbs (exact selection, allgathered) has a GPU path: nothing to refuse.
  EXPECT_EQ(p.output.find("note: training refused"), std::string::npos) << p.output;
  // A build without CUDA says that training would be refused for want of it (it said
  // nothing: review, 2026-12-06).
  const bool build_note =
      p.output.find("note: this sparq was built without CUDA") != std::string::npos;
#if SPARQ_HAS_CUDA
  EXPECT_FALSE(build_note) << p.output;
#else
  EXPECT_TRUE(build_note) << p.output;
#endif
  EXPECT_NE(p.output.find("bucket plan:"), std::string::npos) << p.output;
  const ProcessResult dense = run_train(0,
                                        "--config configs/gpt2_wikitext_tiny.yaml --set "
                                        "train.device=cuda --set compress.name=none --set "
                                        "optim.communicate=gradient --dry-run");
  EXPECT_EQ(dense.exit_code, 0) << dense.output;
  EXPECT_EQ(dense.output.find("note: training refused"), std::string::npos) << dense.output;
  // The optimizer modes with per-rank state run on the GPU too: the momentum mode (b) of
  // the State of the Union config, and the update mode (c), both clipping locally.
  for (const auto& [mode, shown] :
       {std::pair<std::string, std::string>{"", "clip 1 (local), communicates the momentum"},
        {" --set optim.communicate=update --set optim.freeze_steps=0",
         "clip 1 (local), communicates the update"}}) {
    const ProcessResult p = run_train(
        0, "--config configs/gpt2_sotu_tiny.yaml --set train.device=cuda" + mode + " --dry-run");
    EXPECT_EQ(p.exit_code, 0) << p.output;
    EXPECT_NE(p.output.find(shown), std::string::npos) << p.output;
    EXPECT_EQ(p.output.find("note: training refused"), std::string::npos) << p.output;
  }
  // comm.emulate.ranks prices the GPU bucket queue's NCCL calls: a dry run of a GPU config
  // with it (bench/gpu_wfbp.sh's runs) was refused as having no NCCL queue, because a dry run
  // builds on the CPU (review, 2026-12-06). A build without NCCL still refuses it, naming that.
  const ProcessResult wfbp = run_train(
      0,
      "--config configs/bench/gpt2_124m_gpu.yaml --set compress.name=lbs --set "
      "comm.emulate.gbit_per_s=1 --set comm.emulate.ranks=8 --set train.steps=12 --dry-run");
  if (wfbp.output.find("sparq built without NCCL") != std::string::npos) {
    EXPECT_NE(wfbp.exit_code, 0) << wfbp.output;
  } else {
    EXPECT_EQ(wfbp.exit_code, 0) << wfbp.output;
    EXPECT_NE(wfbp.output.find("dry run: configuration valid"), std::string::npos) << wfbp.output;
  }
  // Initial weights that are not there yet are said, as missing data files are.
  const ProcessResult init = run_train(
      0,
      "--config configs/default.yaml --set train.init_from=/nonexistent/w.safetensors --set "
      "optim.momentum=0.9 --dry-run");
  EXPECT_EQ(init.exit_code, 0) << init.output;
  EXPECT_NE(
      init.output.find("init:      weights from /nonexistent/w.safetensors (train.init_format "
                       "auto): not found, needed before training"),
      std::string::npos)
      << init.output;
  // Initial weights that are there are checked against the model from the file's header
  // (review, 2026-12-07: a file for another model passed the dry run).
  const std::string hf_tiny =
      " --set train.init_from=tests/reference/safetensors/gpt2_hf_tiny.safetensors --dry-run";
  expect_refused(run_train(0, "--config configs/default.yaml" + hf_tiny), "train.init_from");
  const ProcessResult fits =
      run_train(0,
                "--config configs/default.yaml --set model.n_layer=2 --set model.n_head=2 "
                "--set model.n_embd=16 --set model.n_ctx=8 --set model.vocab_size=40 "
                "--set data.seq_len=8 --set data.markov.vocab_size=40" +
                    hf_tiny);
  EXPECT_EQ(fits.exit_code, 0) << fits.output;
  EXPECT_NE(fits.output.find("(train.init_format auto): names and shapes checked"),
            std::string::npos)
      << fits.output;
  // The same weights on a shard of WordPiece ids: GPT-2 rows would meet unrelated tokens, and
  // the run trained silently (review, 2026-12-07). A 14-token vocabulary keeps it in the
  // model's 40 rows.
  const fs::path wp = sparq::testing::scratch_dir("train_refusal", "wordpiece");
  {
    std::ofstream(wp / "vocab.txt") << "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\ncat\nsat\non\n"
                                       "mat\na\ndog\nran\n.\n";
    std::ofstream text(wp / "text.txt");
    for (int i = 0; i < 200; ++i) text << "the cat sat on the mat . a dog ran .\n";
  }
  const ProcessResult prepared = sparq::testing::run_command(
      std::string(SPARQ_PREPARE_DATA_APP) + " --tokenizer wordpiece --vocab-dir " + wp.string() +
      " --input " + (wp / "text.txt").string() + " --format text --out " + wp.string() +
      " --quiet 2>&1");
  ASSERT_EQ(prepared.exit_code, 0) << prepared.output;
  const std::string tiny_on_shard =
      "--config configs/gpt2_wikitext_tiny.yaml --set model.n_layer=2 --set model.n_head=2 "
      "--set model.n_embd=16 --set model.n_ctx=8 --set model.vocab_size=40 --set "
      "data.seq_len=8 --set data.train=" +
      (wp / "train.bin").string() + " --set data.eval=";
  expect_refused(
      run_train(0, tiny_on_shard + hf_tiny),
      "data.train '" + (wp / "train.bin").string() + "' was made by tokenizer 'bert-uncased'");
  // From scratch, a GPT-2 may learn any tokenizer's ids.
  const ProcessResult scratch_init = run_train(0, tiny_on_shard + " --dry-run");
  EXPECT_EQ(scratch_init.exit_code, 0) << scratch_init.output;
  fs::remove_all(wp);
  // So are settings the optimizer never reads (default.yaml trains with adamw).
  EXPECT_NE(init.output.find("note: optim.momentum is ignored: only sgd reads it"),
            std::string::npos)
      << init.output;
  // And settings that leave part of what they ask for undone in this run (review,
  // 2026-12-07): a warm-up past the run's end, a freeze that never comes.
  const ProcessResult undone = run_train(
      0,
      "--config configs/default.yaml --set optim.schedule=constant --set "
      "optim.warmup_steps=301 --set optim.communicate=momentum --set optim.freeze_steps=300 "
      "--set compress.dense_warmup_steps=300 --dry-run");
  EXPECT_EQ(undone.exit_code, 0) << undone.output;
  for (const char* note :
       {"note: optim.warmup_steps 301 > train.steps 300: the learning rate never reaches",
        "note: optim.freeze_steps 300 >= train.steps 300: the variance never freezes",
        "note: compress.dense_warmup_steps 300 >= train.steps 300: no step compresses",
        "note: optim.min_lr is ignored: only the schedules linear and cosine read it"}) {
    EXPECT_NE(undone.output.find(note), std::string::npos) << note << "\n" << undone.output;
  }
  // A warm-up as long as the run reaches lr at its last step: no note.
  const ProcessResult reaches = run_train(0,
                                          "--config configs/default.yaml --set "
                                          "optim.schedule=constant --set optim.warmup_steps=300 "
                                          "--dry-run");
  EXPECT_EQ(reaches.exit_code, 0) << reaches.output;
  EXPECT_EQ(reaches.output.find("optim.warmup_steps 300"), std::string::npos) << reaches.output;
  // Settings ignored by the run's bucket plan or strategy (review, 2026-12-07): the first cap
  // of per-layer buckets, server compression where no bucket goes through two_phase.
  const ProcessResult unread =
      run_train(0,
                "--config configs/default.yaml --set comm.bucket_mb=0 --set comm.first_bucket_mb=2 "
                "--set compress.name=topk --set compress.aggregation=allgather "
                "--set compress.server_compression=false --dry-run");
  EXPECT_EQ(unread.exit_code, 0) << unread.output;
  for (const char* note :
       {"note: comm.first_bucket_mb is ignored: only buckets capped by size read it, and this "
        "run has comm.bucket_mb: 0",
        "note: compress.server_compression is ignored: only two_phase reads it"}) {
    EXPECT_NE(unread.output.find(note), std::string::npos) << note << "\n" << unread.output;
  }
  // bf16 GEMM operands are a GPU setting the dry run validates and shows.
  const ProcessResult bf16 = run_train(0,
                                       "--config configs/gpt2_wikitext_tiny.yaml --set "
                                       "train.device=cuda --set train.precision=bf16 --dry-run");
  EXPECT_EQ(bf16.exit_code, 0) << bf16.output;
  EXPECT_NE(bf16.output.find("cuda, one GPU per rank, bf16 GEMMs"), std::string::npos)
      << bf16.output;
  EXPECT_EQ(bf16.output.find("note: training refused"), std::string::npos) << bf16.output;
  // A strategy not built on the GPU is still validated, with the refusal as a note.
  const ProcessResult tree =
      run_train(0,
                "--config configs/gpt2_wikitext_tiny.yaml --set train.device=cuda --set "
                "compress.name=topk_sampled --set compress.aggregation=tree --dry-run");
  EXPECT_EQ(tree.exit_code, 0) << tree.output;
  EXPECT_NE(tree.output.find("note: training refused: configs/gpt2_wikitext_tiny.yaml with "
                             "--set compress.aggregation, compress.name, train.device: "
                             "compress.aggregation: tree is not built on the GPU yet"),
            std::string::npos)
      << tree.output;
  // The GPU twins (the device allreduce's, the count-on-device selections, powersgd's
  // low_rank): nothing to refuse.
  for (const char* twin : {"randomk", "qsgd", "terngrad", "signsgd", "bf16", "fp16", "threshold",
                           "topk_sampled", "powersgd"}) {
    const ProcessResult p = run_train(
        0, std::string("--config configs/gpt2_wikitext_tiny.yaml --set train.device=cuda --set "
                       "compress.name=") +
               twin + " --dry-run");
    EXPECT_EQ(p.exit_code, 0) << twin << "\n" << p.output;
    EXPECT_EQ(p.output.find("note: training refused"), std::string::npos) << twin << p.output;
  }
}

// comm.plan: auto on one process prices a world that sends nothing: the dry run said "the
// plan" without saying that N ranks choose differently (review, 2026-12-06).
TEST(TrainApp, DryRunOfAnAutomaticPlanOnOneRankSaysItIsTheFixedPlan) {
  const ProcessResult p = run_train(
      0,
      "--config configs/gpt2_wikitext_tiny.yaml --set comm.plan=auto --set "
      "comm.plan_profile=profiles/h100_node.yaml --set comm.plan_network=10gbit --dry-run");
  EXPECT_EQ(p.exit_code, 0) << p.output;
  EXPECT_NE(p.output.find("on 1 ranks over 10gbit of profile h100-node"), std::string::npos)
      << p.output;
  EXPECT_NE(p.output.find("one rank communicates nothing, so this is the fixed plan; start the "
                          "run (or the dry run) under the launcher with its ranks"),
            std::string::npos)
      << p.output;
}

}  // namespace
