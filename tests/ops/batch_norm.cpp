// tests/ops/batch_norm.cpp: batch_norm (training, test, use_global_stats, in-place running statistics)
// through the op harness.
#include "pch.hpp"
#include "support/op_check.hpp"
#include "support/weighted_grad_check.hpp"

using namespace oar;
using namespace oar::test;

namespace {
struct BnRef {
  Tensor y, mean_out, var_out, saved_mean, saved_var;
};
/// Plain-loop batch_norm in double (NCHW).
BnRef naive_bn(const Tensor& x, const Tensor& scale, const Tensor& bias, const Tensor& rmean, const Tensor& rvar, bool global,
               double momentum = double(0.9f), double eps = double(1e-5f)) {  // the attrs are f32
  int64_t n = x.dim(0), c = x.dim(1), s = x.numel() / std::max<int64_t>(n * c, 1);
  if (n * c == 0) s = 0;
  std::vector<double> mean(static_cast<size_t>(c)), var(static_cast<size_t>(c)), y(size_t(x.numel())), mo(static_cast<size_t>(c)), vo(static_cast<size_t>(c)), istd(static_cast<size_t>(c));
  for (int64_t ch = 0; ch < c; ++ch) {
    if (global) {
      mean[size_t(ch)] = rmean.get(ch);
      var[size_t(ch)] = rvar.get(ch);
    } else {
      double sum = 0, sq = 0;
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < s; ++j) sum += x.get((i * c + ch) * s + j);
      double mu = sum / double(n * s);
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < s; ++j) sq += std::pow(x.get((i * c + ch) * s + j) - mu, 2);
      mean[size_t(ch)] = mu;
      var[size_t(ch)] = sq / double(n * s);
    }
    istd[size_t(ch)] = 1 / std::sqrt(var[size_t(ch)] + eps);
    mo[size_t(ch)] = global ? rmean.get(ch) : rmean.get(ch) * momentum + mean[size_t(ch)] * (1 - momentum);
    vo[size_t(ch)] = global ? rvar.get(ch) : rvar.get(ch) * momentum + var[size_t(ch)] * (1 - momentum);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < s; ++j) {
        int64_t e = (i * c + ch) * s + j;
        y[size_t(e)] = (x.get(e) - mean[size_t(ch)]) * istd[size_t(ch)] * scale.get(ch) + bias.get(ch);
      }
  }
  Shape cs{c};
  return {Tensor::from<double>(y, x.shape()), Tensor::from<double>(mo, cs), Tensor::from<double>(vo, cs), Tensor::from<double>(mean, cs),
          Tensor::from<double>(istd, cs)};
}

template <class T>
OpTest bn_test(const Tensor& x, uint64_t seed = 1) {
  int64_t c = x.dim(1);
  return std::move(OpTest("batch_norm")
                       .input("X", x)
                       .input("Scale", random_tensor<T>({c}, 0.5, 1.5, seed))
                       .input("Bias", random_tensor<T>({c}, -1, 1, seed + 1))
                       .input("Mean", random_tensor<T>({c}, -1, 1, seed + 2))
                       .input("Variance", random_tensor<T>({c}, 0.5, 2, seed + 3)));
}

void check_bn(const std::map<std::string, LoDTensor>& out, const BnRef& r, double tol) {
  check_close(to_f64(out.at("Y")), r.y, tol, tol, "Y");
  check_close(to_f64(out.at("MeanOut")), r.mean_out, tol, tol, "MeanOut");
  check_close(to_f64(out.at("VarianceOut")), r.var_out, tol, tol, "VarianceOut");
  check_close(to_f64(out.at("SavedMean")), r.saved_mean, tol, tol, "SavedMean");
  check_close(to_f64(out.at("SavedVariance")), r.saved_var, tol, tol, "SavedVariance");
}
}  // namespace

TEST_CASE_TEMPLATE("batch_norm: training forward matches a plain loop", T, float, double) {
  const double tol = std::is_same_v<T, float> ? 1e-4 : 1e-10;
  std::vector<Shape> shapes{{1, 3, 4, 5}, {3, 3, 4, 5}, {17, 2, 3, 3}, {64, 5}, {64, 16, 8, 8}, {2, 3, 4}, {3, 2, 2, 2, 2}};
  for (auto& s : shapes) {
    auto x = random_tensor<T>(s, -2, 3, uint64_t(s.numel()));
    auto t = bn_test<T>(x);
    auto out = t.run();
    // inputs of bn_test are seeded 1..4
    int64_t c = s[1];
    auto r = naive_bn(x, random_tensor<T>({c}, 0.5, 1.5, 1), random_tensor<T>({c}, -1, 1, 2), random_tensor<T>({c}, -1, 1, 3),
                      random_tensor<T>({c}, 0.5, 2, 4), false);
    check_bn(out, r, tol);
  }
}

TEST_CASE_TEMPLATE("batch_norm: is_test and use_global_stats use the running statistics and keep them", T, float, double) {
  const double tol = std::is_same_v<T, float> ? 1e-4 : 1e-10;
  auto x = random_tensor<T>({5, 4, 3, 3}, -2, 3, 9);
  auto r = naive_bn(x, random_tensor<T>({4}, 0.5, 1.5, 1), random_tensor<T>({4}, -1, 1, 2), random_tensor<T>({4}, -1, 1, 3),
                    random_tensor<T>({4}, 0.5, 2, 4), true);
  check_bn(bn_test<T>(x).attr("is_test", true).run(), r, tol);
  check_bn(bn_test<T>(x).attr("use_global_stats", true).run(), r, tol);
}

TEST_CASE("batch_norm: momentum and epsilon are honoured") {
  auto x = random_tensor<double>({6, 3, 2, 2}, -2, 3, 9);
  auto out = bn_test<double>(x).attr("momentum", 0.5f).attr("epsilon", 0.1f).run();
  auto r = naive_bn(x, random_tensor<double>({3}, 0.5, 1.5, 1), random_tensor<double>({3}, -1, 1, 2), random_tensor<double>({3}, -1, 1, 3),
                    random_tensor<double>({3}, 0.5, 2, 4), false, 0.5, double(0.1f));
  check_bn(out, r, 1e-10);
}

TEST_CASE("batch_norm: MeanOut / VarianceOut may be Mean / Variance (in place, over repeated runs)") {
  Program p;
  Block& b = p.global_block();
  for (auto* n : {"x"}) b.create_var(n, {.dtype = f64, .shape = Shape{4, 2, 3, 3}});
  for (auto* n : {"scale", "bias"}) b.create_var(n, {.dtype = f64, .shape = Shape{2}});
  for (auto* n : {"mean", "var"}) b.create_var(n, {.dtype = f64, .shape = Shape{2}, .persistable = true});  // as Fluid's running statistics
  Operator op("batch_norm");
  op.set_input("X", {"x"}).set_input("Scale", {"scale"}).set_input("Bias", {"bias"}).set_input("Mean", {"mean"}).set_input("Variance", {"var"});
  op.set_output("Y", {"y"}).set_output("MeanOut", {"mean"}).set_output("VarianceOut", {"var"}).set_output("SavedMean", {"sm"}).set_output("SavedVariance", {"sv"});
  add_op(b, op);
  auto x = random_tensor<double>({4, 2, 3, 3}, -1, 4, 3);
  auto scale = Tensor::from<double>({1.0, 2.0}), bias = Tensor::from<double>({0.0, 0.5});
  Tensor rm = Tensor::from<double>({0.0, 0.0}), rv = Tensor::from<double>({1.0, 1.0});
  Scope scope;
  Executor exe;
  auto prepared = exe.prepare(p, scope);
  // first run: feed the running statistics; then let them update in place
  auto outs = exe.run(*prepared, scope, {{"x", x}, {"scale", scale}, {"bias", bias}, {"mean", rm.clone()}, {"var", rv.clone()}}, {"mean", "var"});
  auto r1 = naive_bn(x, scale, bias, rm, rv, false);
  check_close(outs[0], r1.mean_out, 1e-12, 1e-12, "MeanOut run 1");
  check_close(outs[1], r1.var_out, 1e-12, 1e-12, "VarianceOut run 1");
  Tensor m1 = outs[0].clone(), v1 = outs[1].clone();
  outs = exe.run(*prepared, scope, {{"x", x}, {"scale", scale}, {"bias", bias}}, {"mean", "var", "y"});
  auto r2 = naive_bn(x, scale, bias, m1, v1, false);
  check_close(outs[0], r2.mean_out, 1e-12, 1e-12, "MeanOut run 2");
  check_close(outs[1], r2.var_out, 1e-12, 1e-12, "VarianceOut run 2");
  check_close(outs[2], r2.y, 1e-12, 1e-12, "Y run 2");
}

TEST_CASE("batch_norm: grad matches finite differences in training mode (f64)") {
  auto x = random_tensor<double>({4, 3, 2, 2}, -1, 2, 21);
  std::vector<std::pair<std::string, Tensor>> in{{"X", x},
                                                 {"Scale", random_tensor<double>({3}, 0.5, 1.5, 22)},
                                                 {"Bias", random_tensor<double>({3}, -1, 1, 23)},
                                                 {"Mean", random_tensor<double>({3}, -1, 1, 24)},
                                                 {"Variance", random_tensor<double>({3}, 0.5, 2, 25)}};
  // mean(Y) does not depend on X or Scale (each channel is normalized): weight Y instead.
  check_grad_weighted("batch_norm", in, {}, {"X", "Scale", "Bias"}, {"Y"});
  check_grad_weighted("batch_norm", in, {{"use_global_stats", true}}, {"X", "Scale", "Bias"}, {"Y"});
  check_grad_weighted("batch_norm", {{"X", random_tensor<double>({5, 4}, -1, 2, 26)}, {"Scale", random_tensor<double>({4}, 0.5, 1.5, 27)},
                                     {"Bias", random_tensor<double>({4}, -1, 1, 28)}, {"Mean", random_tensor<double>({4}, -1, 1, 29)},
                                     {"Variance", random_tensor<double>({4}, 0.5, 2, 30)}},
                      {}, {"X", "Scale", "Bias"}, {"Y"});
  // and the harness' own check (mean loss) agrees too
  bn_test<double>(x, 31).check_grad({"X", "Scale", "Bias"}, {"Y"});
}

TEST_CASE("batch_norm: a channel mismatch in Scale is an oar::Error naming the shapes") {
  auto msg = error_of([] {
    OpTest("batch_norm").input("X", random_tensor<float>({2, 3, 4, 4})).input("Scale", random_tensor<float>({4})).input("Bias", random_tensor<float>({3}))
        .input("Mean", random_tensor<float>({3})).input("Variance", random_tensor<float>({3})).build();
  });
  test::check_contains(msg, {"batch_norm", "Scale must be [C] = [3]", "[2, 3, 4, 4]", "[4]"});
}

TEST_CASE("batch_norm: data_layout other than NCHW and a rank-1 X are refused clearly") {
  auto x = random_tensor<float>({2, 3, 4, 4});
  auto msg = error_of([&] { bn_test<float>(x).attr("data_layout", "NHWC").build(); });
  CHECK(msg.find("data_layout") != std::string::npos);
  CHECK(msg.find("only NCHW") != std::string::npos);
  auto msg2 = error_of([] {
    OpTest("batch_norm").input("X", random_tensor<float>({3})).input("Scale", random_tensor<float>({3})).input("Bias", random_tensor<float>({3}))
        .input("Mean", random_tensor<float>({3})).input("Variance", random_tensor<float>({3})).build();
  });
  CHECK(msg2.find("rank 2 to 5") != std::string::npos);
}

TEST_CASE("batch_norm: NaN inputs do not crash; an empty batch leaves the running statistics alone") {
  auto x = random_tensor<float>({2, 3, 2, 2});
  x.data<float>()[0] = NAN;
  x.data<float>()[5] = INFINITY;
  auto out = bn_test<float>(x).run();
  CHECK(std::isnan(out["Y"].get(0)));
  auto e = bn_test<float>(Tensor(Shape{0, 3, 2, 2}, f32)).run();
  CHECK(e["Y"].shape() == Shape{0, 3, 2, 2});
  check_close(e["MeanOut"], random_tensor<float>({3}, -1, 1, 3), 0, 0, "MeanOut unchanged");
  check_close(e["VarianceOut"], random_tensor<float>({3}, 0.5, 2, 4), 0, 0, "VarianceOut unchanged");
}
