// tests/layers/expr.cpp: expression templates on Var record one fused_elementwise op with the expected
// postfix string, compute the right values, and differentiate through append_backward.
#include "pch.hpp"
#include "support/op_check.hpp"

using namespace oar;

TEST_CASE("expr: an expression records ONE fused_elementwise op with its postfix form") {
  Tape tape;
  auto a = data("a", f32, {-1, 3});
  auto b = data("b", f32, {-1, 3});
  auto c = data("c", f32, {-1, 3});
  auto m = data("m", f32, {3});
  Var y = oar::relu(a * b + 2.0 * c - m);
  Topology t = tape.program(y);
  REQUIRE(t.main.global_block().num_ops() == 1);
  const Operator& op = t.main.global_block().op(0);
  CHECK(op.type() == "fused_elementwise");
  CHECK(op.attr<std::string>("expression") == "x0 x1 mul c:2 x2 mul add x3 sub relu");
  CHECK(op.input("X") == std::vector<std::string>{"a", "b", "c", "m"});
  CHECK(t.main.global_block().var(t.outputs[0]).shape() == Shape{-1, 3});

  Scope scope;
  Executor exe;
  auto ta = test::random_tensor<float>({4, 3}, -1, 1, 1), tb = test::random_tensor<float>({4, 3}, -1, 1, 2);
  auto tc = test::random_tensor<float>({4, 3}, -1, 1, 3), tm = test::random_tensor<float>({3}, -1, 1, 4);
  auto out = exe.run(t.main, scope, {{"a", ta}, {"b", tb}, {"c", tc}, {"m", tm}}, {t.outputs[0]});
  for (int64_t i = 0; i < 12; ++i) {
    float v = ta.data<float>()[i] * tb.data<float>()[i] + 2.0f * tc.data<float>()[i] - tm.data<float>()[i % 3];
    CHECK(out[0].data<float>()[i] == doctest::Approx(std::max(v, 0.0f)));
  }
}

TEST_CASE("expr: a Var used twice is one input; scalars on either side; unary minus, max, min") {
  Tape tape;
  auto x = data("x", f64, {-1, 2});
  Var y = max(x * x, 1.0) - -x / 4;
  Var z = min(3 - x, x);
  Topology t = tape.program({y, z});
  CHECK(t.main.global_block().op(0).attr<std::string>("expression") == "x0 x0 mul c:1 max x0 neg c:4 div sub");
  CHECK(t.main.global_block().op(0).input("X").size() == 1);
  CHECK(t.main.global_block().op(1).attr<std::string>("expression") == "c:3 x0 sub x0 min");
}

TEST_CASE("expr: gradients flow through a fused expression (x * x + x)") {
  Tape tape;
  auto x = data("x", f64, {-1, 3});
  auto h = fc(x, 3).bias(false).param(ParamAttr("w").with_initializer(Constant(0.5)));
  Var e = h * h + h;
  auto loss = mean(e);
  Topology t = tape.program(loss);
  Program p = t.main;
  auto pg = append_backward(p, t.outputs[0]);
  REQUIRE(pg.size() == 1);
  Scope scope;
  Executor exe;
  exe.run(t.startup, scope);
  auto xv = Tensor::from<double>({1, 2, 3, -1, 0, 1}, {2, 3});
  auto out = exe.run(p, scope, {{"x", xv}}, {"w@GRAD"});
  // h = x w with w all 0.5: h_ij = 0.5 * sum_k x_ik; dL/dh = (2h + 1) / 6; dL/dw_kj = sum_i x_ik dL/dh_ij
  double h0 = 0.5 * 6, h1 = 0.5 * 0;
  for (int k = 0; k < 3; ++k)
    for (int j = 0; j < 3; ++j) {
      double expect = xv.get(k) * (2 * h0 + 1) / 6 + xv.get(3 + k) * (2 * h1 + 1) / 6;
      CHECK(out[0].get(k * 3 + j) == doctest::Approx(expect));
    }
}

TEST_CASE("expr: softmax on an expression is refused with a clear message") {
  Tape tape;
  auto x = data("x", f32, {-1, 3});
  CHECK_THROWS_WITH_AS(softmax(x + 1), doctest::Contains("cannot be fused"), Error);
}
