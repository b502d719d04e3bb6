// tests/ops/gru.cpp: gru through the op harness (a per-sequence, per-step loop reference; empty, length-1 and
// unsorted sequences, is_reverse, H0, every activation; f64 gradients of every input; bad input) and the
// dynamic_gru layer (parameters, options, a model that trains and allocates nothing in steady state).
#include "pch.hpp"
#include "support/heap.hpp"
#include "support/op_check.hpp"
#include "support/rnn_ref.hpp"
#include "support/toy.hpp"
#include "oar/ops/gru.hpp"

using namespace oar;
using namespace oar::test;

namespace {

struct GruCase {
  bool reverse = false, with_h0 = false, with_bias = true;
  std::string gate = "sigmoid", cand = "tanh";
};

/// Plain loops, per sequence and step, in double. Weight's first 2D*D values are W_ur [D, 2D], the rest W_c [D, D].
Tensor naive_gru(const Tensor& x, const std::vector<size_t>& seq, const Tensor& w, const Tensor& b, const Tensor& h0, const GruCase& k) {
  const int64_t T = x.dim(0), D = w.dim(0), S = int64_t(seq.size()) - 1;
  auto w_ur = [&](int64_t m, int64_t j) { return w.get(m * 2 * D + j); };
  auto w_c = [&](int64_t m, int64_t j) { return w.get(2 * D * D + m * D + j); };
  auto bias = [&](int64_t j) { return b.numel() ? b.get(j) : 0.0; };
  std::vector<double> out(size_t(T * D));
  for (int64_t s = 0; s < S; ++s) {
    std::vector<double> h(size_t(D), 0.0);
    if (h0.numel())
      for (int64_t j = 0; j < D; ++j) h[size_t(j)] = h0.get(s * D + j);
    const int64_t n = int64_t(seq[size_t(s) + 1] - seq[size_t(s)]);
    for (int64_t t = 0; t < n; ++t) {
      const int64_t r = int64_t(seq[size_t(s)]) + (k.reverse ? n - 1 - t : t);
      std::vector<double> u(static_cast<size_t>(D)), rr(static_cast<size_t>(D)), hn(static_cast<size_t>(D));
      for (int64_t j = 0; j < D; ++j) {
        double au = x.get(r * 3 * D + j) + bias(j), ar = x.get(r * 3 * D + D + j) + bias(D + j);
        for (int64_t m = 0; m < D; ++m) {
          au += h[size_t(m)] * w_ur(m, j);
          ar += h[size_t(m)] * w_ur(m, D + j);
        }
        u[size_t(j)] = rnn_act(k.gate, au);
        rr[size_t(j)] = rnn_act(k.gate, ar);
      }
      for (int64_t j = 0; j < D; ++j) {
        double ac = x.get(r * 3 * D + 2 * D + j) + bias(2 * D + j);
        for (int64_t m = 0; m < D; ++m) ac += rr[size_t(m)] * h[size_t(m)] * w_c(m, j);
        const double c = rnn_act(k.cand, ac);
        hn[size_t(j)] = (1 - u[size_t(j)]) * h[size_t(j)] + u[size_t(j)] * c;
      }
      h = hn;
      for (int64_t j = 0; j < D; ++j) out[size_t(r * D + j)] = h[size_t(j)];
    }
  }
  return Tensor::from<double>(out, {T, D});
}

/// lengths 2, 4, 0, 1, 3: an empty sequence, one of length 1, not sorted by length.
const LoD kLod{{0, 2, 6, 6, 7, 10}};
constexpr int64_t kD = 3;

template <class T>
struct GruInputs {
  Tensor x, w, b, h0;
  explicit GruInputs(uint64_t seed) {
    x = random_tensor<T>({10, 3 * kD}, -1, 1, seed);
    w = random_tensor<T>({kD, 3 * kD}, -0.8, 0.8, seed + 1);
    b = random_tensor<T>({1, 3 * kD}, -0.5, 0.5, seed + 2);
    h0 = random_tensor<T>({5, kD}, -1, 1, seed + 3);
  }
  OpTest op(const GruCase& k) const {
    OpTest t("gru");
    t.input("Input", LoDTensor(x, kLod)).input("Weight", LoDTensor(w));
    if (k.with_bias) t.input("Bias", LoDTensor(b));
    if (k.with_h0) t.input("H0", LoDTensor(h0));
    t.attr("is_reverse", k.reverse).attr("gate_activation", k.gate).attr("activation", k.cand);
    return t;
  }
};

std::string describe(const GruCase& k) { return fmt::format("reverse={} h0={} bias={} gate={} cand={}", k.reverse, k.with_h0, k.with_bias, k.gate, k.cand); }

}  // namespace

TEST_CASE_TEMPLATE("gru: forward matches a per-sequence, per-step loop (empty, length-1, unsorted sequences)", T, float, double) {
  const GruCase cases[] = {
      {},
      {.reverse = true},
      {.with_h0 = true},
      {.reverse = true, .with_h0 = true, .with_bias = false},
      {.with_h0 = true, .gate = "sigmoid", .cand = "relu"},
      {.reverse = true, .with_h0 = true, .gate = "tanh", .cand = "identity"},
      {.gate = "identity", .cand = "sigmoid"},
      {.with_h0 = true, .gate = "relu", .cand = "tanh"},
  };
  uint64_t seed = 21;
  for (const GruCase& k : cases) {
    const std::string what = describe(k);
    CAPTURE(what);
    GruInputs<T> in(seed += 10);
    auto outs = in.op(k).run();
    Tensor ref = naive_gru(to_f64(in.x), kLod[0], to_f64(in.w), k.with_bias ? to_f64(in.b) : Tensor(), k.with_h0 ? to_f64(in.h0) : Tensor(), k);
    check_close(to_f64(outs["Hidden"]), ref, 1e-5, 1e-5, what);
    CHECK(outs["Hidden"].lod() == kLod);
    CHECK(outs["Hidden"].dtype() == in.x.dtype());
  }
}

TEST_CASE("gru: gradients of Input, Weight, Bias and H0 match finite differences (f64)") {
  const GruCase cases[] = {
      {.with_h0 = true},
      {.reverse = true, .with_h0 = true},
      {.reverse = true},
      {.with_h0 = true, .gate = "tanh", .cand = "identity"},
      {.with_h0 = true, .gate = "identity", .cand = "sigmoid"},
  };
  uint64_t seed = 200;
  for (const GruCase& k : cases) {
    const std::string what = describe(k);
    CAPTURE(what);
    GruInputs<double> in(seed += 10);
    std::vector<std::string> check{"Input", "Weight", "Bias"};
    if (k.with_h0) check.push_back("H0");
    in.op(k).check_grad(check, {"Hidden"}, 1e-4, 1e-4);
  }
}

TEST_CASE("gru: 900 sequences on 2 threads: the step passes split over rows; forward and Weight / Bias gradients hold") {
  ThreadsForTest threads(2);
  const std::vector<size_t> off = random_offsets(900, 3, 19);
  const LoD lod{off};
  const int64_t rows = int64_t(off.back()), D = 8;
  const GruCase k{.with_h0 = true};
  auto x = random_tensor<double>({rows, 3 * D}, -1, 1, 1);
  auto w = random_tensor<double>({D, 3 * D}, -0.5, 0.5, 2);
  auto b = random_tensor<double>({1, 3 * D}, -0.5, 0.5, 3);
  auto h0 = random_tensor<double>({900, D}, -1, 1, 4);
  auto op = [&] {
    OpTest t("gru");
    t.input("Input", LoDTensor(x, lod)).input("Weight", LoDTensor(w)).input("Bias", LoDTensor(b)).input("H0", LoDTensor(h0));
    return t;
  };
  auto outs = op().run();
  check_close(outs["Hidden"], naive_gru(x, off, w, b, h0, k), 1e-12, 1e-10, "Hidden");
  op().check_grad({"Weight", "Bias"}, {"Hidden"}, 1e-4, 1e-4);
}

TEST_CASE("gru: a bad Weight, Bias or H0 shape, a missing LoD or a bad activation is an oar::Error naming the op") {
  GruInputs<float> in(1);
  auto w = error_of([&] { OpTest("gru").input("Input", LoDTensor(in.x, kLod)).input("Weight", LoDTensor(random_tensor<float>({kD, 4 * kD}))).build(); });
  CHECK(contains(w, "gru"));
  CHECK(contains(w, "Weight must be [D, 3D]"));
  auto b = error_of([&] {
    OpTest("gru").input("Input", LoDTensor(in.x, kLod)).input("Weight", LoDTensor(in.w)).input("Bias", LoDTensor(random_tensor<float>({1, 2 * kD}))).build();
  });
  CHECK(contains(b, "gru"));
  CHECK(contains(b, "Bias must be"));
  auto nolod = error_of([&] { OpTest("gru").input("Input", LoDTensor(in.x)).input("Weight", LoDTensor(in.w)).run(); });
  CHECK(contains(nolod, "gru"));
  CHECK(contains(nolod, "needs a LoD"));
  auto h0 = error_of([&] { OpTest("gru").input("Input", LoDTensor(in.x, kLod)).input("Weight", LoDTensor(in.w)).input("H0", LoDTensor(random_tensor<float>({6, kD}))).run(); });
  CHECK(contains(h0, "gru"));
  CHECK(contains(h0, "for 5 sequences"));
  auto bad = error_of([&] { in.op({}).attr("activation", std::string("swish")).build(); });
  CHECK(contains(bad, "gru"));
  CHECK(contains(bad, "swish"));
}

// ---- the dynamic_gru layer

TEST_CASE("dynamic_gru: Weight [D, 3D], Bias [1, 3D], options reach the op, h0; a size that does not fit x is an oar::Error") {
  Tape tape;
  Var x = data("x", f32, {-1, 6}).lod_level(1);
  Var h0 = data("h0", f32, {-1, 2});
  DynamicGruLayer a = dynamic_gru(x, 2);
  DynamicGruLayer b = dynamic_gru(x, 2, h0).is_reverse().gate_activation(RnnAct::relu).candidate_activation(RnnAct::identity).bias(false);
  CHECK(a.shape() == Shape{-1, 2});
  CHECK(a.lod_level() == 1);
  Topology topo = tape.program({a, b});
  std::vector<const Operator*> grus;
  for (auto* op : topo.main.global_block().ops())
    if (op->type() == "gru") grus.push_back(op);
  REQUIRE(grus.size() == 2);
  const Block& g = topo.main.global_block();
  CHECK(g.var(grus[0]->input(ops::Gru::weight)[0]).shape() == Shape{2, 6});
  CHECK(g.var(grus[0]->input(ops::Gru::bias)[0]).shape() == Shape{1, 6});
  CHECK(grus[0]->attr(ops::Gru::activation) == "tanh");
  CHECK(grus[1]->input(ops::Gru::bias).empty());
  CHECK(grus[1]->attr(ops::Gru::is_reverse) == true);
  CHECK(grus[1]->attr(ops::Gru::gate_activation) == "relu");
  CHECK(grus[1]->attr(ops::Gru::activation) == "identity");
  CHECK(grus[1]->input(ops::Gru::h0) == std::vector<std::string>{"h0"});
  auto wrong = dynamic_gru(x, 3);
  const std::string e = error_of([&] { tape.program({wrong}); });
  CHECK(contains(e, "dynamic_gru: x (the projected input, 3 * size) must be [N, 9]"));
}

TEST_CASE("dynamic_gru: a small model trains on ragged batches; a step allocates nothing once shapes repeat") {
  Tape tape;
  Var x = data("x", f32, {-1, 2}).lod_level(1);
  Var y = data("y", f32, {-1, 1});
  Var h = dynamic_gru(fc(x, 3 * 8), 8);
  Var cost = mean(square_error_cost(fc(sequence_last_step(h), 1), y));
  Model model(tape.program({cost}));
  Optimizer opt(model, cost, optim::adam(0.02));
  // Target: the sum of the first column of each sequence.
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<double> u(-0.5, 0.5);
  auto batch = [&](std::vector<size_t> lens) {
    std::vector<size_t> off{0};
    std::vector<float> xs, ys;
    for (size_t n : lens) {
      off.push_back(off.back() + n);
      double s = 0;
      for (size_t i = 0; i < n; ++i) {
        const double a = u(rng), b = u(rng);
        xs.push_back(float(a));
        xs.push_back(float(b));
        s += a;
      }
      ys.push_back(float(s));
    }
    return FeedMap{{"x", LoDTensor(Tensor::from<float>(xs, {int64_t(off.back()), 2}), {off})}, {"y", LoDTensor(Tensor::from<float>(ys, {int64_t(lens.size()), 1}))}};
  };
  std::vector<FeedMap> batches;
  for (int i = 0; i < 30; ++i) batches.push_back(batch({size_t(1 + i % 4), 3, 5, 2, size_t(6 - i % 3), 1}));
  const auto [first, last] = oar::test::train_epochs(opt, batches, 8);
  MESSAGE("mean loss: first epoch " << first << ", last epoch " << last);
  CHECK(last < 0.2 * first);
  std::vector<LoDTensor> out;
  CHECK(oar_test::steady_state_allocations([&] { opt.step(batches[0], out); }) == 0);
}
