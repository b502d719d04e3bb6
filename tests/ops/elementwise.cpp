// tests/ops/elementwise.cpp: every unary element-wise op, one table row each (and one per form an attribute
// selects): forward against std:: math, gradient against finite differences; the activation objects' options.
#include "pch.hpp"
#include "support/op_check.hpp"

using namespace oar;
using namespace oar::test;

namespace {
struct Row {
  const char* type;
  double (*ref)(double);
  double lo, hi;  // input range (keeps log/sqrt/pow in their domain, away from kinks)
  std::map<std::string, Attribute> attrs = {};
};
double sig(double x) { return 1 / (1 + std::exp(-x)); }
// Paddle's forms, written out as their docs give them.
double gelu_tanh_ref(double x) { return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x))); }
double softplus_ref(double x, double beta, double threshold) { return beta * x > threshold ? x : std::log(1 + std::exp(beta * x)) / beta; }
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
    {"erf", [](double x) { return std::erf(x); }, -2, 2},
    {"floor", [](double x) { return std::floor(x); }, -2.9, 2.9},
    {"ceil", [](double x) { return std::ceil(x); }, -2.9, 2.9},
    {"round", [](double x) { return std::nearbyint(x); }, -2.9, 2.9},
    {"sin", [](double x) { return std::sin(x); }, -3, 3},
    {"cos", [](double x) { return std::cos(x); }, -3, 3},
    {"tan", [](double x) { return std::tan(x); }, -1.2, 1.2},
    {"asin", [](double x) { return std::asin(x); }, -0.8, 0.8},
    {"acos", [](double x) { return std::acos(x); }, -0.8, 0.8},
    {"atan", [](double x) { return std::atan(x); }, -3, 3},
    {"sinh", [](double x) { return std::sinh(x); }, -2, 2},
    {"cosh", [](double x) { return std::cosh(x); }, -2, 2},
    {"asinh", [](double x) { return std::asinh(x); }, -3, 3},
    {"acosh", [](double x) { return std::acosh(x); }, 1.2, 3},
    {"atanh", [](double x) { return std::atanh(x); }, -0.8, 0.8},
    {"gelu", [](double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }, -3, 3},
    {"gelu", gelu_tanh_ref, -3, 3, {{"approximate", true}}},
    {"softplus", [](double x) { return softplus_ref(x, 2, 20); }, -3, 3, {{"beta", 2.0f}}},
    // beta x crosses the threshold at x = 2: both branches
    {"softplus", [](double x) { return softplus_ref(x, 0.5, 1); }, -4, 6, {{"beta", 0.5f}, {"threshold", 1.0f}}},
    {"leaky_relu", [](double x) { return x > 0 ? x : double(0.02f) * x; }, -1, 1},
    {"elu", [](double x) { return x > 0 ? x : std::exp(x) - 1; }, -1, 1},
    {"relu6", [](double x) { return std::min(std::max(x, 0.0), 6.0); }, -2, 8},
    {"hard_sigmoid", [](double x) { return std::min(std::max(double(0.2f) * x + 0.5, 0.0), 1.0); }, -4, 4},
    {"swish", [](double x) { return x * sig(x); }, -3, 3},
    {"pow", [](double x) { return x; }, 0.5, 2},
    {"clip", [](double x) { return std::min(std::max(x, -1.0), 1.0); }, -2, 2},
};
// Shifts points that land within `eps` of a kink (0, 6, -1, 1, +-2.5; 2 where softplus with beta 0.5 and
// threshold 1 jumps to x) where finite differences lie.
Tensor away_from_kinks(const Tensor& t) {
  Tensor c = t.clone();
  for (auto& v : c.span<double>())
    for (double k : {0.0, 6.0, -1.0, 1.0, 2.5, -2.5, 2.0})
      if (std::abs(v - k) < 0.02) v = k + 0.05;
  return c;
}

OpTest op_test(const Row& r) {
  OpTest t(r.type);
  for (auto& [k, v] : r.attrs) t.attr(k, v);
  return t;
}
std::string row_name(const Row& r) {
  std::string s = r.type;
  for (auto& [k, v] : r.attrs) s += " " + k + "=" + attr_str(v);
  return s;
}
}  // namespace

TEST_CASE("elementwise: every unary op matches its reference (f32, f64, sizes 1..large)") {
  for (const Row& r : rows) {
    const std::string name = row_name(r);
    CAPTURE(name);
    for (int64_t n : {1, 3, 17, 64, 40000}) {
      auto x = random_tensor<double>({n}, r.lo, r.hi, uint64_t(n));
      auto out = op_test(r).input("X", x).run();
      check_close(out["Out"], make_tensor<double>({n}, [&](int64_t i) { return r.ref(x.get(i)); }), 1e-12, 1e-12, name);
      auto xf = make_tensor<float>({n}, [&](int64_t i) { return x.get(i); });
      auto outf = op_test(r).input("X", xf).run();
      check_close(to_f64(outf["Out"]), make_tensor<double>({n}, [&](int64_t i) { return r.ref(double(xf.get(i))); }), 1e-5, 1e-5, name);
    }
  }
}

TEST_CASE("elementwise: every unary op's grad matches finite differences (f64)") {
  for (const Row& r : rows) {
    const std::string name = row_name(r);
    CAPTURE(name);
    auto x = away_from_kinks(random_tensor<double>({3, 5}, r.lo, r.hi, 11));
    op_test(r).input("X", x).check_grad({"X"}, {"Out"});
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

TEST_CASE("elementwise: softplus is x itself where beta x > threshold (defaults 1 and 20), as Paddle's") {
  auto x = Tensor::from<double>({19.0, 20.5, 25.0, -30.0});
  auto y = OpTest("softplus").input("X", x).run()["Out"];
  CHECK(y.get(0) == doctest::Approx(19 + std::log1p(std::exp(-19.0))).epsilon(1e-15));
  CHECK(y.get(0) != 19.0);  // below the threshold: the log form, e^-19 above x in f64
  CHECK(y.get(1) == 20.5);  // the log form would be 20.5 + 1.2e-9
  CHECK(y.get(2) == 25.0);
  CHECK(y.get(3) == doctest::Approx(std::exp(-30.0)).epsilon(1e-12));
  // beta 2, threshold 10: 2 * 5.5 > 10 gives x, 2 * 4.5 < 10 gives log(1 + e^9) / 2, and a large threshold
  // does not overflow e^(beta x).
  auto b = Tensor::from<double>({5.5, 4.5, 400.0});
  auto yb = OpTest("softplus").input("X", b).attr("beta", 2.0f).attr("threshold", 10.0f).run()["Out"];
  CHECK(yb.get(0) == 5.5);
  CHECK(yb.get(1) == doctest::Approx(std::log1p(std::exp(9.0)) / 2).epsilon(1e-15));
  auto big = OpTest("softplus").input("X", b).attr("beta", 2.0f).attr("threshold", 1e30f).run()["Out"];
  CHECK(big.get(2) == doctest::Approx(400.0).epsilon(1e-15));
  // The gradient is exactly dy past the threshold and sigmoid(beta x) dy before it.
  auto g = OpTest("softplus_grad").input("X", b).input("Out", yb).input("Out@GRAD", Tensor::from<double>({3.0, 3.0, 3.0}))
               .attr("beta", 2.0f).attr("threshold", 10.0f).run()["X@GRAD"];
  CHECK(g.get(0) == 3.0);
  CHECK(g.get(1) == doctest::Approx(3 * sig(9.0)).epsilon(1e-15));
}

TEST_CASE("elementwise: gelu's two forms differ where the tanh approximation departs from the erf") {
  auto x = Tensor::from<double>({-3.0, -1.0, 0.5, 2.0});
  auto exact = OpTest("gelu").input("X", x).run()["Out"];
  auto approx = OpTest("gelu").input("X", x).attr("approximate", true).run()["Out"];
  for (int64_t i = 0; i < 4; ++i) {
    CAPTURE(i);
    CHECK(exact.get(i) == doctest::Approx(0.5 * x.get(i) * (1 + std::erf(x.get(i) / std::sqrt(2.0)))).epsilon(1e-15));
    CHECK(approx.get(i) == doctest::Approx(gelu_tanh_ref(x.get(i))).epsilon(1e-15));
    CHECK(std::abs(approx.get(i) - exact.get(i)) > 1e-6);
  }
  // The schema presents the option as a bool, default false; a number is refused.
  const AttrDef* a = op_def("gelu").find_attr("approximate");
  REQUIRE(a);
  REQUIRE(a->dflt);
  CHECK(std::get<bool>(*a->dflt) == false);
  auto msg = error_of([&] { OpTest("gelu").input("X", x).attr("approximate", 1).run(); });
  CHECK(msg.find("gelu: attribute 'approximate' must be bool, got int 1") != std::string::npos);
}

namespace {
/// The single op of a tape program computing `y` from data `x`, after the ops that make `x`.
const Operator& last_op(const Topology& t) {
  const Block& b = t.main.global_block();
  REQUIRE(b.num_ops() >= 1);
  return b.op(b.num_ops() - 1);
}
}  // namespace

TEST_CASE("elementwise: the activation objects put their options on the op (as a layer and as .act)") {
  Tape tape;
  auto x = data("x", f64, {-1, 3});
  {
    Topology t = tape.program(oar::gelu.approximate()(x));
    CHECK(last_op(t).type() == "gelu");
    CHECK(last_op(t).attr<bool>("approximate") == true);
  }
  {
    Topology t = tape.program(oar::gelu(x));
    CHECK(last_op(t).attr<bool>("approximate") == false);  // the schema's default: the erf form
  }
  {
    Topology t = tape.program(oar::gelu.approximate(true).approximate(false)(x));
    CHECK(last_op(t).attr<bool>("approximate") == false);
  }
  {
    Topology t = tape.program(oar::softplus.beta(2).threshold(10)(x));
    CHECK(last_op(t).type() == "softplus");
    CHECK(last_op(t).attr<float>("beta") == 2.0f);
    CHECK(last_op(t).attr<float>("threshold") == 10.0f);
  }
  {
    // .with keeps the typed object, so options chain after it.
    Topology t = tape.program(oar::softplus.with("beta", 3).threshold(5)(x));
    CHECK(attr_as<float>(last_op(t).attr("beta")) == 3.0f);
    CHECK(last_op(t).attr<float>("threshold") == 5.0f);
  }
  {
    Topology t = tape.program(fc(x, 4).act(oar::softplus.beta(0.5)));
    CHECK(last_op(t).type() == "softplus");
    CHECK(last_op(t).attr<float>("beta") == 0.5f);
    CHECK(last_op(t).attr<float>("threshold") == 20.0f);  // the schema's default
  }
  {
    Topology t = tape.program(fc(x, 4).act(oar::gelu.approximate()));
    CHECK(last_op(t).type() == "gelu");
    CHECK(last_op(t).attr<bool>("approximate") == true);
  }
  auto msg = error_of([] { (void)oar::softplus.beta(0); });
  CHECK(msg.find("beta must be nonzero") != std::string::npos);
  CHECK(msg.find("elementwise.cpp") != std::string::npos);  // the user's line
}

TEST_CASE("elementwise: activation objects with options compute Paddle's forms when run") {
  Tape tape;
  auto x = data("x", f64, {-1, 3});
  Var g = oar::gelu.approximate()(x);
  Var s = oar::softplus.beta(2).threshold(3)(x);
  Topology t = tape.program({g, s});
  Scope scope;
  Executor exe;
  auto xv = Tensor::from<double>({-2.0, -0.5, 0.0, 0.7, 1.4, 1.6}, {2, 3});
  auto out = exe.run(t.main, scope, {{"x", xv}}, {t.outputs[0], t.outputs[1]});
  for (int64_t i = 0; i < 6; ++i) {
    CAPTURE(i);
    CHECK(out[0].get(i) == doctest::Approx(gelu_tanh_ref(xv.get(i))).epsilon(1e-14));
    CHECK(out[1].get(i) == doctest::Approx(softplus_ref(xv.get(i), 2, 3)).epsilon(1e-14));
  }
  CHECK(out[1].get(5) == 1.6);  // 2 * 1.6 > 3
}
