// tests/ops/sigmoid_cross_entropy_with_logits.cpp: the element-wise logistic loss through the op harness.
#include "pch.hpp"
#include "support/op_check.hpp"

using namespace oar;
using namespace oar::test;

namespace {
Tensor naive_sce(const Tensor& x, const Tensor& label, double ignore = -100) {
  std::vector<double> out(size_t(x.numel()));
  for (int64_t i = 0; i < x.numel(); ++i) {
    double v = x.get(i), l = label.get(i);
    // the textbook form, fine for |v| < 30 in double
    double sig = 1 / (1 + std::exp(-v));
    out[size_t(i)] = l == ignore ? 0.0 : -l * std::log(sig) - (1 - l) * std::log(1 - sig);
  }
  return Tensor::from<double>(out, x.shape());
}
}  // namespace

TEST_CASE_TEMPLATE("sigmoid_cross_entropy_with_logits: forward matches a plain loop", T, float, double) {
  for (int64_t n : {1, 3, 17, 64, 5000}) {
    auto x = random_tensor<T>({n, 3}, -8, 8, uint64_t(n));
    auto label = random_tensor<T>({n, 3}, 0, 1, uint64_t(n + 1));
    auto out = OpTest("sigmoid_cross_entropy_with_logits").input("X", x).input("Label", label).unknown_batch().run();
    check_close(to_f64(out["Out"]), naive_sce(x, label), 1e-5, 1e-4, "sigmoid_cross_entropy_with_logits");
  }
}

TEST_CASE("sigmoid_cross_entropy_with_logits: extreme logits stay finite and exact") {
  auto x = Tensor::from<float>({100.f, -100.f, 100.f, -100.f}, {2, 2});
  auto label = Tensor::from<float>({1.f, 0.f, 0.f, 1.f}, {2, 2});
  auto out = OpTest("sigmoid_cross_entropy_with_logits").input("X", x).input("Label", label).run()["Out"];
  CHECK(out.get(0) == doctest::Approx(0.0));
  CHECK(out.get(1) == doctest::Approx(0.0));
  CHECK(out.get(2) == doctest::Approx(100.0));
  CHECK(out.get(3) == doctest::Approx(100.0));
}

TEST_CASE("sigmoid_cross_entropy_with_logits: ignore_index gives 0 loss and 0 grad") {
  auto x = random_tensor<double>({3, 4}, -2, 2, 3);
  auto label = random_tensor<double>({3, 4}, 0, 1, 4);
  label.data<double>()[1] = -100;
  label.data<double>()[6] = -100;
  auto out = OpTest("sigmoid_cross_entropy_with_logits").input("X", x).input("Label", label).run()["Out"];
  CHECK(out.get(1) == 0.0);
  CHECK(out.get(6) == 0.0);
  check_close(out, naive_sce(x, label), 1e-12, 1e-10, "ignore");
  OpTest("sigmoid_cross_entropy_with_logits").input("X", x).input("Label", label).check_grad({"X"}, {"Out"});
  auto label2 = label.clone();
  label2.data<double>()[1] = 1;
  auto out2 = OpTest("sigmoid_cross_entropy_with_logits").input("X", x).input("Label", label2).attr("ignore_index", 1).run()["Out"];
  CHECK(out2.get(1) == 0.0);
}

TEST_CASE("sigmoid_cross_entropy_with_logits: grad matches finite differences (f64)") {
  OpTest("sigmoid_cross_entropy_with_logits").input("X", random_tensor<double>({4, 5}, -3, 3, 8)).input("Label", random_tensor<double>({4, 5}, 0, 1, 9))
      .check_grad({"X"}, {"Out"});
}

TEST_CASE("sigmoid_cross_entropy_with_logits: mismatched shapes are an oar::Error naming them") {
  auto msg = error_of([] {
    OpTest("sigmoid_cross_entropy_with_logits").input("X", random_tensor<float>({3, 4})).input("Label", random_tensor<float>({3, 5})).build();
  });
  test::check_contains(msg, {"sigmoid_cross_entropy_with_logits", "[3, 5]", "[3, 4]"});
}

TEST_CASE("sigmoid_cross_entropy_with_logits: NaN / Inf logits do not crash; empty batch works") {
  auto x = Tensor::from<float>({NAN, INFINITY, -INFINITY, 0.f}, {2, 2});
  auto out = OpTest("sigmoid_cross_entropy_with_logits").input("X", x).input("Label", Tensor::from<float>({1.f, 1.f, 0.f, 1.f}, {2, 2})).run()["Out"];
  CHECK(std::isnan(out.get(0)));
  CHECK(out.get(3) == doctest::Approx(std::log(2.0)));
  auto e = OpTest("sigmoid_cross_entropy_with_logits").input("X", Tensor(Shape{0, 4}, f32)).input("Label", Tensor(Shape{0, 4}, f32)).run();
  CHECK(e["Out"].shape() == Shape{0, 4});
}
