// oar/api/gradient_machine.hpp: GradientMachine = {Model&, own gradients}: the model's program with its
// backward pass appended, run in a scope of its own, so several machines can compute gradients of one
// model at once (the concurrent optimizer).
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "oar/config.hpp"
#include "oar/api/model.hpp"
#include "oar/autodiff/backward.hpp"
#include "oar/runtime/executor.hpp"

namespace oar {

class GradientMachine {
 public:
  /// Gradients of `loss` (a model output name) for every trainable parameter. `fetch` adds outputs to fetch
  /// on every forward_backward (metrics).
  GradientMachine(Model& model, std::string loss, std::vector<std::string> fetch = {}, uint64_t seed = 0);
  GradientMachine(const GradientMachine&) = delete;
  GradientMachine& operator=(const GradientMachine&) = delete;
  ~GradientMachine();

  Model& model() const { return *model_; }
  const std::string& loss() const { return loss_; }
  const Program& program() const { return *program_; }
  const std::vector<ParamGrad>& params_grads() const { return params_grads_; }
  /// Temporaries share buffers by a liveness plan (PreparedBlock::recycle_buffers): after forward_backward
  /// the gradients, the fetched outputs and the variables named here keep their values; other activations
  /// in scope() do not (name them here to read them).
  void keep(const std::vector<std::string>& names);

  /// The scope holding this machine's activations and gradients.
  Scope& scope() const { return *prepared_->local_scope(); }
  Executor& executor() { return exe_; }

  /// Forward and backward on one batch; returns the fetched values (loss first, then `fetch`).
  std::vector<LoDTensor> forward_backward(const FeedMap& feeds);
  /// The same into `out` (its storage reused: a step whose shapes repeat allocates nothing on the heap).
  void forward_backward(const FeedMap& feeds, std::vector<LoDTensor>& out);
  const std::vector<std::string>& fetch_names() const { return fetch_; }

  /// The gradient of each trainable parameter from the last forward_backward.
  std::map<std::string, LoDTensor> gradients() const;

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

#if OAR_HEADER_ONLY
#include "oar/api/gradient_machine-inl.hpp"
#endif
