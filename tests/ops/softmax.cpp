// tests/ops/softmax.cpp: softmax and log_softmax through the op harness.
#include "pch.hpp"
#include "support/op_check.hpp"

using namespace oar;
using namespace oar::test;

namespace {
/// Plain-loop softmax (or log_softmax) of x along `axis`, in double.
Tensor naive_softmax(const Tensor& x, int axis, bool log) {
  const Shape& s = x.shape();
  if (axis < 0) axis += s.rank();
  int64_t pre = s.numel(0, axis), n = s[axis], post = s.numel(axis + 1, s.rank());
  std::vector<double> out(size_t(x.numel()));
  for (int64_t a = 0; a < pre; ++a)
    for (int64_t b = 0; b < post; ++b) {
      auto at = [&](int64_t j) { return (a * n + j) * post + b; };
      double m = -INFINITY;
      for (int64_t j = 0; j < n; ++j) m = std::max(m, x.get(at(j)));
      double sum = 0;
      for (int64_t j = 0; j < n; ++j) sum += std::exp(x.get(at(j)) - m);
      for (int64_t j = 0; j < n; ++j) out[size_t(at(j))] = log ? x.get(at(j)) - m - std::log(sum) : std::exp(x.get(at(j)) - m) / sum;
    }
  return Tensor::from<double>(out, s);
}
}  // namespace

TEST_CASE_TEMPLATE("softmax: forward matches a plain loop over the last dim", T, float, double) {
  for (int64_t n : {1, 3, 17, 64, 1000})
    for (int64_t d : {1, 7, 130}) {
      auto x = random_tensor<T>({n, d}, -5, 5, uint64_t(n * d));
      auto out = OpTest("softmax").input("X", x).unknown_batch().run();
      check_close(to_f64(out["Out"]), naive_softmax(x, -1, false), 1e-6, 1e-4, "softmax");
      auto lout = OpTest("log_softmax").input("X", x).unknown_batch().run();
      check_close(to_f64(lout["Out"]), naive_softmax(x, -1, true), 1e-5, 1e-4, "log_softmax");
    }
}

TEST_CASE_TEMPLATE("softmax: attr axis normalizes over an inner dim", T, float, double) {
  auto x = random_tensor<T>({3, 5, 4}, -3, 3, 11);
  for (int axis : {0, 1, 2, -2}) {
    auto out = OpTest("softmax").input("X", x).attr("axis", axis).run();
    check_close(to_f64(out["Out"]), naive_softmax(x, axis, false), 1e-6, 1e-4, "softmax axis");
    auto lout = OpTest("log_softmax").input("X", x).attr("axis", axis).run();
    check_close(to_f64(lout["Out"]), naive_softmax(x, axis, true), 1e-5, 1e-4, "log_softmax axis");
  }
}

TEST_CASE("softmax: huge logits stay finite (the max is subtracted)") {
  auto x = Tensor::from<float>({1000.f, 1001.f, 999.f, -1000.f, 0.f, 1000.f}, {2, 3});
  auto out = OpTest("softmax").input("X", x).run()["Out"];
  check_close(to_f64(out), naive_softmax(to_f64(x), -1, false), 1e-6, 1e-5, "softmax");
  auto lout = OpTest("log_softmax").input("X", x).run()["Out"];
  for (int64_t i = 0; i < lout.numel(); ++i) CHECK(std::isfinite(lout.get(i)));
  check_close(to_f64(lout), naive_softmax(to_f64(x), -1, true), 1e-4, 1e-5, "log_softmax");
}

TEST_CASE("softmax: grad matches finite differences (f64)") {
  OpTest("softmax").input("X", random_tensor<double>({3, 5}, -2, 2, 3)).check_grad({"X"}, {"Out"});
  OpTest("softmax").input("X", random_tensor<double>({2, 3, 4}, -2, 2, 4)).attr("axis", 1).check_grad({"X"}, {"Out"});
  OpTest("log_softmax").input("X", random_tensor<double>({4, 6}, -2, 2, 5)).check_grad({"X"}, {"Out"});
  OpTest("log_softmax").input("X", random_tensor<double>({2, 3, 4}, -2, 2, 6)).attr("axis", 0).check_grad({"X"}, {"Out"});
}

TEST_CASE("softmax: a loss weighted per element checks the grad beyond the mean") {
  // mean(softmax) has zero gradient; weight the seed through a product with a fixed tensor instead.
  auto x = random_tensor<double>({2, 4}, -1, 1, 8);
  Program p;
  Block& b = p.global_block();
  b.create_var("x", {.dtype = f64, .shape = Shape{2, 4}});
  Operator op("softmax");
  op.set_input("X", {"x"}).set_output("Out", {"y"});
  add_op(b, op);
  const OpDef& d = op_def("softmax");
  std::set<std::string> ng;
  GradContext gc(b.op(0), b, ng);
  for (auto& g : d.grad(gc)) {
    b.create_var("y@GRAD", {.dtype = f64, .shape = Shape{2, 4}});
    add_op(b, g);
  }
  auto w = random_tensor<double>({2, 4}, -1, 1, 9);
  Scope scope;
  Executor exe;
  auto outs = exe.run(p, scope, {{"x", x}, {"y@GRAD", w}}, {"x@GRAD"});
  // L = sum(w * softmax(x)); central differences per element
  auto loss = [&](const Tensor& xs) {
    auto y = OpTest("softmax").input("X", xs).run()["Out"];
    double l = 0;
    for (int64_t i = 0; i < y.numel(); ++i) l += w.get(i) * y.get(i);
    return l;
  };
  for (int64_t e = 0; e < x.numel(); ++e) {
    Tensor xp = x.clone(), xm = x.clone();
    xp.data<double>()[e] += 1e-5;
    xm.data<double>()[e] -= 1e-5;
    double numeric = (loss(xp) - loss(xm)) / 2e-5;
    CHECK(outs[0].get(e) == doctest::Approx(numeric).epsilon(1e-6));
  }
}

TEST_CASE("softmax: NaN and Inf inputs do not crash; other rows are unaffected") {
  auto x = Tensor::from<float>({NAN, 1.f, 2.f, INFINITY, 0.f, 1.f, -INFINITY, 0.f, 1.f, 0.5f, 0.25f, 0.f}, {4, 3});
  auto out = OpTest("softmax").input("X", x).run()["Out"];
  CHECK(std::isnan(out.get(0)));
  CHECK(out.get(6) == 0.0);  // exp(-inf) = 0
  double s = out.get(9) + out.get(10) + out.get(11);
  CHECK(s == doctest::Approx(1.0).epsilon(1e-6));
  auto lout = OpTest("log_softmax").input("X", x).run()["Out"];
  CHECK(std::isnan(lout.get(0)));
}

TEST_CASE("softmax: an empty batch gives an empty output") {
  auto out = OpTest("softmax").input("X", Tensor(Shape{0, 5}, f32)).run();
  CHECK(out["Out"].shape() == Shape{0, 5});
  auto lout = OpTest("log_softmax").input("X", Tensor(Shape{0, 5}, f64)).run();
  CHECK(lout["Out"].shape() == Shape{0, 5});
}

TEST_CASE("softmax: a bad axis or an integer X is an oar::Error naming the op") {
  auto msg = error_of([] { OpTest("softmax").input("X", random_tensor<float>({3, 4})).attr("axis", 2).build(); });
  test::check_contains(msg, {"softmax", "axis", "[3, 4]"});
  auto msg2 = error_of([] { OpTest("log_softmax").input("X", random_tensor<int32_t>({3, 4}, 0, 5)).build(); });
  CHECK(msg2.find("log_softmax") != std::string::npos);
}
