// tests/ops/gru_unit.cpp: gru_unit through the op harness (a per-row loop reference, every activation by
// Fluid's integer, with and without Bias; f64 gradients of Input, HiddenPrev, Weight and Bias; bad input) and
// the gru_unit layer.
#include "pch.hpp"
#include "support/op_check.hpp"
#include "oar/ops/gru_unit.hpp"

using namespace oar;
using namespace oar::test;

namespace {

/// Fluid's integers: 0 identity, 1 sigmoid, 2 tanh, 3 relu.
double act(int a, double v) {
  switch (a) {
    case 1: return 1 / (1 + std::exp(-v));
    case 2: return std::tanh(v);
    case 3: return v > 0 ? v : 0;
    default: return v;
  }
}

/// One GRU step per row, in double: {Gate [u, r, c], ResetHiddenPrev, Hidden}.
std::tuple<Tensor, Tensor, Tensor> naive_gru_unit(const Tensor& x, const Tensor& hp, const Tensor& w, const Tensor& b, int gate, int cand) {
  const int64_t N = x.dim(0), D = hp.dim(1);
  auto bias = [&](int64_t j) { return b.numel() ? b.get(j) : 0.0; };
  std::vector<double> g(size_t(N * 3 * D)), rh(size_t(N * D)), h(size_t(N * D));
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t j = 0; j < 2 * D; ++j) {
      double a = x.get(n * 3 * D + j) + bias(j);
      for (int64_t m = 0; m < D; ++m) a += hp.get(n * D + m) * w.get(m * 2 * D + j);
      g[size_t(n * 3 * D + j)] = act(gate, a);
    }
    for (int64_t j = 0; j < D; ++j) rh[size_t(n * D + j)] = g[size_t(n * 3 * D + D + j)] * hp.get(n * D + j);
    for (int64_t j = 0; j < D; ++j) {
      double a = x.get(n * 3 * D + 2 * D + j) + bias(2 * D + j);
      for (int64_t m = 0; m < D; ++m) a += rh[size_t(n * D + m)] * w.get(2 * D * D + m * D + j);
      const double c = act(cand, a), u = g[size_t(n * 3 * D + j)];
      g[size_t(n * 3 * D + 2 * D + j)] = c;
      h[size_t(n * D + j)] = (1 - u) * hp.get(n * D + j) + u * c;
    }
  }
  return {Tensor::from<double>(g, {N, 3 * D}), Tensor::from<double>(rh, {N, D}), Tensor::from<double>(h, {N, D})};
}

constexpr int64_t kD = 4;

}  // namespace

TEST_CASE_TEMPLATE("gru_unit: forward matches a per-row loop for every activation, with and without Bias", T, float, double) {
  const std::tuple<int, int, bool> cases[] = {{1, 2, true}, {0, 3, true}, {2, 0, false}, {3, 1, true}, {1, 1, false}};
  uint64_t seed = 30;
  for (auto [gate, cand, with_bias] : cases) {
    CAPTURE(gate);
    CAPTURE(cand);
    CAPTURE(with_bias);
    auto x = random_tensor<T>({5, 3 * kD}, -1, 1, seed++);
    auto hp = random_tensor<T>({5, kD}, -1, 1, seed++);
    auto w = random_tensor<T>({kD, 3 * kD}, -0.8, 0.8, seed++);
    auto b = random_tensor<T>({1, 3 * kD}, -0.5, 0.5, seed++);
    OpTest op("gru_unit");
    op.input("Input", LoDTensor(x)).input("HiddenPrev", LoDTensor(hp)).input("Weight", LoDTensor(w)).attr("gate_activation", gate).attr("activation", cand);
    if (with_bias) op.input("Bias", LoDTensor(b));
    auto outs = op.run();
    auto [rg, rrh, rh] = naive_gru_unit(to_f64(x), to_f64(hp), to_f64(w), with_bias ? to_f64(b) : Tensor(), gate, cand);
    check_close(to_f64(outs["Gate"]), rg, 1e-5, 1e-5, "Gate");
    check_close(to_f64(outs["ResetHiddenPrev"]), rrh, 1e-5, 1e-5, "ResetHiddenPrev");
    check_close(to_f64(outs["Hidden"]), rh, 1e-5, 1e-5, "Hidden");
  }
}

TEST_CASE("gru_unit: gradients of Input, HiddenPrev, Weight and Bias match finite differences (f64)") {
  const std::pair<int, int> cases[] = {{1, 2}, {2, 0}, {0, 1}};
  uint64_t seed = 50;
  for (auto [gate, cand] : cases) {
    CAPTURE(gate);
    CAPTURE(cand);
    OpTest op("gru_unit");
    op.input("Input", LoDTensor(random_tensor<double>({4, 3 * kD}, -1, 1, seed++))).input("HiddenPrev", LoDTensor(random_tensor<double>({4, kD}, -1, 1, seed++)));
    op.input("Weight", LoDTensor(random_tensor<double>({kD, 3 * kD}, -0.8, 0.8, seed++))).input("Bias", LoDTensor(random_tensor<double>({1, 3 * kD}, -0.5, 0.5, seed++)));
    op.attr("gate_activation", gate).attr("activation", cand);
    op.check_grad({"Input", "HiddenPrev", "Weight", "Bias"}, {"Hidden"}, 1e-4, 1e-4);
  }
}

TEST_CASE("gru_unit: a bad Weight or HiddenPrev shape or an activation outside 0..3 is an oar::Error naming the op") {
  auto x = LoDTensor(random_tensor<float>({5, 3 * kD}));
  auto hp = LoDTensor(random_tensor<float>({5, kD}));
  auto w = error_of([&] { OpTest("gru_unit").input("Input", x).input("HiddenPrev", hp).input("Weight", LoDTensor(random_tensor<float>({kD, 4 * kD}))).build(); });
  CHECK(contains(w, "gru_unit"));
  CHECK(contains(w, "Weight must be [D, 3D]"));
  auto h = error_of([&] {
    OpTest("gru_unit").input("Input", x).input("HiddenPrev", LoDTensor(random_tensor<float>({4, kD}))).input("Weight", LoDTensor(random_tensor<float>({kD, 3 * kD}))).build();
  });
  CHECK(contains(h, "gru_unit"));
  CHECK(contains(h, "HiddenPrev must be"));
  auto a = error_of([&] { OpTest("gru_unit").input("Input", x).input("HiddenPrev", hp).input("Weight", LoDTensor(random_tensor<float>({kD, 3 * kD}))).attr("activation", 5).build(); });
  CHECK(contains(a, "gru_unit"));
  CHECK(contains(a, "activation"));
}

// ---- the gru_unit layer

TEST_CASE("gru_unit layer: Weight [D, 3D], Bias [1, 3D], the activations as integers; hidden, gate() and reset_hidden_prev()") {
  Tape tape;
  Var x = data("x", f32, {-1, 9});
  Var h = data("h", f32, {-1, 3});
  GruUnitLayer u = gru_unit(x, h, 9).gate_activation(RnnAct::tanh).candidate_activation(RnnAct::relu);
  CHECK(u.shape() == Shape{-1, 3});
  CHECK(u.gate().shape() == Shape{-1, 9});
  CHECK(u.reset_hidden_prev().shape() == Shape{-1, 3});
  Topology topo = tape.program({u, u.gate()});
  REQUIRE(op_types(topo.main) == std::vector<std::string>{"gru_unit"});
  const Block& g = topo.main.global_block();
  const Operator& op = g.op(0);
  CHECK(g.var(op.input(ops::GruUnit::weight)[0]).shape() == Shape{3, 9});
  CHECK(g.var(op.input(ops::GruUnit::bias)[0]).shape() == Shape{1, 9});
  CHECK(op.attr(ops::GruUnit::gate_activation) == int32_t(RnnAct::tanh));
  CHECK(op.attr(ops::GruUnit::activation) == int32_t(RnnAct::relu));
  CHECK(topo.outputs[0] == op.output(ops::GruUnit::hidden)[0]);
  CHECK(topo.outputs[1] == op.output(ops::GruUnit::gate)[0]);
  CHECK(contains(error_of([&] { gru_unit(x, h, 8); }), "gru_unit: size must be 3 * D"));
  auto wrong = gru_unit(x, h, 6);
  CHECK(contains(error_of([&] { tape.program({wrong}); }), "gru_unit: input (the projected input, size = 3D) must be [N, 6]"));
}
