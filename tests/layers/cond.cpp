// tests/layers/cond.cpp: backward through oar::cond (conditional_block_grad): gradients of a cond that runs and of
// one that does not against finite differences (f64), with parameters inside and outside the body, the program
// append_backward builds, and a training step that allocates nothing once its shapes repeat.
#include "pch.hpp"
#include "support/param_grad_check.hpp"
#include "support/heap.hpp"
#include "support/op_check.hpp"

#include "oar/ops/control_flow.hpp"

using namespace oar;
using oar::test::flag_of;

namespace {

/// h = tanh(x w_in) outside, y = cond(flag, sigmoid(h w_body + b_body)), loss = mean(y w_out) + mean(h): h is read
/// both inside the body and outside it, so its gradient is the sum of the cond's and the mean's.
struct Net {
  Var x = data("x", f64, {-1, 3});
  Var flag = data("flag", boolean, {1});
  Var h = fc(x, 4).act(oar::tanh).param("w_in").bias(false);
  Var y = cond(flag, [&] { return fc(h, 2).act(oar::sigmoid).param("w_body").bias(ParamAttr("b_body")); });
  Var loss = elementwise_add(mean(fc(y, 1).param("w_out").bias(false)), mean(h));
};

FeedMap feeds_with(bool flag) { return {{"x", LoDTensor(test::random_tensor<double>({5, 3}, -1, 1, 17))}, {"flag", flag_of(flag)}}; }

}  // namespace

TEST_CASE("cond: gradients through a cond that runs match finite differences (f64), parameters inside and outside the body") {
  Tape tape;
  Net n;
  Model model(tape.program(n.loss));
  GradientMachine gm(model, n.loss);
  const FeedMap feeds = feeds_with(true);
  gm.forward_backward(feeds);
  auto grads = gm.gradients();
  // The body's parameters get a gradient that is not zero: the grad block ran.
  for (auto* p : {"w_body", "b_body"}) {
    bool any = false;
    for (double g : grads.at(p).dense.to_vector<double>()) any = any || g != 0;
    CHECK_MESSAGE(any, p);
  }
  Evaluator ev(model);
  test::check_parameter_gradients(model, grads, ev, feeds, {"w_in", "w_body", "b_body", "w_out"});
}

TEST_CASE("cond: a cond that does not run gives its inputs zero gradients; the rest match finite differences (f64)") {
  Tape tape;
  Net n;
  Model model(tape.program(n.loss));
  GradientMachine gm(model, n.loss);
  // Fluid's rule: a cond that does not run leaves its output as it was, so a first run with the flag on gives y
  // a value; with it off, the loss reads that value and nothing in the body depends on the parameters.
  gm.forward_backward(feeds_with(true));
  const FeedMap feeds = feeds_with(false);
  gm.forward_backward(feeds);
  auto grads = gm.gradients();
  for (auto* p : {"w_body", "b_body"}) {
    CAPTURE(p);
    for (double g : grads.at(p).dense.to_vector<double>()) CHECK(g == 0.0);
  }
  Evaluator ev(model);
  ev.forward(feeds_with(true));  // the evaluator's y, as the machine's
  test::check_parameter_gradients(model, grads, ev, feeds, {"w_in", "w_body", "b_body", "w_out"});
}

TEST_CASE("cond: append_backward appends conditional_block_grad, whose grad block's parent is the body") {
  Tape tape;
  Net n;
  Topology t = tape.program(n.loss);
  Program& prog = t.main;
  append_backward(prog, t.outputs[0]);
  const Operator* g = nullptr;
  const Operator* f = nullptr;
  for (auto* op : prog.global_block().ops()) {
    if (op->type() == ops::ConditionalBlockGrad::type) g = op;
    if (op->type() == ops::ConditionalBlock::type) f = op;
  }
  REQUIRE(g);
  REQUIRE(f);
  const Block& gb = prog.block(g->sub_block());
  CHECK(gb.parent_idx() == f->sub_block());
  CHECK(g->input(ops::ConditionalBlockGrad::out_grad) == std::vector<std::string>{f->output(ops::ConditionalBlock::out)[0] + "@GRAD"});
  CHECK(g->input(ops::ConditionalBlockGrad::scope) == f->output(ops::ConditionalBlock::scope));
  // Every outer input of the body but the data gets a gradient.
  const auto& ins = f->input(ops::ConditionalBlock::input);
  const auto& outs = g->output(ops::ConditionalBlockGrad::input_grad);
  REQUIRE(outs.size() == ins.size());
  for (size_t i = 0; i < ins.size(); ++i) CHECK(outs[i].starts_with(ins[i] + "@GRAD"));
}

TEST_CASE("cond: a training step through a cond allocates nothing on the heap once its shapes repeat") {
  Tape tape;
  Net n;
  Model model(tape.program(n.loss));
  GradientMachine gm(model, n.loss);
  for (bool flag : {true, false}) {
    CAPTURE(flag);
    const FeedMap feeds = feeds_with(flag);
    std::vector<LoDTensor> out;
    for (int i = 0; i < 3; ++i) gm.forward_backward(feeds, out);  // the first runs prepare the blocks and size every buffer
    CHECK(oar_test::allocations_during([&] { for (int i = 0; i < 3; ++i) gm.forward_backward(feeds, out); }) == 0);
  }
}
