// oar/api/gradient_machine-inl.hpp: the implementation of gradient_machine.hpp (included by it when header-only; compiled once into liboar otherwise).
#pragma once
#include "oar/api/gradient_machine.hpp"

namespace oar {

OAR_FUNC GradientMachine::GradientMachine(Model& model, std::string loss, std::vector<std::string> fetch, uint64_t seed)
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

OAR_FUNC GradientMachine::~GradientMachine() {
  if (prepared_ && prepared_->local_scope()) model_->scope().drop(prepared_->local_scope());
}

OAR_FUNC void GradientMachine::keep(const std::vector<std::string>& names) {
  keep_.insert(names.begin(), names.end());
  std::set<std::string> k = keep_;
  for (auto& pg : params_grads_) k.insert(pg.grad);
  k.insert(fetch_.begin(), fetch_.end());
  prepared_->recycle_buffers(std::move(k));
}

OAR_FUNC std::vector<LoDTensor> GradientMachine::forward_backward(const FeedMap& feeds) {
  return exe_.run(*prepared_, model_->scope(), feeds, fetch_);
}

OAR_FUNC void GradientMachine::forward_backward(const FeedMap& feeds, std::vector<LoDTensor>& out) {
  exe_.run(*prepared_, model_->scope(), feeds, fetch_, out);
}

OAR_FUNC std::map<std::string, LoDTensor> GradientMachine::gradients() const {
  std::map<std::string, LoDTensor> out;
  for (auto& [p, g] : params_grads_) out[p] = scope().tensor(g);
  return out;
}

}  // namespace oar
