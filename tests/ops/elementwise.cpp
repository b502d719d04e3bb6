// tests/ops/elementwise.cpp: every unary element-wise op, one table row each: forward against std:: math,
// gradient against finite differences.
#include "pch.hpp"
#include "support/op_check.hpp"

using namespace oar;
using namespace oar::test;

namespace {
struct Row {
  const char* type;
  double (*ref)(double);
  double lo, hi;  // input range (keeps log/sqrt/pow in their domain, away from kinks)
};
double sig(double x) { return 1 / (1 + std::exp(-x)); }
const Row rows[] = {
    {"relu", [](double x) { return x > 0 ? x : 0; }, -1, 1},
    {"sigmoid", sig, -3, 3},
    {"tanh", [](double x) { return std::tanh(x); }, -2, 2},
    {"exp", [](double x) { return std::exp(x); }, -2, 2},
    {"log", [](double x) { return std::log(x); }, 0.5, 3},
    {"sqrt", [](double x) { return std::sqrt(x); }, 0.5, 3},
    {"abs", [](double x) { return std::abs(x); }, -1, 1},
    {"square", [](double x) { return x * x; }, -2, 2},
    {"reciprocal", [](double x) { return 1 / x; }, 0.5, 2},
    {"softplus", [](double x) { return std::log1p(std::exp(x)); }, -3, 3},
    {"softsign", [](double x) { return x / (1 + std::abs(x)); }, -3, 3},
    {"gelu", [](double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }, -3, 3},
    {"leaky_relu", [](double x) { return x > 0 ? x : double(0.02f) * x; }, -1, 1},
    {"elu", [](double x) { return x > 0 ? x : std::exp(x) - 1; }, -1, 1},
    {"relu6", [](double x) { return std::min(std::max(x, 0.0), 6.0); }, -2, 8},
    {"hard_sigmoid", [](double x) { return std::min(std::max(double(0.2f) * x + 0.5, 0.0), 1.0); }, -4, 4},
    {"swish", [](double x) { return x * sig(x); }, -3, 3},
    {"pow", [](double x) { return x; }, 0.5, 2},
    {"clip", [](double x) { return std::min(std::max(x, -1.0), 1.0); }, -2, 2},
};
// Shifts points that land within `eps` of a kink (0, 6, -1, 1, +-2.5) where finite differences lie.
Tensor away_from_kinks(const Tensor& t) {
  Tensor c = t.clone();
  for (auto& v : c.span<double>())
    for (double k : {0.0, 6.0, -1.0, 1.0, 2.5, -2.5})
      if (std::abs(v - k) < 0.02) v = k + 0.05;
  return c;
}
}  // namespace

TEST_CASE("elementwise: every unary op matches its reference (f32, f64, sizes 1..large)") {
  for (const Row& r : rows) {
    CAPTURE(r.type);
    for (int64_t n : {1, 3, 17, 64, 40000}) {
      auto x = random_tensor<double>({n}, r.lo, r.hi, uint64_t(n));
      auto out = OpTest(r.type).input("X", x).run();
      check_close(out["Out"], make_tensor<double>({n}, [&](int64_t i) { return r.ref(x.get(i)); }), 1e-12, 1e-12, r.type);
      auto xf = make_tensor<float>({n}, [&](int64_t i) { return x.get(i); });
      auto outf = OpTest(r.type).input("X", xf).run();
      check_close(to_f64(outf["Out"]), make_tensor<double>({n}, [&](int64_t i) { return r.ref(double(xf.get(i))); }), 1e-5, 1e-5, r.type);
    }
  }
}

TEST_CASE("elementwise: every unary op's grad matches finite differences (f64)") {
  for (const Row& r : rows) {
    CAPTURE(r.type);
    auto x = away_from_kinks(random_tensor<double>({3, 5}, r.lo, r.hi, 11));
    OpTest(r.type).input("X", x).check_grad({"X"}, {"Out"});
  }
}

TEST_CASE("elementwise: attributes change the function (leaky_relu alpha, pow factor, clip bounds)") {
  auto x = Tensor::from<double>({-2.0, 0.5, 3.0});
  CHECK(OpTest("leaky_relu").input("X", x).attr("alpha", 0.5f).run()["Out"].get(0) == doctest::Approx(-1.0));
  CHECK(OpTest("pow").input("X", x).attr("factor", 2.0f).run()["Out"].get(2) == doctest::Approx(9.0));
  auto c = OpTest("clip").input("X", x).attr("min", -1.0f).attr("max", 2.0f).run()["Out"];
  CHECK(c.get(0) == -1.0);
  CHECK(c.get(2) == 2.0);
}

TEST_CASE("elementwise: empty batch, NaN and Inf pass through without a crash") {
  auto e = OpTest("relu").input("X", Tensor(Shape{0, 4}, f32)).run();
  CHECK(e["Out"].shape() == Shape{0, 4});
  auto x = Tensor::from<float>({std::nanf(""), INFINITY, -INFINITY});
  auto t = OpTest("tanh").input("X", x).run()["Out"];
  CHECK(std::isnan(t.get(0)));
  CHECK(t.get(1) == 1.0);
  CHECK(t.get(2) == -1.0);
}

TEST_CASE("elementwise: an integer input is refused at build time") {
  auto msg = error_of([] { OpTest("relu").input("X", Tensor::from<int64_t>({1, 2})).build(); });
  CHECK(msg.find("floating-point") != std::string::npos);
}
