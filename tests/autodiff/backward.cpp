// tests/autodiff/backward.cpp: append_backward on whole networks against central finite differences of the loss
// (f64), gradient accumulation (@RENAME@ + sum) for variables used several times, stop_gradient / trainable /
// no_grad_set, fill_zeros_like for unused outputs, and the errors.
#include <random>

#include "pch.hpp"

using namespace oar;

namespace {

LoDTensor random_f64(Shape s, uint32_t seed, double lo = -1, double hi = 1) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> d(lo, hi);
  std::vector<double> v(size_t(s.numel()));
  for (auto& x : v) x = d(gen);
  return LoDTensor(Tensor::from(v, s));
}
LoDTensor labels_i64(std::vector<int64_t> v) { return LoDTensor(Tensor::from(v, Shape{int64_t(v.size()), 1})); }

std::vector<double> values(const LoDTensor& t) {
  std::vector<double> out(size_t(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) out[size_t(i)] = t.get(i);
  return out;
}

std::vector<std::string> op_types(const Program& p) {
  std::vector<std::string> out;
  for (auto* op : p.global_block().ops()) out.push_back(op->type());
  return out;
}
/// The parameters append_backward gave gradients to.
std::set<std::string> params_of(const std::vector<ParamGrad>& pg) {
  std::set<std::string> out;
  for (auto& [p, g] : pg) out.insert(p);
  return out;
}
size_t count(const std::vector<std::string>& v, const std::string& s) { return size_t(std::count(v.begin(), v.end(), s)); }

/// Runs a program with backward in a scope; finite differences by perturbing a parameter (in the scope) or a feed.
struct Harness {
  Program& prog;
  Scope scope;
  Executor exe;
  FeedMap feeds;
  std::string loss;

  Harness(Topology& t, FeedMap f, std::string l) : prog(t.main), feeds(std::move(f)), loss(std::move(l)) { exe.run(t.startup, scope); }

  std::vector<LoDTensor> run(const std::vector<std::string>& fetch) {
    auto r = exe.run(prog, scope, feeds, fetch);
    for (auto& t : r) t = LoDTensor(t.clone());  // fetches share the program's buffers
    return r;
  }
  double loss_value() { return run({loss})[0].get(0); }

  /// The storage of a parameter (scope) or a feed.
  double* target(const std::string& name, int64_t* n) {
    auto it = feeds.find(name);
    LoDTensor& t = it != feeds.end() ? it->second : scope.find(name)->tensor();
    *n = t.numel();
    return t.data<double>();
  }

  /// Compares `name@GRAD` (fetched after one run) with central differences of the loss, Fluid's rule: relative
  /// error |a - n| / max(|n|, 1 when |n| < 1e-3) at most `max_rel`. Returns the analytic gradient.
  std::vector<double> check(const std::string& name, double delta = 1e-6, double max_rel = 1e-6, const std::string& grad_name = "") {
    std::vector<double> analytic = values(run({grad_name.empty() ? grad_var_name(name) : grad_name})[0]);
    int64_t n = 0;
    double* p = target(name, &n);
    REQUIRE(size_t(n) == analytic.size());
    double worst = 0;
    for (int64_t i = 0; i < n; ++i) {
      double keep = p[i];
      p[i] = keep + delta;
      double up = loss_value();
      p[i] = keep - delta;
      double down = loss_value();
      p[i] = keep;
      double numeric = (up - down) / (2 * delta);
      double denom = std::abs(numeric) < 1e-3 ? 1.0 : std::abs(numeric);
      double rel = std::abs(analytic[size_t(i)] - numeric) / denom;
      worst = std::max(worst, rel);
      INFO(name, "[", i, "]: analytic ", analytic[size_t(i)], " numeric ", numeric);
      CHECK(rel <= max_rel);
    }
    CHECK(worst <= 0.005);  // Fluid's threshold, for the record
    return analytic;
  }
};

/// For loss = mean(h h + h) with h = fc(x [4, 4], 3): h@GRAD is (2 h + 1) / h's size, and every parameter's
/// gradient matches finite differences (x drawn with `seed`).
void check_square_plus_h(Topology& t, const std::string& hn, const std::vector<ParamGrad>& pg, uint32_t seed) {
  Harness hs(t, {{"x", random_f64({4, 4}, seed)}}, t.outputs[0]);
  auto r = hs.run({hn, hn + "@GRAD"});
  auto hv = values(r[0]), gv = values(r[1]);
  for (size_t i = 0; i < hv.size(); ++i) CHECK(gv[i] == doctest::Approx((2 * hv[i] + 1) / double(hv.size())).epsilon(1e-12));
  for (auto& [p, g] : pg) hs.check(p);
}

}  // namespace

TEST_CASE("backward: fc-tanh-fc-softmax-cross_entropy-mean matches finite differences of every parameter") {
  Tape tape;
  auto x = data("x", f64, {-1, 4});
  auto label = data("label", i64, {-1, 1});
  auto h = fc(x, 5).act(oar::tanh);
  auto prob = fc(h, 3).act(softmax);
  auto loss = mean(cross_entropy(prob, label));
  Topology t = tape.program(loss);
  auto pg = append_backward(t.main, t.outputs[0]);
  REQUIRE(pg.size() == 4);
  std::set<std::string> got;
  for (auto& [p, g] : pg) {
    CHECK(g == p + "@GRAD");
    CHECK(t.main.global_block().var(g).shape() == t.main.global_block().var(p).shape());
    CHECK(t.main.global_block().var(g).dtype() == f64);
    got.insert(p);
  }
  CHECK(got == std::set<std::string>{"fc_0.w_0", "fc_0.b_0", "fc_1.w_0", "fc_1.b_0"});
  // The seed: fill_constant 1.0 into loss@GRAD, right after the 8 forward ops.
  auto types = op_types(t.main);
  REQUIRE(types.size() > 8);
  CHECK(types[8] == "fill_constant");
  CHECK(t.main.global_block().op(8).output("Out") == std::vector<std::string>{t.outputs[0] + "@GRAD"});
  CHECK(t.main.global_block().op(8).attr<float>("value") == 1.0f);
  CHECK(count(types, "mul_grad") == 2);
  CHECK(count(types, "tanh_grad") == 1);
  CHECK(count(types, "softmax_grad") == 1);
  CHECK(count(types, "cross_entropy_grad") == 1);
  CHECK_FALSE(t.main.global_block().has_var("label@GRAD"));

  Harness hs(t, {{"x", random_f64({6, 4}, 1)}, {"label", labels_i64({0, 2, 1, 1, 0, 2})}}, t.outputs[0]);
  for (auto& [p, g] : pg) hs.check(p);
}

TEST_CASE("backward: an activation whose derivative reads only Out gets no X in its grad op (X may die after the forward)") {
  Tape tape;
  auto x = data("x", f64, {-1, 4});
  auto h = fc(fc(fc(x, 5).act(relu), 5).act(oar::tanh), 5).act(softplus);
  Topology t = tape.program(mean(h));
  append_backward(t.main, t.outputs[0]);
  int seen = 0;
  for (auto* op : t.main.global_block().ops()) {
    if (op->type() != "relu_grad" && op->type() != "tanh_grad" && op->type() != "softplus_grad") continue;
    CAPTURE(op->type());
    ++seen;
    CHECK(op->input("Out").size() == 1);
    CHECK(op->input("Out@GRAD").size() == 1);
    CHECK(op->input("X").size() == (op->type() == "softplus_grad" ? 1u : 0u));  // softplus' derivative reads x
  }
  CHECK(seen == 3);
}

TEST_CASE("backward: fc-tanh-fc-softmax_with_cross_entropy-mean matches finite differences") {
  Tape tape;
  auto x = data("x", f64, {-1, 4});
  auto label = data("label", i64, {-1, 1});
  auto h = fc(x, 5).act(oar::tanh);
  auto logits = fc(h, 3);
  auto loss = mean(softmax_with_cross_entropy(logits, label));
  Topology t = tape.program(loss);
  auto pg = append_backward(t.main, t.outputs[0]);
  REQUIRE(pg.size() == 4);
  CHECK(count(op_types(t.main), "softmax_with_cross_entropy_grad") == 1);
  Harness hs(t, {{"x", random_f64({6, 4}, 1)}, {"label", labels_i64({0, 2, 1, 1, 0, 2})}}, t.outputs[0]);
  for (auto& [p, g] : pg) hs.check(p);
}

TEST_CASE("backward: square_error_cost against an f64 label, loss through mean, matches finite differences") {
  Tape tape;
  auto x = data("x", f64, {-1, 4});
  auto y = data("y", f64, {-1, 3});
  auto pred = fc(fc(x, 5).act(oar::tanh), 3);
  auto loss = mean(square_error_cost(pred, y));
  Topology t = tape.program(loss);
  auto pg = append_backward(t.main, t.outputs[0]);
  REQUIRE(pg.size() == 4);
  CHECK_FALSE(t.main.global_block().has_var("y@GRAD"));  // data: stop_gradient
  CHECK_FALSE(t.main.global_block().has_var("x@GRAD"));
  Harness hs(t, {{"x", random_f64({5, 4}, 2)}, {"y", random_f64({5, 3}, 3)}}, t.outputs[0]);
  for (auto& [p, g] : pg) hs.check(p);
  // The Fluid setting (delta 0.005, 0.005 relative) passes too.
  hs.check("fc_0.w_0", 0.005, 0.005);
}

TEST_CASE("backward: a hidden variable feeding two fc layers gets the sum of both partial gradients") {
  Tape tape;
  auto x = data("x", f64, {-1, 4});
  auto y = data("y", f64, {-1, 3});
  auto h = fc(x, 5).act(oar::tanh);
  auto s = elementwise_add(fc(h, 3).act(oar::sigmoid), fc(h, 3));
  auto loss = mean(square_error_cost(s, y));
  Topology t = tape.program(loss);
  std::string hn = t.name_of(h);
  auto pg = append_backward(t.main, t.outputs[0]);
  CHECK(pg.size() == 6);
  const Block& b = t.main.global_block();
  CHECK(b.has_var(hn + "@GRAD@RENAME@0"));
  CHECK(b.has_var(hn + "@GRAD@RENAME@1"));
  CHECK_FALSE(b.has_var(hn + "@GRAD@RENAME@2"));
  // One sum writes h@GRAD from the two partials, before tanh_grad reads it.
  int sum_at = -1, tanh_grad_at = -1;
  for (size_t i = 0; i < b.num_ops(); ++i) {
    const Operator& op = b.op(i);
    if (op.type() == "sum" && op.output("Out")[0] == hn + "@GRAD") {
      CHECK(sum_at == -1);
      sum_at = int(i);
      CHECK(op.input("X") == std::vector<std::string>{hn + "@GRAD@RENAME@0", hn + "@GRAD@RENAME@1"});
    }
    if (op.type() == "tanh_grad") tanh_grad_at = int(i);
  }
  REQUIRE(sum_at >= 0);
  CHECK(sum_at < tanh_grad_at);

  Harness hs(t, {{"x", random_f64({4, 4}, 4)}, {"y", random_f64({4, 3}, 5)}}, t.outputs[0]);
  for (auto& [p, g] : pg) hs.check(p);
  // h@GRAD is the sum of its partials.
  auto r = hs.run({hn + "@GRAD", hn + "@GRAD@RENAME@0", hn + "@GRAD@RENAME@1"});
  auto total = values(r[0]), a = values(r[1]), c = values(r[2]);
  for (size_t i = 0; i < total.size(); ++i) CHECK(total[i] == doctest::Approx(a[i] + c[i]).epsilon(1e-12));
}

TEST_CASE("backward: a data variable with stop_gradient(false) feeding two layers gets a summed gradient") {
  Tape tape;
  auto x = data("x", f64, {-1, 4}).stop_gradient(false);
  auto y = data("y", f64, {-1, 3});
  auto s = elementwise_add(fc(x, 3).act(oar::tanh), fc(x, 3));
  auto loss = mean(square_error_cost(s, y));
  Topology t = tape.program(loss);
  auto pg = append_backward(t.main, t.outputs[0]);
  CHECK(pg.size() == 4);  // x is no parameter
  CHECK(t.main.global_block().has_var("x@GRAD@RENAME@1"));
  CHECK_FALSE(t.main.global_block().has_var("y@GRAD"));
  Harness hs(t, {{"x", random_f64({3, 4}, 6)}, {"y", random_f64({3, 3}, 7)}}, t.outputs[0]);
  hs.check("x");
  for (auto& [p, g] : pg) hs.check(p);
}

TEST_CASE("backward: a parameter shared by name between two fc layers gets the sum of both uses") {
  Tape tape;
  auto x = data("x", f64, {-1, 4});
  auto y = data("y", f64, {-1, 4});
  auto h1 = fc(x, 4).param(ParamAttr("w")).bias(false).act(oar::tanh);
  auto h2 = fc(h1, 4).param(ParamAttr("w")).bias(false);
  auto loss = mean(square_error_cost(h2, y));
  Topology t = tape.program(loss);
  auto pg = append_backward(t.main, t.outputs[0]);
  REQUIRE(pg.size() == 1);
  CHECK(pg[0].param == "w");
  CHECK(pg[0].grad == "w@GRAD");
  const Block& b = t.main.global_block();
  CHECK(b.has_var("w@GRAD@RENAME@0"));
  CHECK(b.has_var("w@GRAD@RENAME@1"));
  bool summed = false;
  for (auto* op : b.ops())
    if (op->type() == "sum" && op->output("Out")[0] == "w@GRAD") {
      summed = true;
      CHECK(op->input("X").size() == 2);
    }
  CHECK(summed);
  Harness hs(t, {{"x", random_f64({5, 4}, 8)}, {"y", random_f64({5, 4}, 9)}}, t.outputs[0]);
  hs.check("w");
  // The partials differ from the total (both uses contribute).
  auto r = hs.run({"w@GRAD", "w@GRAD@RENAME@0", "w@GRAD@RENAME@1"});
  auto total = values(r[0]), a = values(r[1]), c = values(r[2]);
  double diff = 0;
  for (size_t i = 0; i < total.size(); ++i) {
    CHECK(total[i] == doctest::Approx(a[i] + c[i]).epsilon(1e-12));
    diff += std::abs(a[i]) + std::abs(c[i]);
  }
  CHECK(diff > 0);
}

TEST_CASE("backward: x * x + x as one fused_elementwise op, and elementwise_mul(h, h) writing h@GRAD twice") {
  SUBCASE("fused expression: d/dh (h h + h) = 2 h + 1") {
    Tape tape;
    auto x = data("x", f64, {-1, 4});
    auto h = fc(x, 3);
    Var e = h * h + h;
    auto loss = mean(e);
    Topology t = tape.program(loss);
    std::string hn = t.name_of(h);
    auto pg = append_backward(t.main, t.outputs[0]);
    auto types = op_types(t.main);
    CHECK(count(types, "fused_elementwise") == 1);
    CHECK(count(types, "fused_elementwise_grad") == 1);
    check_square_plus_h(t, hn, pg, 10);
  }
  SUBCASE("elementwise_mul(h, h) + h: three partials of h@GRAD, two from one op") {
    Tape tape;
    auto x = data("x", f64, {-1, 4});
    auto h = fc(x, 3);
    auto loss = mean(elementwise_add(elementwise_mul(h, h), h));
    Topology t = tape.program(loss);
    std::string hn = t.name_of(h);
    auto pg = append_backward(t.main, t.outputs[0]);
    const Block& b = t.main.global_block();
    for (int k = 0; k < 3; ++k) CHECK(b.has_var(hn + "@GRAD@RENAME@" + std::to_string(k)));
    for (auto* op : b.ops())
      if (op->type() == "elementwise_mul_grad") CHECK(op->output("X@GRAD")[0] != op->output("Y@GRAD")[0]);
    check_square_plus_h(t, hn, pg, 11);
  }
  SUBCASE("mean(elementwise_mul(h, h)): the first writer of h@GRAD writes it twice") {
    Tape tape;
    auto x = data("x", f64, {-1, 4});
    auto h = fc(x, 3);
    auto loss = mean(elementwise_mul(h, h));
    Topology t = tape.program(loss);
    std::string hn = t.name_of(h);
    auto pg = append_backward(t.main, t.outputs[0]);
    const Block& b = t.main.global_block();
    CHECK(b.has_var(hn + "@GRAD@RENAME@0"));
    CHECK(b.has_var(hn + "@GRAD@RENAME@1"));
    Harness hs(t, {{"x", random_f64({4, 4}, 12)}}, t.outputs[0]);
    auto r = hs.run({hn, hn + "@GRAD"});
    auto hv = values(r[0]), gv = values(r[1]);
    for (size_t i = 0; i < hv.size(); ++i) CHECK(gv[i] == doctest::Approx(2 * hv[i] / double(hv.size())).epsilon(1e-12));
    for (auto& [p, g] : pg) hs.check(p);
  }
}

TEST_CASE("backward: stop_gradient, non-trainable parameters and no_grad_set") {
  SUBCASE("a non-trainable parameter gets no gradient, but the gradient still flows past it") {
    Tape tape;
    auto x = data("x", f64, {-1, 4});
    auto y = data("y", f64, {-1, 3});
    auto h = fc(x, 5).act(oar::tanh);
    auto out = fc(h, 3).param(ParamAttr().with_trainable(false));
    auto loss = mean(square_error_cost(out, y));
    Topology t = tape.program(loss);
    auto pg = append_backward(t.main, t.outputs[0]);
    CHECK(params_of(pg) == std::set<std::string>{"fc_0.w_0", "fc_0.b_0", "fc_1.b_0"});
    CHECK_FALSE(t.main.global_block().has_var("fc_1.w_0@GRAD"));
    CHECK_FALSE(t.main.global_block().has_var("x@GRAD"));
    Harness hs(t, {{"x", random_f64({4, 4}, 13)}, {"y", random_f64({4, 3}, 14)}}, t.outputs[0]);
    for (auto& [p, g] : pg) hs.check(p);
  }
  SUBCASE("a name in no_grad_set blocks the flow: the ops upstream only through it get no grad op") {
    Tape tape;
    auto x = data("x", f64, {-1, 4});
    auto y = data("y", f64, {-1, 3});
    auto h = fc(x, 5).act(oar::tanh);
    auto out = fc(h, 3);
    auto loss = mean(square_error_cost(out, y));
    Topology t = tape.program(loss);
    std::string hn = t.name_of(h);
    auto pg = append_backward(t.main, t.outputs[0], {hn});
    CHECK(params_of(pg) == std::set<std::string>{"fc_1.w_0", "fc_1.b_0"});
    auto types = op_types(t.main);
    CHECK(count(types, "tanh_grad") == 0);
    CHECK(count(types, "mul_grad") == 1);
    CHECK(count(types, "elementwise_add_grad") == 1);
    const Block& b = t.main.global_block();
    CHECK_FALSE(b.has_var(hn + "@GRAD"));
    CHECK_FALSE(b.has_var("fc_0.w_0@GRAD"));
    CHECK_FALSE(b.has_var("fc_0.b_0@GRAD"));
    for (auto* op : b.ops())
      if (op->type() == "mul_grad") CHECK((op->output("X@GRAD").empty() || op->output("X@GRAD")[0] == kEmptyVarName));
    Harness hs(t, {{"x", random_f64({4, 4}, 15)}, {"y", random_f64({4, 3}, 16)}}, t.outputs[0]);
    for (auto& [p, g] : pg) hs.check(p);
  }
  SUBCASE("a branch of the loss that is stop_gradient contributes no grad ops") {
    Tape tape;
    auto x = data("x", f64, {-1, 4});
    auto a = fc(x, 3).act(oar::tanh);
    auto frozen = fc(x, 3).stop_gradient();
    auto loss = mean(elementwise_add(a, frozen));
    Topology t = tape.program(loss);
    auto pg = append_backward(t.main, t.outputs[0]);
    CHECK(params_of(pg) == std::set<std::string>{"fc_0.w_0", "fc_0.b_0"});
    CHECK(count(op_types(t.main), "mul_grad") == 1);
    Harness hs(t, {{"x", random_f64({3, 4}, 17)}}, t.outputs[0]);
    for (auto& [p, g] : pg) hs.check(p);
  }
}

TEST_CASE("backward: an output nobody uses gets fill_zeros_like (split, only part 0 reaches the loss)") {
  Tape tape;
  auto x = data("x", f64, {-1, 4});
  auto h = fc(x, 6);
  auto parts = split(h, 2, 1);
  auto l = mean(oar::tanh(parts[0]));
  Topology t = tape.program(l);
  std::string p1 = t.name_of(parts[1]);
  auto pg = append_backward(t.main, t.outputs[0]);
  const Block& b = t.main.global_block();
  int zeros_at = -1, concat_at = -1;
  for (size_t i = 0; i < b.num_ops(); ++i) {
    const Operator& op = b.op(i);
    if (op.type() == "fill_zeros_like") {
      zeros_at = int(i);
      CHECK(op.input("X") == std::vector<std::string>{p1});
      CHECK(op.output("Out") == std::vector<std::string>{p1 + "@GRAD"});
    }
    if (op.type() == "concat") concat_at = int(i);  // split's grad
  }
  REQUIRE(zeros_at >= 0);
  CHECK(zeros_at < concat_at);
  Harness hs(t, {{"x", random_f64({5, 4}, 18)}}, t.outputs[0]);
  for (auto& [p, g] : pg) hs.check(p);
  // The bias columns of the unused half get exactly zero.
  auto gb = values(hs.run({"fc_0.b_0@GRAD"})[0]);
  REQUIRE(gb.size() == 6);
  for (size_t i = 0; i < 3; ++i) CHECK(gb[i] != 0);
  for (size_t i = 3; i < 6; ++i) CHECK(gb[i] == 0);
}

TEST_CASE("backward: errors name the problem") {
  Tape tape;
  auto x = data("x", f64, {-1, 4});
  auto h = fc(x, 5);
  auto top = topk(h, 2)[0];
  auto bad = mean(top);
  auto good = mean(h);
  SUBCASE("a loss with more than one element") {
    Topology t = tape.program(h);
    CHECK_THROWS_WITH_AS(append_backward(t.main, t.name_of(h)), doctest::Contains("must have one element"), Error);
    CHECK_THROWS_WITH_AS(append_backward(t.main, t.name_of(h)), doctest::Contains("reduce it"), Error);
  }
  SUBCASE("an unknown loss name") {
    Topology t = tape.program(good);
    CHECK_THROWS_WITH_AS(append_backward(t.main, "no_such_loss"), doctest::Contains("no variable 'no_such_loss'"), Error);
  }
  SUBCASE("an op without a gradient on the path") {
    Topology t = tape.program(bad);
    CHECK_THROWS_WITH_AS(append_backward(t.main, t.outputs[0]), doctest::Contains("'top_k' has no gradient"), Error);
  }
  SUBCASE("a loss no op computes") {
    Topology t = tape.program(good);
    t.main.global_block().create_var("orphan", {.dtype = f64, .shape = Shape{1}});
    CHECK_THROWS_WITH_AS(append_backward(t.main, "orphan"), doctest::Contains("no op computes the loss 'orphan'"), Error);
  }
}
