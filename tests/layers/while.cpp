// tests/layers/while.cpp: oar::while_loop (ops while / while_grad): a counted loop against a plain per-step
// reference, with the step count changing between runs of one prepared program; gradients of parameters inside
// and outside the body against finite differences (f64), for several step counts and for none; a cond nested in
// the body (its grad block nested in the loop's); the loop's errors; and a training step that allocates nothing
// once its shapes repeat.
#include "pch.hpp"
#include "support/heap.hpp"
#include "support/op_check.hpp"
#include "support/param_grad_check.hpp"

using namespace oar;
using oar::test::flag_of;

namespace {

LoDTensor scalar(double v) {
  Tensor t(Shape{1}, f64);
  t.data<double>()[0] = v;
  return LoDTensor(t);
}

/// The loop's condition without compare ops: n - i != 0, for a float counter i that counts up to n.
Var not_done(const Var& n, const Var& i) { return cast(elementwise_sub(n, i), boolean); }

/// h = tanh(x w_in); `steps` times h = tanh(h w_step + b_step) (a while loop counting i up to the fed n); with
/// `nested`, each step is instead h = cond(flag, tanh(h w_step + b_step)) + h; loss = mean(h w_out).
struct Net {
  bool nested;
  Var x = data("x", f64, {-1, 3});
  Var n = data("n", f64, {1});
  Var flag = data("flag", boolean, {1});
  Var h0 = fc(x, 4).act(oar::tanh).param("w_in").bias(false);
  Var i0 = fill_constant(Shape{1}, f64, 0);
  std::vector<Var> out;
  Var loss;
  explicit Net(bool nest = false) : nested(nest) {
    out = while_loop(
        {i0, h0}, [&](std::vector<Var> v) { return not_done(n, v[0]); },
        [&](std::vector<Var> v) {
          auto step = [&] { return fc(v[1], 4).act(oar::tanh).param("w_step").bias(ParamAttr("b_step")); };
          Var h = nested ? elementwise_add(cond(flag, step), v[1]) : step();
          return std::vector<Var>{scale(v[0], 1, 1), h};
        });
    loss = mean(fc(out[1], 1).param("w_out").bias(false));
  }
};

FeedMap feeds_for(int steps, bool flag = true) {
  return {{"x", LoDTensor(test::random_tensor<double>({5, 3}, -1, 1, 17))}, {"n", scalar(steps)}, {"flag", flag_of(flag)}};
}

/// The reference: the same computation in plain loops, from the model's parameters.
std::vector<double> reference_h(Model& model, const FeedMap& feeds, int steps, bool nested) {
  auto w_in = model.scope().tensor("w_in").to_vector<double>(), w_step = model.scope().tensor("w_step").to_vector<double>();
  auto b_step = model.scope().tensor("b_step").to_vector<double>();
  auto x = feeds.at("x").to_vector<double>();
  std::vector<double> h(5 * 4);
  for (int r = 0; r < 5; ++r)
    for (int j = 0; j < 4; ++j) {
      double s = 0;
      for (int k = 0; k < 3; ++k) s += x[size_t(r * 3 + k)] * w_in[size_t(k * 4 + j)];
      h[size_t(r * 4 + j)] = std::tanh(s);
    }
  for (int t = 0; t < steps; ++t) {
    std::vector<double> g(h.size());
    for (int r = 0; r < 5; ++r)
      for (int j = 0; j < 4; ++j) {
        double s = b_step[size_t(j)];
        for (int k = 0; k < 4; ++k) s += h[size_t(r * 4 + k)] * w_step[size_t(k * 4 + j)];
        g[size_t(r * 4 + j)] = std::tanh(s) + (nested ? h[size_t(r * 4 + j)] : 0);
      }
    h = g;
  }
  return h;
}

}  // namespace

TEST_CASE("while_loop: runs its body as long as the condition holds; the step count may change from run to run") {
  Tape tape;
  Net n;
  Model model(tape.program(n.loss));
  Evaluator ev(model, {n.out[0], n.out[1]});
  for (int steps : {3, 1, 5, 0, 2}) {
    CAPTURE(steps);
    const FeedMap feeds = feeds_for(steps);
    auto got = ev.forward(feeds);
    CHECK(got[0].get(0) == steps);  // the counter's final value
    auto want = reference_h(model, feeds, steps, false);
    auto h = got[1].to_vector<double>();
    REQUIRE(h.size() == want.size());
    for (size_t k = 0; k < h.size(); ++k) CHECK(h[k] == doctest::Approx(want[k]).epsilon(1e-12));
  }
}

TEST_CASE("while_loop: gradients of parameters inside and outside the body match finite differences (f64)") {
  for (int steps : {3, 1, 0}) {
    CAPTURE(steps);
    Tape tape;
    Net n;
    Model model(tape.program(n.loss));
    GradientMachine gm(model, n.loss);
    const FeedMap feeds = feeds_for(steps);
    gm.forward_backward(feeds);
    auto grads = gm.gradients();
    bool any = false;
    for (double g : grads.at("w_step").dense.to_vector<double>()) any = any || g != 0;
    CHECK(any == (steps > 0));  // the body's parameters get a gradient exactly when the body ran
    Evaluator ev(model, {n.loss});
    test::check_parameter_gradients(model, grads, ev, feeds, {"w_in", "w_step", "b_step", "w_out"});
  }
}

TEST_CASE("while_loop: a cond nested in the body: forward and gradients (its grad block runs inside the loop's)") {
  Tape tape;
  Net n(true);
  Model model(tape.program(n.loss));
  GradientMachine gm(model, n.loss);
  const FeedMap feeds = feeds_for(3);
  gm.forward_backward(feeds);
  Evaluator hv(model, {n.out[1]});
  auto h = hv.forward(feeds)[0].to_vector<double>();
  auto want = reference_h(model, feeds, 3, true);
  for (size_t k = 0; k < h.size(); ++k) CHECK(h[k] == doctest::Approx(want[k]).epsilon(1e-12));
  Evaluator ev(model, {n.loss});
  test::check_parameter_gradients(model, gm.gradients(), ev, feeds, {"w_in", "w_step", "b_step", "w_out"});
}

TEST_CASE("while_loop: a condition that never turns false is an oar::Error after max_iterations") {
  Tape tape;
  Var x = data("x", f64, {-1, 2});
  Var one = fill_constant(Shape{1}, f64, 1);
  auto out = while_loop(
      {one, x}, [&](std::vector<Var> v) { return cast(v[0], boolean); }, [&](std::vector<Var> v) { return std::vector<Var>{v[0], scale(v[1], 2)}; },
      LoopOptions{.max_iterations = 7});
  Model model(tape.program(out[1]));
  Evaluator ev(model, {out[1]});
  FeedMap feeds{{"x", LoDTensor(test::random_tensor<double>({2, 2}))}};
  CHECK_THROWS_WITH_AS(ev.forward(feeds), doctest::Contains("the loop ran 7 steps and its condition still holds"), Error);
}

TEST_CASE("while_loop: a body that returns the wrong loop variables, and a cond that is not one bool, are errors at the loop's line") {
  {
    Tape tape;
    Var x = data("x", f64, {-1, 2});
    Var i = fill_constant(Shape{1}, f64, 0);
    const int line = __LINE__ + 1;
    auto out = while_loop({i, x}, [&](std::vector<Var> v) { return cast(v[0], boolean); }, [&](std::vector<Var> v) { return std::vector<Var>{v[0]}; });
    try {
      tape.program(out[1]);
      FAIL("no error");
    } catch (const Error& e) {
      CHECK(std::string(e.what()).find("the body returned 1 loop variable(s) for 2") != std::string::npos);
      CHECK(e.origin().line == line);
    }
  }
  {
    Tape tape;
    Var x = data("x", f64, {-1, 2});
    auto out = while_loop({x}, [&](std::vector<Var> v) { return v[0]; }, [&](std::vector<Var> v) { return v; });
    CHECK_THROWS_WITH_AS(tape.program(out[0]), doctest::Contains("cond must return one bool"), Error);
  }
  {
    Tape tape;
    Var x = data("x", f64, {-1, 2});
    Var i = fill_constant(Shape{1}, f64, 0);
    auto out = while_loop({i, x}, [&](std::vector<Var> v) { return cast(v[0], boolean); },
                          [&](std::vector<Var> v) { return std::vector<Var>{v[0], cast(v[1], f32)}; });
    CHECK_THROWS_WITH_AS(tape.program(out[1]), doctest::Contains("loop variable 1 starts as f64"), Error);
  }
}

TEST_CASE("while_loop: a training step through a loop allocates nothing on the heap once its shapes repeat") {
  Tape tape;
  Net n;
  Model model(tape.program(n.loss));
  GradientMachine gm(model, n.loss);
  const FeedMap feeds = feeds_for(4);
  std::vector<LoDTensor> out;
  for (int i = 0; i < 3; ++i) gm.forward_backward(feeds, out);
  CHECK(oar_test::allocations_during([&] { for (int i = 0; i < 3; ++i) gm.forward_backward(feeds, out); }) == 0);
}

TEST_CASE("while_loop and cond: an is_sparse embedding in the body passes its rows out (summed over the steps); scattered they equal the dense gradient") {
  FeedMap feeds{{"ids", LoDTensor(Tensor::from<int64_t>({4, 1, 4}, {3, 1}))}, {"n", scalar(3)}, {"flag", flag_of(true)}};
  for (bool in_cond : {false, true}) {
    CAPTURE(in_cond);
    std::map<bool, Gradient> grads;
    for (bool sparse : {false, true}) {
      Tape tape;
      Var ids = data("ids", i64, {-1, 1});
      Var n = data("n", f64, {1});
      Var flag = data("flag", boolean, {1});
      Var h0 = fill_constant(Shape{3, 2}, f64, 0.1);
      Var i0 = fill_constant(Shape{1}, f64, 0);
      auto out = while_loop(
          {i0, h0}, [&](std::vector<Var> v) { return not_done(n, v[0]); },
          [&](std::vector<Var> v) {
            auto body = [&] {
              Var e = embedding(ids, {6, 2}).dtype(f64).sparse(sparse).param("table");
              return elementwise_add(e, fc(v[1], 2).act(oar::tanh).param("w").bias(false));
            };
            return std::vector<Var>{scale(v[0], 1, 1), in_cond ? cond(flag, body) : body()};
          });
      Var loss = mean(fc(out[1], 1).param("wo").bias(false));
      Model model(tape.program(loss));
      for (auto* p : {"table", "w", "wo"}) {
        auto& t = model.scope().tensor(p);
        t.copy_from(test::random_tensor<double>(t.shape(), -0.5, 0.5, 5));
      }
      GradientMachine gm(model, loss);
      gm.forward_backward(feeds);
      gm.forward_backward(feeds);  // twice: the sums start afresh each run
      grads[sparse] = gm.gradients().at("table");
    }
    REQUIRE(grads[true].sparse);
    CHECK(grads[true].rows.size() == 9);  // 3 ids at each of 3 steps
    auto a = grads[true].to_dense().to_vector<double>(), b = grads[false].dense.to_vector<double>();
    REQUIRE(a.size() == b.size());
    for (size_t k = 0; k < a.size(); ++k) CHECK(a[k] == doctest::Approx(b[k]).epsilon(1e-12));
  }
}

TEST_CASE("while_loop: an if_else nested in the body (two conditional blocks in the loop's step): parameter gradients match finite differences (f64)") {
  Tape tape;
  Var x = data("x", f64, {-1, 3});
  Var mask = data("mask", boolean, {-1, 1});
  Var n = data("n", f64, {1});
  Var h0 = fc(x, 4).act(oar::tanh).param("w_in").bias(false);
  auto out = while_loop(
      {fill_constant(Shape{1}, f64, 0), h0}, [&](std::vector<Var> v) { return not_done(n, v[0]); },
      [&](std::vector<Var> v) {
        Var h = if_else(
            mask, v[1], [&](Var a) { return fc(a, 4).act(oar::tanh).param("w_true").bias(false); },
            [&](Var a) { return fc(a, 4).act(oar::sigmoid).param("w_false").bias(ParamAttr("b_false")); });
        return std::vector<Var>{scale(v[0], 1, 1), h};
      });
  Var loss = mean(fc(out[1], 1).param("w_out").bias(false));
  Model model(tape.program(loss));
  GradientMachine gm(model, loss);
  Tensor m(Shape{5, 1}, boolean);
  for (int r = 0; r < 5; ++r) m.data<bool>()[r] = r % 2 == 0;
  FeedMap feeds{{"x", LoDTensor(test::random_tensor<double>({5, 3}, -1, 1, 23))}, {"mask", LoDTensor(m)}, {"n", scalar(3)}};
  gm.forward_backward(feeds);
  Evaluator ev(model, {loss});
  test::check_parameter_gradients(model, gm.gradients(), ev, feeds, {"w_in", "w_true", "w_false", "b_false", "w_out"});
}

TEST_CASE("while_loop: a body that writes a tensor array at its counter; the entries read after the loop; gradients match finite differences (f64)") {
  Tape tape;
  Var x = data("x", f64, {-1, 3});
  Var h0 = fc(x, 4).act(oar::tanh).param("w_in").bias(false);
  Var arr = create_array(f64);
  Var three = fill_constant(Shape{1}, i64, 3);
  auto out = while_loop(
      {fill_constant(Shape{1}, i64, 0), h0}, [&](std::vector<Var> v) { return less_than(v[0], three); },
      [&](std::vector<Var> v) {
        Var h = fc(v[1], 4).act(oar::tanh).param("w_step").bias(false);
        array_write(h, v[0], arr);
        return std::vector<Var>{increment(v[0]), h};
      });
  Var first = array_read(arr, fill_constant(Shape{1}, i64, 0));
  Var last = array_read(arr, fill_constant(Shape{1}, i64, 2));
  Var loss = elementwise_add(mean(fc(first, 1).param("w_a").bias(false)), mean(fc(last, 1).param("w_b").bias(false)));
  Model model(tape.program(loss));
  GradientMachine gm(model, loss);
  FeedMap feeds{{"x", LoDTensor(test::random_tensor<double>({5, 3}, -1, 1, 29))}};
  // Forward: entry t is h after t + 1 steps, and the loop's last h is entry 2.
  Evaluator fv(model, {first, last, out[1]});
  auto got = fv.forward(feeds);
  auto w_in = model.scope().tensor("w_in").to_vector<double>(), w_step = model.scope().tensor("w_step").to_vector<double>();
  auto xs = feeds.at("x").to_vector<double>();
  std::vector<double> h(20);
  for (int r = 0; r < 5; ++r)
    for (int j = 0; j < 4; ++j) {
      double s = 0;
      for (int k = 0; k < 3; ++k) s += xs[size_t(r * 3 + k)] * w_in[size_t(k * 4 + j)];
      h[size_t(r * 4 + j)] = std::tanh(s);
    }
  for (int t = 0; t < 3; ++t) {
    std::vector<double> g(20);
    for (int r = 0; r < 5; ++r)
      for (int j = 0; j < 4; ++j) {
        double s = 0;
        for (int k = 0; k < 4; ++k) s += h[size_t(r * 4 + k)] * w_step[size_t(k * 4 + j)];
        g[size_t(r * 4 + j)] = std::tanh(s);
      }
    h = g;
    if (t == 0)
      for (size_t k = 0; k < 20; ++k) CHECK(got[0].to_vector<double>()[k] == doctest::Approx(h[k]).epsilon(1e-12));
  }
  for (size_t k = 0; k < 20; ++k) {
    CHECK(got[1].to_vector<double>()[k] == doctest::Approx(h[k]).epsilon(1e-12));
    CHECK(got[2].to_vector<double>()[k] == doctest::Approx(h[k]).epsilon(1e-12));
  }
  gm.forward_backward(feeds);
  Evaluator ev(model, {loss});
  test::check_parameter_gradients(model, gm.gradients(), ev, feeds, {"w_in", "w_step", "w_a", "w_b"});
}
