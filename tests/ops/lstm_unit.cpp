// tests/ops/lstm_unit.cpp: lstm_unit through the op harness (a per-row loop reference with Fluid's gate order
// [i, f, o, g] and forget_bias; f64 gradients of X and C_prev; bad shapes) and the lstm_unit layer (the fc over
// [x_t, h_prev] it records, and a recurrence it unrolls that trains).
#include "pch.hpp"
#include "support/op_check.hpp"
#include "oar/ops/lstm_unit.hpp"
#include "oar/ops/mul.hpp"
#include "oar/ops/elementwise_binary.hpp"

using namespace oar;
using namespace oar::test;

namespace {

double sigm(double v) { return 1 / (1 + std::exp(-v)); }

/// Per row and unit, in double: {C, H}.
std::pair<Tensor, Tensor> naive_lstm_unit(const Tensor& x, const Tensor& c_prev, double forget_bias) {
  const int64_t N = c_prev.dim(0), D = c_prev.dim(1);
  std::vector<double> c(size_t(N * D)), h(size_t(N * D));
  for (int64_t r = 0; r < N; ++r)
    for (int64_t j = 0; j < D; ++j) {
      const double i = sigm(x.get(r * 4 * D + j)), f = sigm(x.get(r * 4 * D + D + j) + forget_bias), o = sigm(x.get(r * 4 * D + 2 * D + j));
      const double g = std::tanh(x.get(r * 4 * D + 3 * D + j));
      const double cv = f * c_prev.get(r * D + j) + i * g;
      c[size_t(r * D + j)] = cv;
      h[size_t(r * D + j)] = o * std::tanh(cv);
    }
  return {Tensor::from<double>(c, {N, D}), Tensor::from<double>(h, {N, D})};
}

}  // namespace

TEST_CASE_TEMPLATE("lstm_unit: forward matches a per-row loop, with and without forget_bias", T, float, double) {
  for (double fb : {0.0, 1.0, -0.5}) {
    CAPTURE(fb);
    auto x = random_tensor<T>({5, 4 * 3}, -2, 2, 3);
    auto c = random_tensor<T>({5, 3}, -1, 1, 4);
    auto outs = OpTest("lstm_unit").input("X", LoDTensor(x)).input("C_prev", LoDTensor(c)).attr("forget_bias", float(fb)).unknown_batch().run();
    auto [rc, rh] = naive_lstm_unit(to_f64(x), to_f64(c), fb);
    check_close(to_f64(outs["C"]), rc, 1e-5, 1e-5, "C");
    check_close(to_f64(outs["H"]), rh, 1e-5, 1e-5, "H");
  }
}

TEST_CASE("lstm_unit: gradients of X and C_prev match finite differences (f64)") {
  auto x = random_tensor<double>({4, 4 * 3}, -2, 2, 5);
  auto c = random_tensor<double>({4, 3}, -1, 1, 6);
  OpTest("lstm_unit").input("X", LoDTensor(x)).input("C_prev", LoDTensor(c)).attr("forget_bias", 0.5f).check_grad({"X", "C_prev"}, {"C", "H"}, 1e-4, 1e-4);
  OpTest("lstm_unit").input("X", LoDTensor(x)).input("C_prev", LoDTensor(c)).check_grad({"X", "C_prev"}, {"H"}, 1e-4, 1e-4);
  OpTest("lstm_unit").input("X", LoDTensor(x)).input("C_prev", LoDTensor(c)).check_grad({"X", "C_prev"}, {"C"}, 1e-4, 1e-4);
}

TEST_CASE("lstm_unit: X not [N, 4D] for C_prev [N, D] is an oar::Error naming the op") {
  auto wide = error_of([] { OpTest("lstm_unit").input("X", LoDTensor(random_tensor<float>({5, 10}))).input("C_prev", LoDTensor(random_tensor<float>({5, 3}))).build(); });
  CHECK(contains(wide, "lstm_unit"));
  CHECK(contains(wide, "X must be [N, 4D]"));
  auto rows = error_of([] { OpTest("lstm_unit").input("X", LoDTensor(random_tensor<float>({4, 12}))).input("C_prev", LoDTensor(random_tensor<float>({5, 3}))).build(); });
  CHECK(contains(rows, "lstm_unit"));
  auto ints = error_of([] { OpTest("lstm_unit").input("X", LoDTensor(Tensor::from<int64_t>(std::vector<int64_t>(12, 1), {1, 12}))).input("C_prev", LoDTensor(random_tensor<float>({1, 3}))).build(); });
  CHECK(contains(ints, "lstm_unit: X must be a floating-point tensor"));
}

// ---- the lstm_unit layer

TEST_CASE("lstm_unit layer: one fc over [x_t, h_prev] (W [M + D, 4D], b [4D]), then the op; h and cell()") {
  Tape tape;
  Var x = data("x", f32, {-1, 5});
  Var h = data("h", f32, {-1, 3});
  Var c = data("c", f32, {-1, 3});
  LstmUnitLayer step = lstm_unit(x, h, c).forget_bias(1.0);
  CHECK(step.shape() == Shape{-1, 3});
  CHECK(step.cell().shape() == Shape{-1, 3});
  Topology topo = tape.program({step, step.cell()});
  CHECK(op_types(topo.main) == std::vector<std::string>{"concat", "mul", "elementwise_add", "lstm_unit"});
  const Block& g = topo.main.global_block();
  const Operator& mul = g.op(1);
  CHECK(g.var(mul.input(ops::Mul::y)[0]).shape() == Shape{8, 12});
  const Operator& add = g.op(2);
  CHECK(g.var(add.input(ops::ElementwiseAdd::y)[0]).shape() == Shape{12});
  CHECK(g.op(3).attr(ops::LstmUnit::forget_bias) == 1.0f);
  CHECK(topo.outputs[0] == g.op(3).output(ops::LstmUnit::h)[0]);
  CHECK(topo.outputs[1] == g.op(3).output(ops::LstmUnit::c)[0]);
  Var bad = lstm_unit(x, c, data("c4", f32, {-1, 4}));
  CHECK(contains(error_of([&] { tape.program({bad}); }), "lstm_unit: h_prev must be [N, 4] like c_prev"));
}

TEST_CASE("lstm_unit layer: three unrolled steps (shared parameters) learn the sum of their inputs") {
  Tape tape;
  Var xs[3] = {data("x0", f32, {-1, 1}), data("x1", f32, {-1, 1}), data("x2", f32, {-1, 1})};
  Var y = data("y", f32, {-1, 1});
  Var h0 = data("h0", f32, {-1, 8});
  Var c0 = data("c0", f32, {-1, 8});
  auto step = shared([](const Var& x, const Var& h, const Var& c) { return lstm_unit(x, h, c); });
  Var h = h0, c = c0;
  for (auto& x : xs) {
    LstmUnitLayer s = step(x, h, c);
    h = s;
    c = s.cell();
  }
  Var cost = mean(square_error_cost(fc(h, 1), y));
  Topology topo = tape.program({cost});
  int muls = 0;
  std::set<std::string> weights;
  for (auto* op : topo.main.global_block().ops())
    if (op->type() == "mul") ++muls, weights.insert(op->input(ops::Mul::y)[0]);
  CHECK(muls == 4);
  CHECK(weights.size() == 2);  // one shared by the steps, the head's
  Model model(std::move(topo));
  Optimizer opt(model, cost, optim::adam(0.02));
  std::mt19937_64 rng(9);
  std::uniform_real_distribution<float> u(-1, 1);
  const int64_t N = 16;
  std::vector<LoDTensor> out;
  double first = 0, last = 0;
  for (int it = 0; it < 300; ++it) {
    std::vector<float> v[3], s(N);
    for (auto& vi : v)
      for (int64_t i = 0; i < N; ++i) vi.push_back(u(rng));
    for (int64_t i = 0; i < N; ++i) s[size_t(i)] = v[0][size_t(i)] + v[1][size_t(i)] + v[2][size_t(i)];
    FeedMap f{{"x0", LoDTensor(Tensor::from<float>(v[0], {N, 1}))}, {"x1", LoDTensor(Tensor::from<float>(v[1], {N, 1}))},
              {"x2", LoDTensor(Tensor::from<float>(v[2], {N, 1}))}, {"y", LoDTensor(Tensor::from<float>(s, {N, 1}))},
              {"h0", LoDTensor(Tensor::from<float>(std::vector<float>(N * 8, 0.0f), {N, 8}))},
              {"c0", LoDTensor(Tensor::from<float>(std::vector<float>(N * 8, 0.0f), {N, 8}))}};
    opt.step(f, out);
    if (it < 20) first += out[0].get(0) / 20;
    if (it >= 280) last += out[0].get(0) / 20;
  }
  MESSAGE("mean loss: first 20 steps " << first << ", last 20 " << last);
  CHECK(last < 0.05 * first);
}
