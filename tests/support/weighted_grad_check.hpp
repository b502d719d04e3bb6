// tests/support/weighted_grad_check.hpp: finite-difference gradient check with a random weighted loss
// L = sum_k sum(w_k * out_k), for ops whose outputs have a constant mean (softmax rows, normalized batches),
// where OpTest::check_grad's mean loss gives zero gradients and proves nothing.
#pragma once
#include "support/op_check.hpp"

namespace oar::test {

/// Runs `type` with `inputs` / `attrs`; compares the grad kernels' gradients of every slot in `check` with
/// central differences (delta) of L. Inputs must be f64; weights are uniform in [-1, 1) with a fixed seed.
inline void check_grad_weighted(const std::string& type, const std::vector<std::pair<std::string, Tensor>>& inputs,
                                const std::vector<std::pair<std::string, Attribute>>& attrs, const std::vector<std::string>& check,
                                const std::vector<std::string>& outputs, double delta = 1e-4, double max_relative_error = 1e-4) {
  auto make = [&](const std::string& slot, const Tensor* replaced) {
    OpTest t(type);
    for (auto& [s, x] : inputs) t.input(s, s == slot && replaced ? *replaced : x);
    for (auto& [k, v] : attrs) t.attr(k, v);
    return t;
  };
  // Weights over each output, from the forward shapes.
  auto fwd = make("", nullptr).run();
  std::map<std::string, Tensor> w;
  uint64_t seed = 101;
  for (auto& o : outputs) w[o] = random_tensor<double>(fwd.at(o).shape(), -1, 1, seed++);
  auto loss = [&](const std::map<std::string, LoDTensor>& outs) {
    double l = 0;
    for (auto& o : outputs)
      for (int64_t i = 0; i < outs.at(o).numel(); ++i) l += w[o].get(i) * outs.at(o).get(i);
    return l;
  };

  // Analytic: the op's grad ops with the weights as output gradients (zeros for the other float outputs).
  Program p = make("", nullptr).build();
  Block& b = p.global_block();
  const Operator op = b.op(0);
  std::set<std::string> ng;
  for (auto& s : op.inputs())
    if (std::find(check.begin(), check.end(), s.slot) == check.end())
      for (auto& n : s.args) ng.insert(n);
  FeedMap feeds;
  for (auto& [s, x] : inputs) feeds[op.input(s)[0]] = x;
  for (auto& s : op.outputs()) {
    const std::string& n = s.args[0];
    const LoDTensor& f = fwd.at(s.slot);
    b.create_var(grad_var_name(n), {.dtype = f.dtype(), .shape = f.shape()});
    if (!is_float(f.dtype())) continue;
    feeds[grad_var_name(n)] = w.count(s.slot) ? w[s.slot] : make_tensor<double>(f.shape(), [](int64_t) { return 0.0; });
  }
  GradContext gc(op, b, ng);
  for (auto& g : op_def(type).grad(gc)) add_op(b, g);
  std::vector<std::string> fetch;
  for (auto& s : check) fetch.push_back(grad_var_name(op.input(s)[0]));
  Scope scope;
  Executor exe;
  auto analytic = exe.run(p, scope, feeds, fetch);

  for (size_t k = 0; k < check.size(); ++k) {
    const Tensor* x = nullptr;
    for (auto& [s, t] : inputs)
      if (s == check[k]) x = &t;
    REQUIRE(x);
    REQUIRE_MESSAGE(analytic[k].shape() == x->shape(), type << ": " << check[k] << "@GRAD has shape " << analytic[k].shape().str());
    double worst = 0;
    int64_t at = 0;
    double worst_num = 0;
    for (int64_t e = 0; e < x->numel(); ++e) {
      Tensor xp = x->clone(), xm = x->clone();
      xp.data<double>()[e] += delta;
      xm.data<double>()[e] -= delta;
      double num = (loss(make(check[k], &xp).run()) - loss(make(check[k], &xm).run())) / (2 * delta);
      double an = analytic[k].get(e);
      double rel = std::abs(num - an) / std::max(1.0, std::abs(num));
      if (rel > worst || std::isnan(rel)) worst = rel, at = e, worst_num = num;
    }
    CHECK_MESSAGE(worst <= max_relative_error, type << ": gradient of " << check[k] << " off by " << worst << " at element " << at
                                                    << ": numeric " << worst_num << ", analytic " << analytic[k].get(at));
  }
}

}  // namespace oar::test
