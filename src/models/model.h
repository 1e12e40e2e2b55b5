// Model: the uniform surface of GPT-2, BERT and VGG that the trainer and the WFBP scheduler
// are built on. Models are composed in code from src/layers (no graph, no autograd).
//
// Life cycle:
//   auto model = make_model(config, {micro_batch, seq_len}).value();  // activations allocated
//   ParamStore store;
//   model->declare(store);            // every parameter, in forward order
//   store.allocate(context, place_last);  // the caller chooses the device and layout
//   store.initialize(seed);           // or load a checkpoint
//   model->bind(store);               // layers get views; callback ranges are fixed here
//   loop: model->set_step(step); loss = model->forward_for_backward(batch);
//         model->backward(on_ready);
//
// Gradients: see Note [Gradient rule] (layers/param_set.h). A model's backward is its layers'
// backwards, so it too ADDS into the store's gradient buffer: zero it between optimizer
// steps; not zeroing accumulates micro-batches.
//
// Note [Tied embedding split]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A tied embedding (GPT-2's wte) gets gradient from two sites: the LM head, whose backward
// runs FIRST and touches every row, and the token lookup, whose backward runs LAST and touches
// only the rows of the batch's tokens. Whole, the table's gradient is complete only when
// backward ends, so its exchange (89% of gpt2-tiny's parameters with GPT-2's 50257 tokens, 31% of
// gpt2-124M's) can overlap nothing. Split (set_tied_split(true)): the table's layer is reported
// ready right after the head's backward, so its buckets are exchanged (compressed or dense) while
// the blocks' backward runs; the lookup then writes its share into tied_lookup_grad() (the rows it
// touches, RowSparseGrad) instead of into the table's gradient, and the trainer averages those rows
// across ranks after every bucket and adds them to the averaged table gradient
// (comm/sparse_rows.h). The sum is the unsplit gradient up to float rounding: only the order
// of additions differs. What a compressor sends changes, though: only the head's share goes
// through it, and the lookup's rows travel exactly. Only the ordering of reports changes for
// the scheduler: the table's layer is reported first instead of last.
//
// Note [Eager head gradient]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~
// The fused CPU head (model key fused_head, layers/tied_head_loss.h) never keeps the logits,
// so its gradient needs them computed again, unless it is taken in the same pass as the
// loss. forward_for_backward() is the forward of a training step that WILL be followed by
// backward(): the head computes the loss and its gradients in one pass over each chunk of
// logits, adds the head's share to the tied table's (and BERT's decoder bias's) gradient
// right away and keeps its input gradient [B*T, C] for backward(), which starts from it.
// So until that backward the gradient buffer already holds the head's share: a second
// forward_for_backward() before backward() is refused (it would add it twice), so is a
// plain forward() (backward() would pair that share with the other batch's activations),
// and an optimizer must not read gradients in between. A plain forward() adds nothing, as with
// any other layer; a backward() after it runs the head's pass again, with its gradient (one
// more GEMM of the head). The trainer and bench_models use forward_for_backward(). What the
// scheduler sees is the same either way: the table's layer is reported in backward().
// The unfused head (fused_head=0, every CUDA store) and VGG take the cross-entropy's gradient
// in forward_for_backward() too: the loss layer's one fused pass gives the loss and the
// logits' gradient together (CrossEntropy::forward_backward), where a plain forward()
// followed by backward() runs it twice, and on the GPU waits for the loss twice per
// micro-batch. Only the logits' gradient is taken early; the gradient buffer is untouched
// until backward(). A language model's logits buffer then holds that gradient, so logits()
// (and score()) are refused until backward() (after which the buffer holds the gradient as
// it always did) or a plain forward(); VGG keeps a separate gradient.
//
// Ownership: the model owns its activations (one arena sized for the configured micro-batch,
// plus caches owned by the layers) and must not outlive the ParamStore it was bound to. A
// Batch holds views only: its buffers must stay alive and unchanged from forward() until
// backward() returns.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/buffer.h"
#include "core/param_store.h"
#include "core/tensor.h"
#include "layers/dropout.h"
#include "layers/row_sparse_grad.h"
#include "models/config.h"

namespace sparq {

// Targets equal to this are not counted in the loss (PyTorch's default ignore index).
inline constexpr std::int32_t kIgnoreIndex = -100;

// How many of `targets` (i32, on the host) are not kIgnoreIndex: the counted targets of a
// batch (Model::counted_target_count, and BatchStager for the staged copy).
std::int64_t count_counted_targets(const Tensor& targets);

// One micro-batch. Which fields are read depends on the architecture; B and T may be
// smaller than the configured micro_batch and seq_len (a short last batch, a short eval
// context) but not larger.
struct Batch {
  // GPT-2 and BERT.
  Tensor tokens;          // i32 [B, T], ids in [0, vocab_size)
  Tensor targets;         // i32 [B, T]: next token (GPT-2) or MLM label (BERT), or kIgnoreIndex
  Tensor attention_mask;  // u8 [B, T], BERT: 1 = real token, 0 = padding; empty = no padding
  Tensor token_types;     // i32 [B, T], BERT segment ids; empty = all zero
  Tensor nsp_labels;      // i32 [B], BERT with nsp: 1 = B follows A
  // VGG.
  Tensor images;  // f32 [B, C, H, W]
  Tensor labels;  // i32 [B], classes in [0, num_classes)
  // How many of `targets` are not kIgnoreIndex, when known; -1 when not. BatchStager counts
  // them on the host batch it copies, so that a device batch's count needs no read-back
  // (Model::counted_target_count).
  std::int64_t counted_targets = -1;
};

// What backward's callback receives right after a layer's backward finished: its gradients
// are final for this micro-batch. `ranges[i]` is tensors[i]'s range of the flat layout.
struct GradReady {
  int index = 0;  // into layers()
  const LayerParams* layer = nullptr;
  const std::vector<ParamRange>* ranges = nullptr;
};
using GradReadyFn = std::function<void(const GradReady&)>;

// Micro-batch dimensions the activations are allocated for.
struct RunShape {
  std::int64_t micro_batch = 1;
  std::int64_t seq_len = 0;  // language models only (<= n_ctx); ignored by VGG
  // Where the activations will live, for the memory figures before bind() (summary(), a dry
  // run, which binds a CUDA config's model to the host): some layers keep other things on a
  // GPU (attention's [B, H, T, T] probabilities, the logits instead of the fused head).
  Device device = Device::kCPU;
  // A dry run's model: bind() reserves the activations but allocates none (they are never
  // used), so a config whose one row of activations exceeds the host's memory still checks and
  // reports its estimate instead of aborting (review, 2026-12-07). Such a model must not run.
  bool plan_only = false;
};

class Model {
 public:
  virtual ~Model() = default;
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  const ModelConfig& config() const { return config_; }
  const RunShape& run_shape() const { return shape_; }

  // Registers every parameter spec in forward order.
  virtual void declare(ParamStore& store) const = 0;
  // Binds the layers to an allocated store and records each layer's tensor ranges. The model
  // runs in the store's ExecContext from then on: its activations are allocated on that
  // device and every layer dispatches there (Note [Layer dispatch], layers/param_set.h).
  // Once per model: the activation arena is allocated by the first bind (reserved only, under
  // RunShape::plan_only) and a second bind is refused (ActivationArena::allocate); a model
  // for another store is a new model.
  void bind(const ParamStore& store);
  bool bound() const { return store_ != nullptr; }

  // Runs the layers in order and returns the mean loss (LM: over counted target tokens;
  // BERT with nsp: MLM loss + NSP loss; VGG: over images). Caches what backward needs.
  virtual float forward(const Batch& batch) = 0;
  // forward() of a training step whose backward() follows before the next forward: lets the
  // fused head take its gradient in the loss's pass (Note [Eager head gradient]).
  float forward_for_backward(const Batch& batch);
  // forward() of an evaluation, whose score() follows. Both record that a forward ran, so a
  // model's forward() need not (the built-in ones call mark_forward() themselves, so that
  // forward() then backward() or score() also works when called directly).
  float forward_for_evaluation(const Batch& batch);
  // Differentiates the last forward. After each layer's backward, calls on_ready (if set)
  // with that layer: exactly once per layer, in reverse order of layers().
  void backward(const GradReadyFn& on_ready = {});

  // Layer -> parameter tensor names, forward order. Fixed at construction.
  const std::vector<LayerParams>& layers() const { return layers_; }

  // Output of the last forward: logits [B, T, padded_vocab] (LMs; columns at and past
  // vocab_size are never predicted) or [B, num_classes] (VGG). backward() consumes LM logits
  // (their buffer receives the logits' gradient), so read them before. A language model
  // with the fused CPU head (model key fused_head, the default) keeps no logits: this is a
  // fatal error there; score() and the loss do not need them.
  virtual Tensor logits() const = 0;
  // Whether this bound model runs the fused head (fused_head=1 and a CPU store; Note [Head
  // slot], lm_head_slot.h).
  bool fused_head() const { return fused_head_; }

  // What evaluation counts in one micro-batch.
  struct Score {
    std::int64_t count = 0;    // targets evaluated
    std::int64_t correct = 0;  // of them, where the argmax of the logits is the target
    // The part of the last forward's loss that is not over these targets (BERT's NSP loss),
    // so that forward loss - unscored_loss is the mean loss over exactly the counted targets.
    float unscored_loss = 0;
  };
  // Counts of the last forward(batch), with the same batch; before backward(), which consumes
  // LM logits. LMs count targets != kIgnoreIndex (BERT: the MLM targets, not NSP) and take the
  // argmax over the vocab_size real columns, never the padded ones; VGG counts every image.
  // Ties go to the lowest index and NaN is never the argmax (Note [Prediction rule],
  // layers/prediction_rule.h); a device model's argmax runs on the device. Written once
  // here, not per architecture: the models differ only in where the targets are and how
  // many logit columns are real, which config_ says.
  Score score(const Batch& batch) const;

  // Note [Token-weighted micro-batches] (train/data_parallel.h): whether the loss is a mean
  // over a number of targets that varies between training batches of one shape (BERT: the
  // masked positions), so that a step must weigh its micro-batches by their counts. False for
  // GPT-2 and VGG, whose every training target counts.
  virtual bool weighs_counted_targets() const { return false; }
  // How many of batch.targets are not kIgnoreIndex: batch.counted_targets when it is known
  // (a staged batch), else counted; a device batch without it has its targets copied to the
  // host first (synchronous).
  std::int64_t counted_target_count(const Batch& batch) const;
  // Multiplies the gradient of that mean (BERT: the MLM term, not NSP) in the next backward,
  // and in the fused head's gradient, which forward_for_backward() takes (Note [Eager head
  // gradient]): set it before that. 1 until set; models that weigh no targets ignore it.
  void set_target_grad_scale(float scale) { target_grad_scale_ = scale; }

  // Note [Tied embedding split]: the tied table's parameter name, empty for models without
  // one (or that do not support the split).
  virtual std::string tied_embedding() const { return {}; }
  // Splits the tied table's gradient from the next backward on (a model without one refuses).
  void set_tied_split(bool split);
  bool tied_split() const { return tied_split_; }
  // After a split backward: the lookup's share of the table's gradient.
  const RowSparseGrad& tied_lookup_grad() const { return tied_lookup_grad_; }
  RowSparseGrad& tied_lookup_grad() { return tied_lookup_grad_; }

  // Non-trainable state a checkpoint must save (BatchNorm running statistics).
  virtual std::vector<StateTensor> state() const { return {}; }

  // Train mode enables dropout and BatchNorm batch statistics; eval mode disables both.
  void set_training(bool training) { step_.training = training; }
  bool training() const { return step_.training; }
  // Dropout masks are a pure function of (seed, rank, step): set the step before forward
  // (the trainer sets one per micro-batch: step x accumulation + micro-batch index).
  void set_dropout_seed(std::uint64_t seed, std::uint32_t rank) {
    step_.seed = seed;
    step_.rank = rank;
  }
  void set_step(std::uint64_t step) { step_.step = step; }
  const DropoutStep& dropout_step() const { return step_; }

  // Bytes of activations, layer caches and layer workspaces held for the configured
  // micro-batch on the device the model is bound to (before bind: RunShape::device).
  virtual std::size_t activation_bytes() const = 0;
  // Parameters (elements) the model declares.
  std::int64_t param_count() const;
  // One line for the start-up log: name, parameters, activation memory, micro-batch.
  std::string summary() const;

 protected:
  Model(ModelConfig config, RunShape shape);
  // Binds the parameter layers, runs the parameter-free ones in store.context() and allocates
  // the activation arena on its device.
  virtual void bind_layers(const ParamStore& store) = 0;
  // The architecture's backward; must call ready(i) after layer i's backward.
  virtual void backward_layers() = 0;
  // Adds a layer to layers(); the constructor calls it in forward order.
  int add_layer(std::string name, std::vector<std::string> tensors);
  void ready(int layer_index);
  // Reports layer `layer_index` to the callback now, ahead of the reverse order, and makes
  // its later ready() advance the order without reporting it again (the split tied table).
  void report_early(int layer_index);
  const ParamStore& store() const;
  // The device activation_bytes() accounts for: CUDA when bound to a CUDA store, else
  // RunShape::device (a dry run binds a CUDA run's model to the host and plans for the GPU).
  Device activation_device() const {
    return bound() && store_->context().is_cuda() ? Device::kCUDA : shape_.device;
  }
  // Language models: checks batch.tokens and batch.targets (i32 [B, T] within the run
  // shape) and returns B and T.
  void check_token_batch(const Batch& batch, std::int64_t* b, std::int64_t* t) const;
  // A language model's logits() may be read: the model keeps them (fused_head=0) and they do
  // not hold their gradient (Note [Eager head gradient]). `rows` is the last forward's B.
  void check_logits_readable(std::int64_t rows) const;
  // Dropout's input gradient, or dy itself when dropout is the identity (eval mode or
  // p == 0), which saves a copy of the activation per dropout site.
  Tensor dropout_grad(const Dropout& drop, const Tensor& dy, const Tensor& scratch) const;
  // Note [Eager head gradient]: whether the running forward may add the head's gradient, and
  // the mark that it did (a second one before backward() is refused).
  bool backward_follows() const { return backward_follows_; }
  void mark_head_gradient_added();
  // The fused head's per-row predictions of the last forward (score() uses them), or null.
  virtual const std::vector<std::int32_t>* head_predictions() const { return nullptr; }
  // Counts `targets` (LM targets, VGG labels) and the predictions that hit them.
  Score score_predictions(const std::vector<std::int32_t>& predicted, const Tensor& targets) const;
  Score counted_targets(const Batch& batch) const;  // score() without unscored_loss

  // The last forward records what it ran (mark_forward): has_forward_, and its dropout step
  // and mode, which backward() differentiates. forward_for_backward() records the step too,
  // for a model (an embedder's) that sets has_forward_ itself.
  void mark_forward() {
    has_forward_ = true;
    forward_step_ = step_;
  }

  ModelConfig config_;
  RunShape shape_;
  DropoutStep step_;
  // Note [Backward differentiates its forward]: the step and mode of the last forward. A
  // set_step() or set_training() between forward and backward redrew or dropped the masks
  // in backward, and the gradients were of another function, without a word (review,
  // 2026-12-06); backward() runs with this step, then restores the current one. Empty when
  // no forward recorded one since the last backward (a model that only sets has_forward_,
  // called through forward()): backward() then runs with the current step, as before.
  std::optional<DropoutStep> forward_step_;
  bool has_forward_ = false;
  float unscored_loss_ = 0;  // Score::unscored_loss of the last forward (set by the model)
  // set_target_grad_scale(), read by the loss of a model that weighs its counted targets.
  float target_grad_scale_ = 1;
  bool fused_head_ = false;  // set by bind_layers
  bool head_gradient_added_ = false;
  bool backward_follows_ = false;  // inside forward_for_backward()
  // Note [Eager head gradient]: the last forward was forward_for_backward() and the loss
  // layer has written the logits' gradient; backward() starts from it. Set by each model's
  // head (every forward), cleared by backward().
  bool loss_gradient_taken_ = false;
  bool tied_split_ = false;
  RowSparseGrad tied_lookup_grad_;

 private:
  std::vector<LayerParams> layers_;
  std::vector<std::vector<ParamRange>> ranges_;
  const ParamStore* store_ = nullptr;
  const GradReadyFn* on_ready_ = nullptr;
  int next_ready_ = -1;
  int reported_early_ = -1;  // the layer report_early() reported in this backward
  // score()'s per-row predictions on the device (row_predictions), kept between evaluations.
  mutable Buffer prediction_scratch_;
};

// Builds the model a config describes, with activations for `shape`, and logs its
// summary() (parameters, activation memory). Bad shapes (seq_len outside [1, n_ctx],
// micro_batch < 1) are reported as errors naming the value.
Result<std::unique_ptr<Model>> make_model(const ModelConfig& config, RunShape shape);

// A bump allocator for a model's activations: slots are reserved at construction (in
// floats), backed by one buffer allocated at bind() on the context's device, and viewed with
// the shape of the current micro-batch.
class ActivationArena {
 public:
  int reserve(std::int64_t numel);
  void allocate(Device device);
  // A view of slot `slot` with `shape` on the arena's device; it must fit the reserved size.
  Tensor view(int slot, Shape shape) const;
  float* data(int slot) const;
  // Reserved bytes (what allocate() takes), known before allocation.
  std::size_t bytes() const { return static_cast<std::size_t>(total_) * sizeof(float); }
  // What reserve(numel) adds to bytes(); slot_bytes(slot) of a reserved slot, 0 for slot < 0.
  static std::size_t bytes_for(std::int64_t numel) {
    return static_cast<std::size_t>((numel + 63) / 64 * 64) * sizeof(float);
  }
  std::size_t slot_bytes(int slot) const { return slot < 0 ? 0 : bytes_for(sizes_.at(slot)); }

 private:
  std::vector<std::int64_t> offsets_, sizes_;
  std::int64_t total_ = 0;
  Buffer buffer_;
  Device device_ = Device::kCPU;
};

// Shared checks of batch fields; the messages name the model and the field.
void check_batch_tensor(const std::string& model, const char* field, const Tensor& t, DType dtype,
                        const Shape& shape);

}  // namespace sparq
