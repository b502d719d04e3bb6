// tests/ops/cross_entropy.cpp: cross_entropy (hard and soft labels, ignore_index) through the op harness.
#include "pch.hpp"
#include "support/op_check.hpp"

using namespace oar;
using namespace oar::test;

namespace {
Tensor naive_ce(const Tensor& x, const Tensor& label, bool soft, int64_t ignore = -100) {
  int64_t d = x.dim(x.rank() - 1), n = x.numel() / std::max<int64_t>(d, 1);
  std::vector<double> y(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    if (soft) {
      double s = 0;
      for (int64_t j = 0; j < d; ++j) s -= label.get(i * d + j) * std::log(x.get(i * d + j));
      y[size_t(i)] = s;
    } else {
      int64_t l = int64_t(label.get(i));
      y[size_t(i)] = l == ignore ? 0.0 : -std::log(x.get(i * d + l));
    }
  }
  Shape s = x.shape();
  s[s.rank() - 1] = 1;
  return Tensor::from<double>(y, s);
}
}  // namespace

TEST_CASE_TEMPLATE("cross_entropy: hard labels match a plain loop", T, float, double) {
  for (int64_t n : {1, 3, 17, 64, 2000})
    for (int64_t d : {1, 10}) {
      auto x = random_tensor<T>({n, d}, 0.1, 1, uint64_t(n + d));
      auto label = random_tensor<int64_t>({n, 1}, 0, double(d), uint64_t(n * 7));
      auto out = OpTest("cross_entropy").input("X", x).input("Label", label).unknown_batch().run();
      check_close(to_f64(out["Y"]), naive_ce(x, label, false), 1e-6, 1e-5, "cross_entropy hard");
    }
}

TEST_CASE_TEMPLATE("cross_entropy: soft labels match a plain loop", T, float, double) {
  for (int64_t n : {1, 3, 17, 64, 1000}) {
    auto x = random_tensor<T>({n, 12}, 0.1, 1, uint64_t(n));
    auto label = soft_labels<T>(n, 12, uint64_t(n + 5));
    auto out = OpTest("cross_entropy").input("X", x).input("Label", label).attr("soft_label", true).unknown_batch().run();
    check_close(to_f64(out["Y"]), naive_ce(x, label, true), 1e-6, 1e-5, "cross_entropy soft");
  }
}

TEST_CASE("cross_entropy: rank-3 X keeps its leading dims, i32 labels work") {
  auto x = random_tensor<double>({2, 3, 4}, 0.1, 1, 3);
  auto label = random_tensor<int32_t>({2, 3, 1}, 0, 4, 4);
  auto out = OpTest("cross_entropy").input("X", x).input("Label", label).run();
  CHECK(out["Y"].shape() == Shape{2, 3, 1});
  check_close(out["Y"], naive_ce(x, label, false), 1e-12, 1e-12, "cross_entropy rank 3");
}

TEST_CASE("cross_entropy: ignore_index rows give 0 loss and 0 grad") {
  auto x = random_tensor<double>({4, 5}, 0.1, 1, 5);
  auto y = OpTest("cross_entropy").input("X", x).input("Label", Tensor::from<int64_t>({2, 1, 4, 7}, {4, 1})).attr("ignore_index", 7).run()["Y"];
  CHECK(y.get(3) == 0.0);
  CHECK(y.get(0) == doctest::Approx(-std::log(x.get(2))));
  OpTest("cross_entropy").input("X", x).input("Label", Tensor::from<int64_t>({2, 1, 4, 7}, {4, 1})).attr("ignore_index", 7).check_grad({"X"}, {"Y"});
}

TEST_CASE("cross_entropy: grad matches finite differences (f64)") {
  OpTest("cross_entropy").input("X", random_tensor<double>({4, 5}, 0.1, 1, 8)).input("Label", random_tensor<int64_t>({4, 1}, 0, 5, 9)).check_grad({"X"}, {"Y"});
  OpTest("cross_entropy").input("X", random_tensor<double>({3, 6}, 0.1, 1, 10)).input("Label", soft_labels<double>(3, 6, 11))
      .attr("soft_label", true).check_grad({"X"}, {"Y"});
}

TEST_CASE("cross_entropy: a label out of [0, D) is an oar::Error naming the row and the value") {
  auto x = random_tensor<float>({4, 5}, 0.1, 1);
  auto msg = error_of([&] { OpTest("cross_entropy").input("X", x).input("Label", Tensor::from<int64_t>({0, 1, 5, 2}, {4, 1})).run(); });
  CHECK(msg.find("cross_entropy") != std::string::npos);
  CHECK(msg.find("label 5 at row 2") != std::string::npos);
  auto msg2 = error_of([&] { OpTest("cross_entropy").input("X", x).input("Label", Tensor::from<int64_t>({-1, 1, 3, 2}, {4, 1})).run(); });
  CHECK(msg2.find("label -1 at row 0") != std::string::npos);
}

TEST_CASE("cross_entropy: mismatched shapes and dtypes are oar::Errors naming the shapes") {
  auto msg = error_of([] {
    OpTest("cross_entropy").input("X", random_tensor<float>({4, 5}, 0.1, 1)).input("Label", random_tensor<int64_t>({3, 1}, 0, 5)).build();
  });
  test::check_contains(msg, {"cross_entropy", "[3, 1]", "[4, 5]"});
  auto msg2 = error_of([] {
    OpTest("cross_entropy").input("X", random_tensor<float>({4, 5}, 0.1, 1)).input("Label", random_tensor<float>({4, 1})).build();
  });
  CHECK(msg2.find("hard labels must be i64") != std::string::npos);
  auto msg3 = error_of([] {
    OpTest("cross_entropy").input("X", random_tensor<float>({4, 5}, 0.1, 1)).input("Label", random_tensor<float>({4, 1})).attr("soft_label", true).build();
  });
  CHECK(msg3.find("soft_label") != std::string::npos);
}

TEST_CASE("cross_entropy: labels that disagree with X only when it runs (batch unknown when built) are oar::Errors naming both") {
  const Tensor x = random_tensor<float>({4, 5}, 0.1, 1, 3);
  auto hard = error_of([&] { OpTest("cross_entropy").input("X", x).input("Label", Tensor::from<int64_t>({0, 1, 2}, {3, 1})).unknown_batch().run(); });
  test::check_contains(hard, {"cross_entropy", "Label [3, 1] must hold one class index per row (4 rows)"});
  auto soft = error_of([&] {
    OpTest("cross_entropy").input("X", x).input("Label", random_tensor<float>({3, 5}, 0, 1)).attr("soft_label", true).unknown_batch().run();
  });
  test::check_contains(soft, {"cross_entropy", "soft_label needs Label f32 [3, 5] shaped like X f32 [4, 5]"});
}

TEST_CASE("cross_entropy: zero and NaN probabilities do not crash (log is clamped like Fluid)") {
  auto x = Tensor::from<float>({0.f, 1.f, NAN, 0.5f}, {2, 2});
  auto y = OpTest("cross_entropy").input("X", x).input("Label", Tensor::from<int64_t>({0, 0}, {2, 1})).run()["Y"];
  CHECK(y.get(0) == doctest::Approx(1e20));
  CHECK(std::isnan(y.get(1)));
}

TEST_CASE("cross_entropy: an empty batch gives an empty loss") {
  auto out = OpTest("cross_entropy").input("X", Tensor(Shape{0, 5}, f32)).input("Label", Tensor(Shape{0, 1}, i64)).run();
  CHECK(out["Y"].shape() == Shape{0, 1});
}
