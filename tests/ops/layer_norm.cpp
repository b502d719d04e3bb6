// tests/ops/layer_norm.cpp: layer_norm (with and without Scale / Bias, any begin_norm_axis) through the op harness.
#include "pch.hpp"
#include "support/op_check.hpp"
#include "support/weighted_grad_check.hpp"

using namespace oar;
using namespace oar::test;

namespace {
/// Plain-loop layer_norm in double: (y, mean, variance).
std::tuple<Tensor, Tensor, Tensor> naive_ln(const Tensor& x, const Tensor* scale, const Tensor* bias, int axis, double eps = 1e-5) {
  int64_t m = x.shape().numel(0, axis), k = x.shape().numel(axis, x.rank());
  std::vector<double> y(size_t(x.numel())), mean(static_cast<size_t>(m)), var(static_cast<size_t>(m));
  for (int64_t i = 0; i < m; ++i) {
    double s = 0, q = 0;
    for (int64_t j = 0; j < k; ++j) s += x.get(i * k + j);
    double mu = s / double(k);
    for (int64_t j = 0; j < k; ++j) q += std::pow(x.get(i * k + j) - mu, 2);
    double v = q / double(k);
    mean[size_t(i)] = mu;
    var[size_t(i)] = v;
    for (int64_t j = 0; j < k; ++j)
      y[size_t(i * k + j)] = (x.get(i * k + j) - mu) / std::sqrt(v + eps) * (scale ? scale->get(j) : 1.0) + (bias ? bias->get(j) : 0.0);
  }
  return {Tensor::from<double>(y, x.shape()), Tensor::from<double>(mean, Shape{m}), Tensor::from<double>(var, Shape{m})};
}
}  // namespace

TEST_CASE_TEMPLATE("layer_norm: forward matches a plain loop", T, float, double) {
  const double tol = std::is_same_v<T, float> ? 1e-4 : 1e-10;
  for (int64_t n : {1, 3, 17, 64, 512})
    for (int64_t k : {1, 5, 300}) {
      auto x = random_tensor<T>({n, k}, -2, 3, uint64_t(n * k));
      auto scale = random_tensor<T>({k}, 0.5, 1.5, 2), bias = random_tensor<T>({k}, -1, 1, 3);
      auto out = OpTest("layer_norm").input("X", x).input("Scale", scale).input("Bias", bias).unknown_batch().run();
      auto [y, mean, var] = naive_ln(x, &scale, &bias, 1);
      check_close(to_f64(out["Y"]), y, tol, tol, "Y");
      check_close(to_f64(out["Mean"]), mean, tol, tol, "Mean");
      check_close(to_f64(out["Variance"]), var, tol, tol, "Variance");
    }
}

TEST_CASE("layer_norm: begin_norm_axis and missing Scale / Bias") {
  auto x = random_tensor<double>({2, 3, 4, 5}, -2, 3, 4);
  for (int axis : {1, 2, 3}) {
    int64_t k = x.shape().numel(axis, 4);
    auto scale = random_tensor<double>({k}, 0.5, 1.5, 5), bias = random_tensor<double>({k}, -1, 1, 6);
    auto out = OpTest("layer_norm").input("X", x).input("Scale", scale).input("Bias", bias).attr("begin_norm_axis", axis).run();
    check_close(out["Y"], std::get<0>(naive_ln(x, &scale, &bias, axis)), 1e-10, 1e-10, "Y");
    CHECK(out["Mean"].shape() == Shape{x.shape().numel(0, axis)});
    auto only_scale = OpTest("layer_norm").input("X", x).input("Scale", scale).attr("begin_norm_axis", axis).run();
    check_close(only_scale["Y"], std::get<0>(naive_ln(x, &scale, nullptr, axis)), 1e-10, 1e-10, "Y scale only");
    auto only_bias = OpTest("layer_norm").input("X", x).input("Bias", bias).attr("begin_norm_axis", axis).run();
    check_close(only_bias["Y"], std::get<0>(naive_ln(x, nullptr, &bias, axis)), 1e-10, 1e-10, "Y bias only");
    auto none = OpTest("layer_norm").input("X", x).attr("begin_norm_axis", axis).attr("epsilon", 0.01f).run();
    check_close(none["Y"], std::get<0>(naive_ln(x, nullptr, nullptr, axis, double(0.01f))), 1e-10, 1e-10, "Y plain");
  }
}

TEST_CASE("layer_norm: grad matches finite differences (f64)") {
  auto x = random_tensor<double>({3, 2, 4}, -1, 2, 7);
  auto scale = random_tensor<double>({8}, 0.5, 1.5, 8), bias = random_tensor<double>({8}, -1, 1, 9);
  OpTest("layer_norm").input("X", x).input("Scale", scale).input("Bias", bias).check_grad({"X", "Scale", "Bias"}, {"Y"});
  check_grad_weighted("layer_norm", {{"X", x}, {"Scale", scale}, {"Bias", bias}}, {}, {"X", "Scale", "Bias"}, {"Y"});
  auto s2 = random_tensor<double>({4}, 0.5, 1.5, 10);
  check_grad_weighted("layer_norm", {{"X", x}, {"Scale", s2}}, {{"begin_norm_axis", 2}}, {"X", "Scale"}, {"Y"});
  check_grad_weighted("layer_norm", {{"X", x}}, {}, {"X"}, {"Y"});
}

TEST_CASE("layer_norm: a bad Scale size or begin_norm_axis is an oar::Error naming the shapes") {
  auto msg = error_of([] { OpTest("layer_norm").input("X", random_tensor<float>({3, 4})).input("Scale", random_tensor<float>({5})).build(); });
  test::check_contains(msg, {"layer_norm", "[5]", "[3, 4]"});
  auto msg2 = error_of([] { OpTest("layer_norm").input("X", random_tensor<float>({3, 4})).attr("begin_norm_axis", 2).build(); });
  CHECK(msg2.find("begin_norm_axis") != std::string::npos);
}

TEST_CASE("layer_norm_grad: a Mean or Variance of the wrong size is an oar::Error naming the shapes") {
  const Tensor x = random_tensor<double>({3, 4}, -1, 1, 5);
  auto msg = error_of([&] {
    OpTest("layer_norm_grad")
        .input("X", x)
        .input("Mean", random_tensor<double>({2}))
        .input("Variance", random_tensor<double>({3}, 0.5, 1))
        .input("Y@GRAD", random_tensor<double>({3, 4}))
        .run();
  });
  test::check_contains(msg, {"layer_norm_grad", "Mean [2] and Variance [3] must have 3 elements (X [3, 4] up to dim 1)"});
}

TEST_CASE("layer_norm: NaN rows do not crash or spill; empty batch works") {
  auto x = random_tensor<float>({3, 4});
  x.data<float>()[1] = NAN;
  auto out = OpTest("layer_norm").input("X", x).run();
  CHECK(std::isnan(out["Y"].get(0)));
  CHECK(std::isfinite(out["Y"].get(4)));
  auto e = OpTest("layer_norm").input("X", Tensor(Shape{0, 4}, f32)).input("Scale", random_tensor<float>({4})).run();
  CHECK(e["Y"].shape() == Shape{0, 4});
  CHECK(e["Mean"].shape() == Shape{0});
}
