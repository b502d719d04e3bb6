// oar/api/gradient_machine.hpp: GradientMachine = {Model&, own gradients}: the model's program with its
// backward pass appended, run in a scope of its own, so several machines can compute gradients of one
// model at once (the concurrent optimizer).
#pragma once
#include "oar/api/model.hpp"
#include "oar/autodiff/backward.hpp"

namespace oar {

class GradientMachine {
 public:
  /// Gradients of `loss` (a model output name) for every trainable parameter. `fetch` adds outputs to fetch
  /// on every forward_backward (metrics).
  GradientMachine(Model& model, std::string loss, std::vector<std::string> fetch = {}, uint64_t seed = 0)
      : model_(&model), loss_(std::move(loss)), exe_(model.place(), seed ? seed : model.seed() + 1000) {
    Program p = model.program();
    params_grads_ = append_backward(p, loss_);
    program_ = std::make_shared<const Program>(std::move(p));
    fetch_ = {loss_};
    for (auto& f : fetch)
      if (f != loss_) fetch_.push_back(f);
    prepared_ = exe_.prepare(program_, model.scope());
    keep({});
  }
  GradientMachine(const GradientMachine&) = delete;
  GradientMachine& operator=(const GradientMachine&) = delete;
  ~GradientMachine() {
    if (prepared_ && prepared_->local_scope()) model_->scope().drop(prepared_->local_scope());
  }

  Model& model() const { return *model_; }
  const std::string& loss() const { return loss_; }
  const Program& program() const { return *program_; }
  const std::vector<ParamGrad>& params_grads() const { return params_grads_; }
  /// Temporaries share buffers by a liveness plan (PreparedBlock::recycle_buffers): after forward_backward
  /// the gradients, the fetched outputs and the variables named here keep their values; other activations
  /// in scope() do not (name them here to read them).
  void keep(const std::vector<std::string>& names) {
    keep_.insert(names.begin(), names.end());
    std::set<std::string> k = keep_;
    for (auto& pg : params_grads_) k.insert(pg.grad);
    k.insert(fetch_.begin(), fetch_.end());
    prepared_->recycle_buffers(std::move(k));
  }

  /// The scope holding this machine's activations and gradients.
  Scope& scope() const { return *prepared_->local_scope(); }
  Executor& executor() { return exe_; }

  /// Forward and backward on one batch; returns the fetched values (loss first, then `fetch`).
  std::vector<LoDTensor> forward_backward(const FeedMap& feeds) { return exe_.run(*prepared_, model_->scope(), feeds, fetch_); }
  /// The same into `out` (its storage reused: a step whose shapes repeat allocates nothing on the heap).
  void forward_backward(const FeedMap& feeds, std::vector<LoDTensor>& out) { exe_.run(*prepared_, model_->scope(), feeds, fetch_, out); }
  const std::vector<std::string>& fetch_names() const { return fetch_; }

  /// The gradient of each trainable parameter from the last forward_backward.
  std::map<std::string, LoDTensor> gradients() const {
    std::map<std::string, LoDTensor> out;
    for (auto& [p, g] : params_grads_) out[p] = scope().tensor(g);
    return out;
  }

 private:
  Model* model_;
  std::string loss_;
  Executor exe_;
  std::shared_ptr<const Program> program_;
  std::vector<ParamGrad> params_grads_;
  std::vector<std::string> fetch_;
  std::shared_ptr<PreparedBlock> prepared_;
  std::set<std::string> keep_;
};

}  // namespace oar
