// oar/api/gradient_machine.hpp: GradientMachine = {Model&, own gradients}: the model's program with its
// backward pass appended, run in a scope of its own, so several machines can compute gradients of one
// model at once (the concurrent optimizer).
#pragma once
#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <source_location>
#include <span>
#include <string>
#include <vector>

#include "oar/config.hpp"
#include "oar/api/model.hpp"
#include "oar/autodiff/backward.hpp"
#include "oar/optim/collective.hpp"
#include "oar/optim/mixed_precision.hpp"
#include "oar/runtime/executor.hpp"

namespace oar {

class Optimizer;

/// A gradient as GradientMachine::gradients() hands it out: a dense tensor, or, for the table of an
/// `is_sparse` embedding (lookup_table), only the rows the batch looked up (the SelectedRows its grad op
/// writes: the full gradient is zero elsewhere, and materializing it would cost a [vocabulary, D] tensor).
struct Gradient {
  bool sparse = false;
  /// The gradient, when !sparse.
  LoDTensor dense;
  /// Sparse: row i of `values` adds to row `rows[i]` of the gradient; a row looked up twice is listed twice.
  std::vector<int64_t> rows;
  /// Sparse: [rows.size(), D...].
  Tensor values;
  /// Sparse: the dense gradient's first dim (the table's vocabulary size).
  int64_t height = 0;

  /// The gradient as a dense tensor on the CPU: `dense`, or `values` scattered into zeros of [height, D...]
  /// with repeated rows added up.
  Tensor to_dense() const;
};

/// Gradients of a loss for every trainable parameter, and of any other variable on request:
///   oar::GradientMachine gm(model, cost); gm.forward_backward(feeds); oar::LoDTensor gx = gm.gradient(x);
class GradientMachine {
 public:
  /// Gradients of `loss` (a model output name) for every trainable parameter. `fetch` adds outputs to fetch
  /// on every forward_backward (metrics).
  GradientMachine(Model& model, std::string loss, std::vector<std::string> fetch = {}, uint64_t seed = 0);
  /// The same with tape Vars of the model's program.
  GradientMachine(Model& model, const Var& loss, std::span<const Var> fetch = {}, uint64_t seed = 0);
  GradientMachine(Model& model, const Var& loss, std::initializer_list<Var> fetch, uint64_t seed = 0)
      : GradientMachine(model, loss, std::span<const Var>(fetch), seed) {}
  GradientMachine(const GradientMachine&) = delete;
  GradientMachine& operator=(const GradientMachine&) = delete;
  ~GradientMachine();

  Model& model() const { return *model_; }
  const std::string& loss() const { return loss_; }
  /// The program that runs: the model's with its backward pass (and the gradients asked of gradient()).
  const Program& program() const { return *program_; }
  const std::vector<ParamGrad>& params_grads() const { return params_grads_; }
  /// Temporaries share buffers by a liveness plan (PreparedBlock::recycle_buffers): after forward_backward
  /// the gradients, the fetched outputs and the variables named here keep their values; other activations
  /// in scope() do not (name them here to read them).
  void keep(const std::vector<std::string>& names);
  void keep(std::span<const Var> vars);
  void keep(std::initializer_list<Var> vars) { keep(std::span<const Var>(vars)); }

  /// The scope holding this machine's activations and gradients. A new one replaces it when gradient()
  /// or track_gradient() first asks for a variable's gradient (the program is prepared again).
  Scope& scope() const { return *prepared_->local_scope(); }
  Executor& executor() { return exe_; }

  /// Forward and backward on one batch; returns the fetched values (loss first, then `fetch`).
  std::vector<LoDTensor> forward_backward(const FeedMap& feeds);
  /// The same into `out` (its storage reused: a step whose shapes repeat allocates nothing on the heap).
  void forward_backward(const FeedMap& feeds, std::vector<LoDTensor>& out);
  /// The same without waiting for the pass on a GPU (Executor::run with a fence): `arrived` is done once `out`
  /// holds the values. Gradients and parameters may be used by later runs (an update) at once: runs on a
  /// device follow each other there.
  void forward_backward(const FeedMap& feeds, std::vector<LoDTensor>& out, Fence& arrived);
  /// Forward and backward queued: the fetched values as a PendingFetch.
  PendingFetch forward_backward_async(const FeedMap& feeds);
  const std::vector<std::string>& fetch_names() const { return fetch_; }

  /// The gradient of the loss with respect to `x` from the last forward_backward: a parameter, an activation
  /// or a data input (data layers stop gradients, but their gradient is computed all the same when asked
  /// for; it flows no further, so the other gradients are unchanged). Shares the machine's storage until the
  /// next forward_backward. An is_sparse embedding's table comes back dense (Gradient::to_dense; gradients()
  /// gives its rows).
  ///
  /// The first request of a variable whose gradient the machine does not compute or keep yet prepares it to
  /// compute and keep it on every forward_backward from then on, and runs the last batch again (same feeds,
  /// same random numbers, persistables such as batch-norm statistics left as the first run left them) to
  /// produce it. That needs the parameters of that run: after an Optimizer update of this machine the first
  /// request is an oar::Error; call track_gradient(x) before forward_backward to need no second run at all.
  /// oar::Error naming the caller's line for an unknown or integer variable, or one the loss does not
  /// depend on. The gradient of a data layer made with `.stop_gradient(false)` is computed and kept anyway.
  LoDTensor gradient(const std::string& x, std::source_location loc = std::source_location::current());
  LoDTensor gradient(const Var& x, std::source_location loc = std::source_location::current());
  /// Makes every forward_backward from now on compute and keep `x`'s gradient (read with gradient(x)). When
  /// that changes the program it is prepared again, in a new scope: the last run's values are gone.
  void track_gradient(const std::string& x, std::source_location loc = std::source_location::current());
  void track_gradient(const Var& x, std::source_location loc = std::source_location::current());

  /// The gradient of each trainable parameter from the last forward_backward, by parameter name: dense, or
  /// the rows of an is_sparse embedding's table (Gradient).
  std::map<std::string, Gradient> gradients() const;

 private:
  friend class Optimizer;
  /// Appends the backward pass (with the gradients of `tracked_`) to the model's program and prepares it.
  void build();
  /// Hands the keep set (gradients, tracked gradients, fetches, keep()) to the buffer recycler.
  void apply_keep();
  /// Whether the program computes and keeps `x`'s gradient (a parameter's, a tracked one); false when it can
  /// once tracked; an oar::Error naming `x` when it has none (unknown, integer, not reaching the loss).
  bool has_gradient(const std::string& x, const Origin& where) const;
  /// Runs the last batch again with the current program (see gradient()).
  void rerun();
  /// forward_backward's body; with `arrived`, the fetches are queued (Executor::run with a fence).
  void run_pass(const FeedMap& feeds, std::vector<LoDTensor>& out, Fence* arrived);

  Model* model_;
  std::string loss_;
  Executor exe_;
  std::shared_ptr<const Program> program_;
  std::vector<ParamGrad> params_grads_;
  std::vector<std::string> fetch_;
  std::shared_ptr<PreparedBlock> prepared_;
  std::set<std::string> keep_;
  std::optional<optim::MixedPrecision> amp_;     // set by an Optimizer training in mixed precision (build() applies it)
  std::optional<optim::Collective> collective_;  // set by a data-parallel Optimizer (build() applies it)
  std::set<std::string> tracked_;  // variables (not parameters) whose gradients every run computes and keeps
  uint64_t plan_ = 0;              // bumped whenever the program is prepared again (a new scope)
  uint64_t ran_plan_ = 0;          // the plan of the last successful forward_backward
  bool ran_ = false;
  bool updated_ = false;           // an Optimizer changed the parameters since the last forward_backward
  FeedMap last_feeds_;
  uint64_t last_rng_ = 0;
};

}  // namespace oar

#if OAR_HEADER_ONLY
#include "oar/api/gradient_machine-inl.hpp"
#endif
