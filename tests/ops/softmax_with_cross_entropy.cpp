// tests/ops/softmax_with_cross_entropy.cpp: softmax_with_cross_entropy through the op harness.
#include "pch.hpp"
#include "support/op_check.hpp"

using namespace oar;
using namespace oar::test;

namespace {
/// Plain-loop (softmax, loss) in double via log-sum-exp.
std::pair<Tensor, Tensor> naive_swce(const Tensor& x, const Tensor& label, bool soft, int64_t ignore = -100) {
  int64_t d = x.dim(x.rank() - 1), n = x.numel() / d;
  std::vector<double> sm(size_t(x.numel())), loss(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    double m = -INFINITY, s = 0;
    for (int64_t j = 0; j < d; ++j) m = std::max(m, x.get(i * d + j));
    for (int64_t j = 0; j < d; ++j) s += std::exp(x.get(i * d + j) - m);
    double lse = m + std::log(s);
    for (int64_t j = 0; j < d; ++j) sm[size_t(i * d + j)] = std::exp(x.get(i * d + j) - lse);
    if (soft) {
      double l = 0;
      for (int64_t j = 0; j < d; ++j) l += label.get(i * d + j) * (lse - x.get(i * d + j));
      loss[size_t(i)] = l;
    } else {
      int64_t l = int64_t(label.get(i));
      loss[size_t(i)] = l == ignore ? 0.0 : lse - x.get(i * d + l);
    }
  }
  Shape ls = x.shape();
  ls[ls.rank() - 1] = 1;
  return {Tensor::from<double>(sm, x.shape()), Tensor::from<double>(loss, ls)};
}
}  // namespace

TEST_CASE_TEMPLATE("softmax_with_cross_entropy: hard and soft labels match a plain loop", T, float, double) {
  for (int64_t n : {1, 3, 17, 64, 1500})
    for (int64_t d : {1, 10, 100}) {
      auto x = random_tensor<T>({n, d}, -4, 4, uint64_t(n * d));
      auto hard = random_tensor<int64_t>({n, 1}, 0, double(d), uint64_t(n + d));
      auto out = OpTest("softmax_with_cross_entropy").input("Logits", x).input("Label", hard).unknown_batch().run();
      auto [sm, loss] = naive_swce(x, hard, false);
      check_close(to_f64(out["Softmax"]), sm, 1e-6, 1e-4, "softmax");
      check_close(to_f64(out["Loss"]), loss, 1e-5, 1e-4, "loss hard");
      auto soft = soft_labels<T>(n, d, uint64_t(n));
      auto out2 = OpTest("softmax_with_cross_entropy").input("Logits", x).input("Label", soft).attr("soft_label", true).unknown_batch().run();
      auto [sm2, loss2] = naive_swce(x, soft, true);
      check_close(to_f64(out2["Softmax"]), sm2, 1e-6, 1e-4, "softmax soft");
      check_close(to_f64(out2["Loss"]), loss2, 1e-5, 1e-4, "loss soft");
    }
}

TEST_CASE("softmax_with_cross_entropy: huge logits give a finite, exact loss (log-sum-exp)") {
  auto x = Tensor::from<float>({1000.f, -1000.f, 0.f, 50.f, 200.f, -300.f}, {2, 3});
  auto label = Tensor::from<int64_t>({1, 2}, {2, 1});
  auto out = OpTest("softmax_with_cross_entropy").input("Logits", x).input("Label", label).run();
  CHECK(out["Loss"].get(0) == doctest::Approx(2000.0));
  CHECK(out["Loss"].get(1) == doctest::Approx(500.0));
  CHECK(std::isfinite(out["Loss"].get(0)));
}

TEST_CASE("softmax_with_cross_entropy: ignore_index rows give 0 loss and 0 grad") {
  auto x = random_tensor<double>({4, 5}, -2, 2, 5);
  auto label = Tensor::from<int64_t>({2, -100, 4, 0}, {4, 1});
  auto out = OpTest("softmax_with_cross_entropy").input("Logits", x).input("Label", label).run();
  CHECK(out["Loss"].get(1) == 0.0);
  check_close(out["Loss"], naive_swce(x, label, false).second, 1e-12, 1e-12, "loss ignore");
  OpTest("softmax_with_cross_entropy").input("Logits", x).input("Label", label).check_grad({"Logits"}, {"Loss"});
}

TEST_CASE("softmax_with_cross_entropy: grad matches finite differences (f64)") {
  OpTest("softmax_with_cross_entropy").input("Logits", random_tensor<double>({4, 6}, -2, 2, 8)).input("Label", random_tensor<int64_t>({4, 1}, 0, 6, 9))
      .check_grad({"Logits"}, {"Loss"});
  OpTest("softmax_with_cross_entropy").input("Logits", random_tensor<double>({3, 5}, -2, 2, 10)).input("Label", soft_labels<double>(3, 5, 11))
      .attr("soft_label", true).check_grad({"Logits"}, {"Loss"});
  // Soft labels that do not sum to 1 still get the exact gradient.
  OpTest("softmax_with_cross_entropy").input("Logits", random_tensor<double>({3, 5}, -2, 2, 12)).input("Label", random_tensor<double>({3, 5}, 0, 1, 13))
      .attr("soft_label", true).check_grad({"Logits"}, {"Loss"});
}

TEST_CASE("softmax_with_cross_entropy: a label out of [0, D) is an oar::Error naming the row and the value") {
  auto msg = error_of([] {
    OpTest("softmax_with_cross_entropy").input("Logits", random_tensor<float>({3, 4})).input("Label", Tensor::from<int64_t>({0, 9, 1}, {3, 1})).run();
  });
  CHECK(msg.find("softmax_with_cross_entropy") != std::string::npos);
  CHECK(msg.find("label 9 at row 1") != std::string::npos);
  auto msg2 = error_of([] {
    OpTest("softmax_with_cross_entropy").input("Logits", random_tensor<float>({3, 4})).input("Label", random_tensor<int64_t>({3, 2}, 0, 4)).build();
  });
  CHECK(msg2.find("[3, 2]") != std::string::npos);
}

TEST_CASE("softmax_with_cross_entropy: labels that disagree with Logits only when it runs are oar::Errors naming both") {
  const Tensor x = random_tensor<double>({4, 3}, -1, 1, 4);
  auto hard = error_of([&] {
    OpTest("softmax_with_cross_entropy").input("Logits", x).input("Label", Tensor::from<int64_t>({0, 1, 2, 0, 1}, {5, 1})).unknown_batch().run();
  });
  test::check_contains(hard, {"softmax_with_cross_entropy", "Label [5, 1] must hold one class index per row (4 rows)"});
  auto soft = error_of([&] {
    OpTest("softmax_with_cross_entropy").input("Logits", x).input("Label", random_tensor<double>({2, 3}, 0, 1)).attr("soft_label", true).unknown_batch().run();
  });
  test::check_contains(soft, {"softmax_with_cross_entropy", "soft_label needs Label f64 [2, 3] shaped like Logits f64 [4, 3]"});
}

TEST_CASE("softmax_with_cross_entropy: NaN logits do not crash; empty batch works") {
  auto x = Tensor::from<float>({NAN, 1.f, 2.f, 0.f, 1.f, 2.f}, {2, 3});
  auto out = OpTest("softmax_with_cross_entropy").input("Logits", x).input("Label", Tensor::from<int64_t>({0, 2}, {2, 1})).run();
  CHECK(std::isnan(out["Loss"].get(0)));
  CHECK(std::isfinite(out["Loss"].get(1)));
  auto e = OpTest("softmax_with_cross_entropy").input("Logits", Tensor(Shape{0, 3}, f32)).input("Label", Tensor(Shape{0, 1}, i64)).run();
  CHECK(e["Loss"].shape() == Shape{0, 1});
  CHECK(e["Softmax"].shape() == Shape{0, 3});
}
