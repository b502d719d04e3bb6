// tests/ops/fused_elementwise.cpp: fused_elementwise through the op harness: every token against a plain loop,
// broadcasting, gradients (repeated and broadcast inputs), the parse and shape errors, and unary tokens with
// attributes (`softplus:beta=2`) as the activation objects record them.
#include "pch.hpp"
#include "support/op_check.hpp"

using namespace oar;
using namespace oar::test;

namespace {

using Fn = std::function<double(const double*)>;

/// Flat index into `in` (broadcast to `out`, right-aligned) of flat output element `o`.
int64_t bcast_index(const Shape& in, const Shape& out, int64_t o) {
  int64_t idx = 0, stride = 1;
  for (int d = out.rank() - 1, e = in.rank() - 1; d >= 0; --d, --e) {
    int64_t pos = o % out[d];
    o /= out[d];
    if (e >= 0) {
      if (in[e] != 1) idx += pos * stride;
      stride *= in[e];
    }
  }
  return idx;
}

/// The plain loop: out[o] = f(x0[..], x1[..], ...) with each input read through broadcasting.
Tensor reference(const std::vector<LoDTensor>& xs, const Shape& out, const Fn& f) {
  return make_tensor<double>(out, [&](int64_t o) {
    std::vector<double> v;
    for (auto& x : xs) v.push_back(x.get(bcast_index(x.shape(), out, o)));
    return f(v.data());
  });
}

template <class T>
std::vector<LoDTensor> random_inputs(const std::vector<Shape>& shapes, double lo, double hi, uint64_t seed) {
  std::vector<LoDTensor> xs;
  for (size_t i = 0; i < shapes.size(); ++i) xs.push_back(random_tensor<T>(shapes[i], lo, hi, seed + 17 * i));
  return xs;
}

double sig(double x) { return 1 / (1 + std::exp(-x)); }
double gelu_ref(double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }
double gelu_tanh_ref(double x) { return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x))); }
double softplus_ref(double x, double beta, double threshold) { return beta * x > threshold ? x : std::log(1 + std::exp(beta * x)) / beta; }

struct Row {
  const char* expr;
  int inputs;
  double lo, hi;  // input range (keeps log, sqrt, pow, div in their domain)
  Fn ref;
};

// Every token at least once; nesting; constants; inputs used more than once.
const std::vector<Row> rows = {
    {"x0 x1 add", 2, -1, 1, [](const double* x) { return x[0] + x[1]; }},
    {"x0 x1 sub", 2, -1, 1, [](const double* x) { return x[0] - x[1]; }},
    {"x0 x1 mul", 2, -1, 1, [](const double* x) { return x[0] * x[1]; }},
    {"x0 x1 div", 2, 0.5, 2, [](const double* x) { return x[0] / x[1]; }},
    {"x0 x1 max", 2, -1, 1, [](const double* x) { return std::max(x[0], x[1]); }},
    {"x0 x1 min", 2, -1, 1, [](const double* x) { return std::min(x[0], x[1]); }},
    {"x0 x1 pow", 2, 0.5, 2, [](const double* x) { return std::pow(x[0], x[1]); }},
    {"x0 neg", 1, -1, 1, [](const double* x) { return -x[0]; }},
    {"x0 relu", 1, -1, 1, [](const double* x) { return std::max(x[0], 0.0); }},
    {"x0 sigmoid", 1, -3, 3, [](const double* x) { return sig(x[0]); }},
    {"x0 tanh", 1, -2, 2, [](const double* x) { return std::tanh(x[0]); }},
    {"x0 exp", 1, -2, 2, [](const double* x) { return std::exp(x[0]); }},
    {"x0 log", 1, 0.5, 3, [](const double* x) { return std::log(x[0]); }},
    {"x0 sqrt", 1, 0.5, 3, [](const double* x) { return std::sqrt(x[0]); }},
    {"x0 abs", 1, -1, 1, [](const double* x) { return std::abs(x[0]); }},
    {"x0 square", 1, -2, 2, [](const double* x) { return x[0] * x[0]; }},
    {"x0 reciprocal", 1, 0.5, 2, [](const double* x) { return 1 / x[0]; }},
    {"x0 softplus", 1, -3, 3, [](const double* x) { return std::log1p(std::exp(x[0])); }},
    {"x0 softsign", 1, -3, 3, [](const double* x) { return x[0] / (1 + std::abs(x[0])); }},
    {"x0 gelu", 1, -3, 3, [](const double* x) { return gelu_ref(x[0]); }},
    {"x0 gelu:approximate=true", 1, -3, 3, [](const double* x) { return gelu_tanh_ref(x[0]); }},
    {"x0 gelu:approximate=false", 1, -3, 3, [](const double* x) { return gelu_ref(x[0]); }},
    {"x0 softplus:beta=2,threshold=3", 1, -3, 3, [](const double* x) { return softplus_ref(x[0], 2, 3); }},  // both branches
    {"x0 softplus:threshold=0.5", 1, -3, 3, [](const double* x) { return softplus_ref(x[0], 1, 0.5); }},
    {"c:0.5 softplus:beta=-2 x0 add", 1, -1, 1, [](const double* x) { return softplus_ref(0.5, -2, 20) + x[0]; }},  // a scalar node
    {"x0 x1 mul x2 add relu", 3, -1, 1, [](const double* x) { return std::max(x[0] * x[1] + x[2], 0.0); }},
    {"x0 x1 mul x0 add x1 x0 sub tanh mul", 2, -1, 1, [](const double* x) { return (x[0] * x[1] + x[0]) * std::tanh(x[1] - x[0]); }},
    {"x0 x0 mul x0 mul", 1, -1, 1, [](const double* x) { return x[0] * x[0] * x[0]; }},
    {"x0 c:2.5 mul c:-1 add", 1, -1, 1, [](const double* x) { return x[0] * 2.5 - 1; }},
    {"c:2 c:3 mul x0 add", 1, -1, 1, [](const double* x) { return 6 + x[0]; }},
    {"c:0.25 x0 max c:1e-3 add sqrt neg", 1, -1, 1, [](const double* x) { return -std::sqrt(std::max(0.25, x[0]) + 1e-3); }},
    {"c:2 x0 div x1 exp sigmoid sub abs", 2, 0.5, 2, [](const double* x) { return std::abs(2 / x[0] - sig(std::exp(x[1]))); }},
    {"x1 x0 x2 min x3 max pow c:0.5 x2 mul softplus sub", 4, 0.5, 2,
     [](const double* x) { return std::pow(x[1], std::max(std::min(x[0], x[2]), x[3])) - std::log1p(std::exp(0.5 * x[2])); }},
    {"x0", 1, -1, 1, [](const double* x) { return x[0]; }},
    {"c:3", 1, -1, 1, [](const double*) { return 3.0; }},
    {"c:2 c:3 pow neg", 2, -1, 1, [](const double*) { return -8.0; }},
};

template <class T>
void check_rows(double atol, double rtol) {
  for (const Row& r : rows) {
    CAPTURE(r.expr);
    for (int64_t n : {1, 3, 17, 64, 100000}) {
      CAPTURE(n);
      auto xs = random_inputs<T>(std::vector<Shape>(size_t(r.inputs), Shape{n}), r.lo, r.hi, uint64_t(n));
      auto out = OpTest("fused_elementwise").inputs("X", xs).attr("expression", r.expr).run();
      check_close(to_f64(out["Out"]), reference(xs, Shape{n}, r.ref), atol, rtol, r.expr);
    }
  }
}

}  // namespace

TEST_CASE("fused_elementwise: every token and nested expressions match a plain loop (f64, f32; sizes 1..100000)") {
  check_rows<double>(1e-12, 1e-12);
  check_rows<float>(1e-5, 1e-4);
}

TEST_CASE_TEMPLATE("fused_elementwise: broadcasting [N,C]+[C], [N,C]*[N,1], scalar [1], [N,1]x[1,C], rank 3", T, float, double) {
  const double tol = std::is_same_v<T, float> ? 1e-5 : 1e-12;
  struct Case {
    std::vector<Shape> shapes;
    const char* expr;
    Fn ref;
  };
  for (int64_t n : {1, 3, 17, 64, 1000}) {
    CAPTURE(n);
    const std::vector<Case> cases = {
        {{{n, 7}, {7}}, "x0 x1 add", [](const double* x) { return x[0] + x[1]; }},
        {{{n, 7}, {n, 1}}, "x0 x1 mul", [](const double* x) { return x[0] * x[1]; }},
        {{{n, 100}, {1}}, "x0 x1 sub", [](const double* x) { return x[0] - x[1]; }},
        {{{1}, {n, 5}}, "x0 x1 div", [](const double* x) { return x[0] / x[1]; }},
        {{{n, 1}, {1, 9}}, "x0 x1 mul x0 add", [](const double* x) { return x[0] * x[1] + x[0]; }},
        {{{n, 3, 4}, {3, 1}, {4}}, "x0 x1 mul x2 add relu", [](const double* x) { return std::max(x[0] * x[1] + x[2], 0.0); }},
        {{{2, n, 3}, {2, 1, 3}, {n, 1}}, "x0 x1 max x2 min", [](const double* x) { return std::min(std::max(x[0], x[1]), x[2]); }},
        {{{7}, {n, 7}, {n, 1}, {1}}, "x0 x1 mul x2 add x3 mul tanh", [](const double* x) { return std::tanh((x[0] * x[1] + x[2]) * x[3]); }},
    };
    for (const Case& k : cases) {
      CAPTURE(k.expr);
      auto xs = random_inputs<T>(k.shapes, 0.5, 2, uint64_t(n) + 3);
      Shape out = k.shapes[0];
      for (auto& s : k.shapes) REQUIRE(ops::fused::broadcast(out, s, out));
      auto got = OpTest("fused_elementwise").inputs("X", xs).attr("expression", k.expr).run();
      CHECK(got["Out"].shape() == out);
      check_close(to_f64(got["Out"]), reference(xs, out, k.ref), tol, tol * 10, k.expr);
    }
  }
}

TEST_CASE("fused_elementwise: shape inference broadcasts, with unknown dims") {
  using ops::fused::broadcast;
  Shape s;
  REQUIRE(broadcast(Shape{-1, 3}, Shape{3}, s));
  CHECK(s == Shape{-1, 3});
  REQUIRE(broadcast(Shape{-1, 1}, Shape{1, 5}, s));
  CHECK(s == Shape{-1, 5});
  REQUIRE(broadcast(Shape{-1}, Shape{4}, s));
  CHECK(s == Shape{4});
  REQUIRE(broadcast(Shape{-1}, Shape{1}, s));
  CHECK(s == Shape{-1});
  REQUIRE(broadcast(Shape{0, 4}, Shape{1}, s));
  CHECK(s == Shape{0, 4});
  CHECK_FALSE(broadcast(Shape{2, 3}, Shape{2}, s));
  // Through the op: an unknown batch stays unknown and runs.
  auto xs = random_inputs<float>({{5, 3}, {3}, {5, 1}}, -1, 1, 1);
  Program p = OpTest("fused_elementwise").inputs("X", xs).attr("expression", "x0 x1 add x2 mul").unknown_batch().build();
  CHECK(p.global_block().var("Out_0").shape() == Shape{-1, 3});
  auto out = OpTest("fused_elementwise").inputs("X", xs).attr("expression", "x0 x1 add x2 mul").unknown_batch().run();
  check_close(to_f64(out["Out"]), reference(xs, Shape{5, 3}, [](const double* x) { return (x[0] + x[1]) * x[2]; }), 1e-6, 1e-6);
}

TEST_CASE("fused_elementwise: grad matches finite differences (f64): every token, repeated and broadcast inputs") {
  struct Case {
    std::vector<Shape> shapes;
    const char* expr;
    double lo, hi;
  };
  const std::vector<Case> cases = {
      {{{3, 4}, {3, 4}, {3, 4}}, "x0 x1 mul x2 add relu", 0.2, 1},  // positive: relu active
      {{{3, 4}, {3, 4}}, "x0 x1 sub x0 x1 div add", 0.5, 2},
      {{{3, 4}, {3, 4}}, "x0 x1 pow", 0.5, 2},
      {{{3, 4}, {3, 4}}, "x0 x1 mul x0 add x1 x0 sub tanh mul", -1, 1},  // x0 three times, x1 twice
      {{{2, 5}}, "x0 x0 mul x0 mul x0 neg exp add", -1, 1},
      {{{2, 5}}, "x0 sigmoid x0 tanh mul x0 log add x0 sqrt sub", 0.5, 2},
      {{{2, 5}}, "x0 abs x0 square add x0 reciprocal mul x0 softplus sub", 0.5, 2},
      {{{2, 5}}, "x0 softsign x0 gelu mul x0 relu add", 0.5, 2},
      {{{2, 5}}, "x0 gelu:approximate=true x0 softplus:beta=2,threshold=3 mul", -1, 1},  // softplus below its threshold
      {{{2, 5}}, "x0 c:3 add softplus:beta=2,threshold=3 x0 gelu:approximate=true add", -1, 1},  // and past it
      {{{2, 5}}, "x0 c:2 pow c:0.5 mul c:3 x0 div add", 0.5, 2},
      {{{2, 5}}, "c:2 x0 pow c:1.5 pow", 0.5, 2},  // pow's exponent gradient (d/db = a^b log a) and a constant base
      {{{4, 3}, {3}, {4, 1}}, "x0 x1 mul x2 add tanh", -1, 1},  // [N,C] with [C] and [N,1]
      {{{4, 3}, {1}}, "x0 x1 pow x1 mul", 0.5, 2},              // scalar input, used twice
      {{{3, 1}, {1, 4}}, "x0 x1 sub square", -1, 1},            // both broadcast
      {{{2, 3, 2}, {3, 1}, {2}}, "x0 x1 mul x2 div x1 add", 0.5, 2},
  };
  for (const Case& k : cases) {
    CAPTURE(k.expr);
    auto xs = random_inputs<double>(k.shapes, k.lo, k.hi, 5);
    OpTest("fused_elementwise").inputs("X", xs).attr("expression", k.expr).check_grad({"X"}, {"Out"});
  }
}

TEST_CASE("fused_elementwise: max/min grads away from ties, ties go to b (as Fluid's elementwise_max/min)") {
  // x1 = x0 +- 0.3: no tie within the finite-difference step.
  auto x0 = random_tensor<double>({3, 4}, -1, 1, 2);
  auto x1 = make_tensor<double>({3, 4}, [&](int64_t i) { return x0.get(i) + (i % 2 ? 0.3 : -0.3); });
  for (const char* e : {"x0 x1 max", "x0 x1 min", "x0 x1 max x1 x0 min mul"}) {
    CAPTURE(e);
    OpTest("fused_elementwise").inputs("X", {x0, x1}).attr("expression", e).check_grad({"X"}, {"Out"});
  }
}

namespace {
/// The grads of `xs` under `expr` with the output seeded with ones, those in `no_grad` not asked for.
std::vector<LoDTensor> grads(const std::vector<LoDTensor>& xs, const std::string& expr, const std::set<std::string>& no_grad,
                             std::vector<std::string>* names = nullptr) {
  Program p = OpTest("fused_elementwise").inputs("X", xs).attr("expression", expr).build();
  Block& b = p.global_block();
  const Operator fwd = b.op(0);
  GradContext gc(fwd, b, no_grad);
  auto gops = op_def("fused_elementwise").grad(gc);
  REQUIRE(gops.size() == 1);
  const Variable& out = b.var("Out_0");
  b.create_var("Out_0@GRAD", {.dtype = out.dtype(), .shape = out.shape()});
  add_op(b, gops[0]);
  std::vector<std::string> fetch;
  for (auto& g : gops[0].output("X@GRAD"))
    if (g != kEmptyVarName) fetch.push_back(g);
  if (names) *names = gops[0].output("X@GRAD");
  FeedMap feeds;
  for (size_t i = 0; i < xs.size(); ++i) feeds["X_" + std::to_string(i)] = xs[i];
  Shape os = xs[0].shape();
  for (auto& x : xs) ops::fused::broadcast(os, x.shape(), os);
  feeds["Out_0@GRAD"] = make_tensor<double>(os, [](int64_t) { return 1.0; });
  Scope scope;
  Executor exe;
  return exe.run(p, scope, feeds, fetch);
}
}  // namespace

TEST_CASE("fused_elementwise: unwanted input grads are @EMPTY@ and skipped; broadcast grads sum over broadcast dims") {
  auto x0 = random_tensor<double>({300, 50}, -1, 1, 1);
  auto x1 = random_tensor<double>({50}, -1, 1, 2);
  auto x2 = random_tensor<double>({300, 1}, -1, 1, 3);
  std::vector<std::string> names;
  auto g = grads({x0, x1, x2}, "x0 x1 mul x2 add", {"X_0"}, &names);
  CHECK(names == std::vector<std::string>{"@EMPTY@", "X_1@GRAD", "X_2@GRAD"});
  REQUIRE(g.size() == 2);
  // d/dx1[c] = sum_n x0[n, c]; d/dx2[n] = 50 (dOut = 1).
  for (int64_t c = 0; c < 50; ++c) {
    double s = 0;
    for (int64_t n = 0; n < 300; ++n) s += x0.get(n * 50 + c);
    CHECK(g[0].get(c) == doctest::Approx(s).epsilon(1e-12));
  }
  for (int64_t n = 0; n < 300; ++n) CHECK(g[1].get(n) == doctest::Approx(50.0));
  // An input the expression never reads gets a zero gradient.
  auto z = grads({x0, x2}, "x0 square", {});
  REQUIRE(z.size() == 2);
  for (int64_t n = 0; n < 300; ++n) CHECK(z[1].get(n) == 0.0);
  for (int64_t i = 0; i < 100; ++i) CHECK(z[0].get(i) == doctest::Approx(2 * x0.get(i)));
}

TEST_CASE("fused_elementwise: parse errors name the token and its position") {
  auto x = random_tensor<float>({3}, -1, 1, 1);
  auto err = [&](const std::string& e, size_t n = 2) {
    return error_of([&] { OpTest("fused_elementwise").inputs("X", std::vector<LoDTensor>(n, x)).attr("expression", e).build(); });
  };
  std::string m = err("x0 x1 foo");
  CHECK(m.find("fused_elementwise") != std::string::npos);
  CHECK(m.find("unknown token 'foo' at position 2") != std::string::npos);
  m = err("x0 add");
  CHECK(m.find("underflow") != std::string::npos);
  CHECK(m.find("'add' at position 1") != std::string::npos);
  m = err("x0 x1 relu");
  CHECK(m.find("leaves 2 values") != std::string::npos);
  m = err("x0 x3 add");
  CHECK(m.find("'x3' at position 1") != std::string::npos);
  CHECK(m.find("2 inputs") != std::string::npos);
  m = err("x0 c:abc mul");
  CHECK(m.find("'c:abc' at position 1") != std::string::npos);
  m = err("x0 c: mul");
  CHECK(m.find("'c:' at position 1") != std::string::npos);
  m = err("x0 x1a add");
  CHECK(m.find("'x1a' at position 1") != std::string::npos);
  CHECK(err("").find("empty") != std::string::npos);
  m = err("x0 softplus:gamma=1", 1);
  CHECK(m.find("unknown attribute 'gamma' in 'softplus:gamma=1' at position 1 (softplus has beta, threshold)") != std::string::npos);
  m = err("x0 relu:alpha=1", 1);
  CHECK(m.find("unknown attribute 'alpha' in 'relu:alpha=1' at position 1 (relu has none)") != std::string::npos);
  m = err("x0 gelu:approximate=1", 1);
  CHECK(m.find("bad value '1' of attribute 'approximate' in 'gelu:approximate=1' at position 1 (want true or false)") != std::string::npos);
  m = err("x0 softplus:beta=2x", 1);
  CHECK(m.find("bad value '2x' of attribute 'beta' in 'softplus:beta=2x' at position 1 (want a number)") != std::string::npos);
  m = err("x0 softplus:beta", 1);
  CHECK(m.find("bad attribute 'beta' in 'softplus:beta' at position 1 (want <name>=<value>)") != std::string::npos);
  m = err("x0 softplus:beta=2,", 1);
  CHECK(m.find("bad attribute '' in 'softplus:beta=2,' at position 1") != std::string::npos);
  m = err("x0 x1 add:beta=1");
  CHECK(m.find("unknown token 'add:beta=1' at position 2") != std::string::npos);
  CHECK(error_of([&] { OpTest("fused_elementwise").inputs("X", {x}).build(); }).find("expression") != std::string::npos);
}

TEST_CASE("fused_elementwise: incompatible shapes and mixed dtypes are errors naming them") {
  auto a = random_tensor<float>({2, 3});
  auto b = random_tensor<float>({4});
  auto m = error_of([&] { OpTest("fused_elementwise").inputs("X", {a, b}).attr("expression", "x0 x1 add").build(); });
  test::check_contains(m, {"fused_elementwise", "[2, 3]", "[4]"});
  // Unknown at build time, wrong at run time: the kernel names the shapes.
  auto c = random_tensor<float>({2, 3});
  auto d = random_tensor<float>({5, 3});
  m = error_of([&] { OpTest("fused_elementwise").inputs("X", {c, d}).attr("expression", "x0 x1 add").unknown_batch().run(); });
  CHECK(m.find("[2, 3]") != std::string::npos);
  CHECK(m.find("[5, 3]") != std::string::npos);
  m = error_of([&] { OpTest("fused_elementwise").inputs("X", {a, random_tensor<double>({3})}).attr("expression", "x0 x1 add").build(); });
  CHECK(m.find("dtype") != std::string::npos);
  m = error_of([&] { OpTest("fused_elementwise").inputs("X", {Tensor::from<int64_t>({1, 2})}).attr("expression", "x0").build(); });
  CHECK(m.find("floating-point") != std::string::npos);
}

TEST_CASE("fused_elementwise: empty batch, NaN and Inf do not crash") {
  auto e = OpTest("fused_elementwise").inputs("X", {Tensor(Shape{0, 4}, f32), random_tensor<float>({4})}).attr("expression", "x0 x1 mul exp").run();
  CHECK(e["Out"].shape() == Shape{0, 4});
  auto x = Tensor::from<float>({std::nanf(""), INFINITY, -INFINITY, 1.0f});
  auto t = OpTest("fused_elementwise").inputs("X", {x}).attr("expression", "x0 tanh x0 c:0 max add").run()["Out"];
  CHECK(std::isnan(t.get(0)));
  CHECK(std::isinf(t.get(1)));
  CHECK(t.get(2) == -1.0);
  CHECK(t.get(3) == doctest::Approx(std::tanh(1.0) + 1.0));
  auto inf = OpTest("fused_elementwise").inputs("X", {x}).attr("expression", "x0 c:inf min").run()["Out"];
  CHECK(inf.get(1) == INFINITY);
  CHECK(inf.get(3) == 1.0);
}

TEST_CASE("fused_elementwise: a unary token without attributes takes the op's defaults (softplus's threshold 20)") {
  auto x = Tensor::from<double>({-1.0, 19.0, 20.5, 25.0});
  auto fused = OpTest("fused_elementwise").inputs("X", {x}).attr("expression", "x0 softplus").run()["Out"];
  auto op = OpTest("softplus").input("X", x).run()["Out"];
  for (int64_t i = 0; i < 4; ++i) CHECK(fused.get(i) == op.get(i));
  CHECK(fused.get(2) == 20.5);
  CHECK(fused.get(0) == doctest::Approx(std::log1p(std::exp(-1.0))).epsilon(1e-15));
}

TEST_CASE("fused_elementwise: activation objects with options extend an expression, the options on the token") {
  Tape tape;
  auto a = data("a", f64, {-1, 3});
  auto b = data("b", f64, {-1, 3});
  Var g = oar::gelu.approximate()(a * b);
  Var s = oar::softplus.beta(2).threshold(10)(a + 1);
  Var d = oar::gelu.approximate(false)(a - b) + oar::softplus.beta(1)(b + a);  // defaults: the plain tokens
  Var h = oar::softplus.beta(0.1)(a + b);
  Topology t = tape.program({g, s, d, h});
  const Block& blk = t.main.global_block();
  REQUIRE(blk.num_ops() == 4);
  for (size_t i = 0; i < 4; ++i) CHECK(blk.op(i).type() == "fused_elementwise");
  CHECK(blk.op(0).attr<std::string>("expression") == "x0 x1 mul gelu:approximate=true");
  CHECK(blk.op(1).attr<std::string>("expression") == "x0 c:1 add softplus:beta=2,threshold=10");
  CHECK(blk.op(2).attr<std::string>("expression") == "x0 x1 sub gelu x1 x0 add softplus add");
  CHECK(blk.op(3).attr<std::string>("expression") == "x0 x1 add softplus:beta=0.1");  // the float, round-tripped
  Scope scope;
  Executor exe;
  auto av = Tensor::from<double>({-2.0, -0.5, 0.0, 0.7, 4.6, 1.6}, {2, 3});
  auto bv = Tensor::from<double>({1.5, -1.0, 2.0, 0.3, 1.1, -0.4}, {2, 3});
  auto out = exe.run(t.main, scope, {{"a", av}, {"b", bv}}, t.outputs);
  for (int64_t i = 0; i < 6; ++i) {
    CAPTURE(i);
    double x = av.get(i), y = bv.get(i);
    CHECK(out[0].get(i) == doctest::Approx(gelu_tanh_ref(x * y)).epsilon(1e-14));
    CHECK(out[1].get(i) == doctest::Approx(softplus_ref(x + 1, 2, 10)).epsilon(1e-14));
    CHECK(out[2].get(i) == doctest::Approx(gelu_ref(x - y) + softplus_ref(y + x, 1, 20)).epsilon(1e-14));
    CHECK(out[3].get(i) == doctest::Approx(softplus_ref(x + y, double(0.1f), 20)).epsilon(1e-12));
  }
  CHECK(out[1].get(4) == av.get(4) + 1);  // 2 * 5.6 > 10: x itself
  // An attribute the op does not have, or of the wrong type, is refused where the expression is extended.
  auto msg = error_of([&] { (void)oar::gelu.with("alpha", 1)(a + b); });
  CHECK(msg.find("gelu cannot be fused into an expression: gelu has no attribute 'alpha' (it has approximate)") != std::string::npos);
  msg = error_of([&] { (void)oar::gelu.with("approximate", 1)(a + b); });
  CHECK(msg.find("gelu cannot be fused into an expression: attribute 'approximate' must be bool, got int 1") != std::string::npos);
  // An activation with attributes that is not fusable still asks for a Var.
  msg = error_of([&] { (void)oar::leaky_relu(a + b); });
  CHECK(msg.find("leaky_relu cannot be fused into an expression: convert the expression to an oar::Var first") != std::string::npos);
}
