// tests/ops/lstm.cpp: lstm through the op harness (a per-sequence, per-step loop reference; empty, length-1
// and unsorted sequences, is_reverse, peepholes, H0 / C0, every activation; f64 gradients of every input; bad
// input) and the dynamic_lstm layer: its parameters and options, and a small model that trains over ragged
// batches and whose steady-state step allocates nothing on the heap.
#include "pch.hpp"
#include "support/heap.hpp"
#include "support/op_check.hpp"
#include "support/rnn_ref.hpp"
#include "support/toy.hpp"
#include "oar/ops/lstm.hpp"

using namespace oar;
using namespace oar::test;

namespace {

struct LstmCase {
  bool peep = true, reverse = false, with_h0 = false, with_c0 = false;
  std::string gate = "sigmoid", cell = "tanh", cand = "tanh";
};

/// Plain loops: per sequence, per time step, in double. b may be empty (no Bias); h0 / c0 empty for zeros.
std::pair<Tensor, Tensor> naive_lstm(const Tensor& x, const std::vector<size_t>& seq, const Tensor& w, const Tensor& b, const Tensor& h0,
                                     const Tensor& c0, const LstmCase& k) {
  const int64_t T = x.dim(0), D = w.dim(0), S = int64_t(seq.size()) - 1;
  std::vector<double> hid(size_t(T * D)), cel(size_t(T * D));
  auto bias = [&](int64_t j) { return b.numel() ? b.get(j) : 0.0; };
  for (int64_t s = 0; s < S; ++s) {
    std::vector<double> h(size_t(D), 0.0), c(size_t(D), 0.0);
    for (int64_t j = 0; j < D; ++j) {
      if (h0.numel()) h[size_t(j)] = h0.get(s * D + j);
      if (c0.numel()) c[size_t(j)] = c0.get(s * D + j);
    }
    const int64_t n = int64_t(seq[size_t(s) + 1] - seq[size_t(s)]);
    for (int64_t t = 0; t < n; ++t) {
      const int64_t r = int64_t(seq[size_t(s)]) + (k.reverse ? n - 1 - t : t);
      std::vector<double> a(static_cast<size_t>(4 * D));
      for (int64_t j = 0; j < 4 * D; ++j) {
        double v = x.get(r * 4 * D + j) + bias(j);
        for (int64_t m = 0; m < D; ++m) v += h[size_t(m)] * w.get(m * 4 * D + j);
        a[size_t(j)] = v;
      }
      std::vector<double> cn(static_cast<size_t>(D));
      for (int64_t j = 0; j < D; ++j) {
        const double wic = k.peep ? bias(4 * D + j) : 0, wfc = k.peep ? bias(5 * D + j) : 0, woc = k.peep ? bias(6 * D + j) : 0;
        const double cand = rnn_act(k.cand, a[size_t(j)]);
        const double i = rnn_act(k.gate, a[size_t(D + j)] + wic * c[size_t(j)]);
        const double f = rnn_act(k.gate, a[size_t(2 * D + j)] + wfc * c[size_t(j)]);
        cn[size_t(j)] = f * c[size_t(j)] + i * cand;
        const double o = rnn_act(k.gate, a[size_t(3 * D + j)] + woc * cn[size_t(j)]);
        h[size_t(j)] = o * rnn_act(k.cell, cn[size_t(j)]);
      }
      c = cn;
      for (int64_t j = 0; j < D; ++j) {
        hid[size_t(r * D + j)] = h[size_t(j)];
        cel[size_t(r * D + j)] = c[size_t(j)];
      }
    }
  }
  return {Tensor::from<double>(hid, {T, D}), Tensor::from<double>(cel, {T, D})};
}

/// lengths 3, 0, 1, 2, 4: an empty sequence, one of length 1, not sorted by length.
const LoD kLod{{0, 3, 3, 4, 6, 10}};
constexpr int64_t kD = 3;

template <class T>
struct LstmInputs {
  Tensor x, w, b, h0, c0;
  LstmInputs(const LstmCase& k, uint64_t seed) {
    x = random_tensor<T>({10, 4 * kD}, -1, 1, seed);
    w = random_tensor<T>({kD, 4 * kD}, -0.7, 0.7, seed + 1);
    b = random_tensor<T>({1, (k.peep ? 7 : 4) * kD}, -0.5, 0.5, seed + 2);
    h0 = random_tensor<T>({5, kD}, -1, 1, seed + 3);
    c0 = random_tensor<T>({5, kD}, -1, 1, seed + 4);
  }
  OpTest op(const LstmCase& k) const {
    OpTest t("lstm");
    t.input("Input", LoDTensor(x, kLod)).input("Weight", LoDTensor(w)).input("Bias", LoDTensor(b));
    if (k.with_h0) t.input("H0", LoDTensor(h0));
    if (k.with_c0) t.input("C0", LoDTensor(c0));
    t.attr("use_peepholes", k.peep).attr("is_reverse", k.reverse);
    t.attr("gate_activation", k.gate).attr("cell_activation", k.cell).attr("candidate_activation", k.cand);
    return t;
  }
};

std::string describe(const LstmCase& k) {
  return fmt::format("peep={} reverse={} h0={} c0={} gate={} cell={} cand={}", k.peep, k.reverse, k.with_h0, k.with_c0, k.gate, k.cell, k.cand);
}

}  // namespace

TEST_CASE_TEMPLATE("lstm: forward matches a per-sequence, per-step loop (empty, length-1, unsorted sequences)", T, float, double) {
  const LstmCase cases[] = {
      {},
      {.peep = false},
      {.peep = true, .reverse = true},
      {.peep = false, .reverse = true, .with_h0 = true, .with_c0 = true},
      {.peep = true, .with_h0 = true},
      {.peep = true, .with_c0 = true},
      {.peep = true, .gate = "sigmoid", .cell = "identity", .cand = "relu"},
      {.peep = false, .reverse = true, .with_h0 = true, .gate = "tanh", .cell = "relu", .cand = "identity"},
      {.peep = true, .with_c0 = true, .gate = "identity", .cell = "sigmoid", .cand = "sigmoid"},
  };
  uint64_t seed = 11;
  for (const LstmCase& k : cases) {
    const std::string what = describe(k);
    CAPTURE(what);
    LstmInputs<T> in(k, seed += 10);
    auto outs = in.op(k).run();
    auto [h, c] = naive_lstm(to_f64(in.x), kLod[0], to_f64(in.w), to_f64(in.b), k.with_h0 ? to_f64(in.h0) : Tensor(), k.with_c0 ? to_f64(in.c0) : Tensor(), k);
    check_close(to_f64(outs["Hidden"]), h, 1e-5, 1e-5, what + " Hidden");
    check_close(to_f64(outs["Cell"]), c, 1e-5, 1e-5, what + " Cell");
    CHECK(outs["Hidden"].lod() == kLod);
    CHECK(outs["Cell"].lod() == kLod);
    CHECK(outs["Hidden"].dtype() == in.x.dtype());
  }
}

TEST_CASE("lstm: without Bias, one sequence, all sequences empty") {
  LstmCase k{.peep = false};
  auto x = random_tensor<double>({4, 4 * kD}, -1, 1, 3);
  auto w = random_tensor<double>({kD, 4 * kD}, -1, 1, 4);
  auto outs = OpTest("lstm").input("Input", LoDTensor(x, {{0, 4}})).input("Weight", LoDTensor(w)).attr("use_peepholes", false).run();
  auto [h, c] = naive_lstm(x, {0, 4}, w, Tensor(), Tensor(), Tensor(), k);
  check_close(outs["Hidden"], h, 1e-12, 1e-12, "Hidden");
  check_close(outs["Cell"], c, 1e-12, 1e-12, "Cell");
  // Three empty sequences: no rows.
  auto none = OpTest("lstm").input("Input", LoDTensor(random_tensor<double>({0, 4 * kD}), {{0, 0, 0, 0}})).input("Weight", LoDTensor(w))
                  .attr("use_peepholes", false).run();
  CHECK(none["Hidden"].shape() == Shape{0, kD});
}

TEST_CASE("lstm: gradients of Input, Weight, Bias, H0 and C0 match finite differences (f64)") {
  const LstmCase cases[] = {
      {.peep = true, .with_h0 = true, .with_c0 = true},
      {.peep = false, .reverse = true, .with_h0 = true, .with_c0 = true},
      {.peep = true, .reverse = true},
      {.peep = true, .with_c0 = true, .gate = "sigmoid", .cell = "identity", .cand = "identity"},
      {.peep = false, .with_h0 = true, .gate = "tanh", .cell = "sigmoid", .cand = "tanh"},
  };
  uint64_t seed = 100;
  for (const LstmCase& k : cases) {
    const std::string what = describe(k);
    CAPTURE(what);
    LstmInputs<double> in(k, seed += 10);
    std::vector<std::string> check{"Input", "Weight", "Bias"};
    if (k.with_h0) check.push_back("H0");
    if (k.with_c0) check.push_back("C0");
    in.op(k).check_grad(check, {"Hidden", "Cell"}, 1e-4, 1e-4);
    in.op(k).check_grad(check, {"Hidden"}, 1e-4, 1e-4);  // Cell@GRAD all zeros
  }
}

TEST_CASE("lstm: 300 sequences on 2 threads: the step passes split over rows; forward and Weight / Bias gradients hold") {
  ThreadsForTest threads(2);
  const std::vector<size_t> off = random_offsets(300, 4, 17);
  const LoD lod{off};
  const int64_t rows = int64_t(off.back()), D = 8;
  const LstmCase k{.peep = true, .reverse = true, .with_h0 = true, .with_c0 = true};
  auto x = random_tensor<double>({rows, 4 * D}, -1, 1, 1);
  auto w = random_tensor<double>({D, 4 * D}, -0.5, 0.5, 2);
  auto b = random_tensor<double>({1, 7 * D}, -0.5, 0.5, 3);
  auto h0 = random_tensor<double>({300, D}, -1, 1, 4);
  auto c0 = random_tensor<double>({300, D}, -1, 1, 5);
  auto op = [&] {
    OpTest t("lstm");
    t.input("Input", LoDTensor(x, lod)).input("Weight", LoDTensor(w)).input("Bias", LoDTensor(b)).input("H0", LoDTensor(h0)).input("C0", LoDTensor(c0));
    return t.attr("is_reverse", true);
  };
  auto outs = op().run();
  auto [h, c] = naive_lstm(x, off, w, b, h0, c0, k);
  check_close(outs["Hidden"], h, 1e-12, 1e-10, "Hidden");
  check_close(outs["Cell"], c, 1e-12, 1e-10, "Cell");
  op().check_grad({"Weight", "Bias"}, {"Hidden", "Cell"}, 1e-4, 1e-4);
}

TEST_CASE("lstm: a bad Weight, Bias or H0 shape, a missing LoD or a bad activation is an oar::Error naming the op") {
  LstmCase k;
  LstmInputs<float> in(k, 1);
  auto w = error_of([&] { OpTest("lstm").input("Input", LoDTensor(in.x, kLod)).input("Weight", LoDTensor(random_tensor<float>({kD, 3 * kD}))).input("Bias", LoDTensor(in.b)).build(); });
  CHECK(contains(w, "lstm"));
  CHECK(contains(w, "Weight must be [D, 4D]"));
  auto b = error_of([&] {
    OpTest("lstm").input("Input", LoDTensor(in.x, kLod)).input("Weight", LoDTensor(in.w)).input("Bias", LoDTensor(random_tensor<float>({1, 4 * kD}))).build();
  });
  CHECK(contains(b, "lstm"));
  CHECK(contains(b, "Bias must be"));
  auto nolod = error_of([&] { OpTest("lstm").input("Input", LoDTensor(in.x)).input("Weight", LoDTensor(in.w)).input("Bias", LoDTensor(in.b)).run(); });
  CHECK(contains(nolod, "lstm"));
  CHECK(contains(nolod, "needs a LoD"));
  auto h0 = error_of([&] {
    OpTest("lstm").input("Input", LoDTensor(in.x, kLod)).input("Weight", LoDTensor(in.w)).input("Bias", LoDTensor(in.b)).input("H0", LoDTensor(random_tensor<float>({4, kD}))).run();
  });
  CHECK(contains(h0, "lstm"));
  CHECK(contains(h0, "for 5 sequences"));
  auto bad = error_of([&] { in.op(k).attr("cell_activation", std::string("softplus")).build(); });
  test::check_contains(bad, {"lstm", "cell_activation", "softplus"});
}

// ---- the dynamic_lstm layer

TEST_CASE("dynamic_lstm: parameters [D, 4D] and [1, 7D] (or [1, 4D]), options reach the op, h0 / c0 and cell()") {
  Tape tape;
  Var x = data("x", f32, {-1, 8}).lod_level(1);
  Var h0 = data("h0", f32, {-1, 2});
  Var c0 = data("c0", f32, {-1, 2});
  DynamicLstmLayer a = dynamic_lstm(x, 8);
  DynamicLstmLayer b = dynamic_lstm(x, 8, h0, c0).use_peepholes(false).is_reverse().gate_activation(RnnAct::tanh).cell_activation(RnnAct::relu)
                           .candidate_activation(RnnAct::identity);
  CHECK(a.shape() == Shape{-1, 2});
  CHECK(a.cell().shape() == Shape{-1, 2});
  CHECK(a.lod_level() == 1);
  Topology topo = tape.program({a, a.cell(), b, b.cell()});
  std::vector<const Operator*> lstms;
  for (auto* op : topo.main.global_block().ops())
    if (op->type() == "lstm") lstms.push_back(op);
  REQUIRE(lstms.size() == 2);
  const Block& g = topo.main.global_block();
  CHECK(g.var(lstms[0]->input(ops::Lstm::weight)[0]).shape() == Shape{2, 8});
  CHECK(g.var(lstms[0]->input(ops::Lstm::bias)[0]).shape() == Shape{1, 14});
  CHECK(lstms[0]->attr(ops::Lstm::use_peepholes) == true);
  CHECK(lstms[0]->input(ops::Lstm::h0).empty());
  CHECK(g.var(lstms[1]->input(ops::Lstm::bias)[0]).shape() == Shape{1, 8});
  CHECK(lstms[1]->attr(ops::Lstm::use_peepholes) == false);
  CHECK(lstms[1]->attr(ops::Lstm::is_reverse) == true);
  CHECK(lstms[1]->attr(ops::Lstm::gate_activation) == "tanh");
  CHECK(lstms[1]->attr(ops::Lstm::cell_activation) == "relu");
  CHECK(lstms[1]->attr(ops::Lstm::candidate_activation) == "identity");
  CHECK(lstms[1]->input(ops::Lstm::h0) == std::vector<std::string>{"h0"});
  CHECK(lstms[1]->input(ops::Lstm::c0) == std::vector<std::string>{"c0"});
  CHECK(topo.outputs[1] == lstms[0]->output(ops::Lstm::cell)[0]);
}

TEST_CASE("dynamic_lstm: size not 4D, x of another width, .act or a bad activation by name is an oar::Error naming the layer") {
  // One tape per case: a tape replays every creation before the chosen output.
  auto on_tape = [](auto make) {
    Tape tape;
    Var x = data("x", f32, {-1, 8}).lod_level(1);
    return error_of([&] { tape.program({make(x)}); });
  };
  CHECK(contains(on_tape([](const Var& x) { return Var(dynamic_lstm(x, 6)); }), "dynamic_lstm: size must be 4 * D"));
  CHECK(contains(on_tape([](const Var& x) { return Var(dynamic_lstm(x, 12)); }), "dynamic_lstm: x (the projected input, size = 4D) must be [N, 12], got x [?, 8]"));
  CHECK(contains(on_tape([](const Var& x) { return Var(dynamic_lstm(x, 8).act(oar::relu)); }), "dynamic_lstm: takes no .act"));
  const std::string e = on_tape([](const Var& x) { return Var(dynamic_lstm(x, 8).set("gate_activation", std::string("gelu"))); });
  CHECK(contains(e, "lstm"));
  CHECK(contains(e, "gelu"));
}

namespace {

/// ids (LoD 1) -> embedding -> fc(4D) -> dynamic_lstm -> sequence_pool(max) -> fc(2): does the sequence
/// hold a token >= 6?
struct LstmNet {
  Var ids, label, cost;
  LstmNet() {
    ids = data("ids", i64, {-1, 1}).lod_level(1);
    label = data("label", i64, {-1, 1});
    Var emb = embedding(ids, {10, 8});
    Var h = dynamic_lstm(fc(emb, 4 * 8), 4 * 8);
    Var logits = fc(sequence_pool(h, SequencePoolType::max), 2);
    cost = mean(softmax_with_cross_entropy(logits, label));
  }
};

/// A ragged batch: `lens` sequences of random tokens in [0, 10); label 1 when one is >= 6.
FeedMap ragged_batch(const std::vector<size_t>& lens, std::mt19937_64& rng) {
  std::vector<size_t> off{0};
  std::vector<int64_t> tok, lab;
  std::uniform_int_distribution<int64_t> d(0, 9);
  for (size_t n : lens) {
    off.push_back(off.back() + n);
    int64_t mx = 0;
    for (size_t i = 0; i < n; ++i) {
      // Skewed toward small tokens so both labels are common.
      int64_t t = d(rng) < 8 ? d(rng) % 6 : d(rng);
      tok.push_back(t);
      mx = std::max(mx, t);
    }
    lab.push_back(mx >= 6);
  }
  return FeedMap{{"ids", LoDTensor(Tensor::from<int64_t>(tok, {int64_t(tok.size()), 1}), {off})},
                 {"label", LoDTensor(Tensor::from<int64_t>(lab, {int64_t(lab.size()), 1}))}};
}

}  // namespace

TEST_CASE("dynamic_lstm: embedding -> fc -> lstm -> max pool -> fc trains on ragged batches; a step allocates nothing once shapes repeat") {
  Tape tape;
  LstmNet n;
  Model model(tape.program({n.cost}));
  Optimizer opt(model, n.cost, optim::adam(0.02));
  std::mt19937_64 rng(5);
  const std::vector<std::vector<size_t>> shapes{{3, 7, 1, 5, 2, 6, 4, 8}, {5, 1, 9, 2, 3, 6, 4, 4}, {2, 2, 8, 7, 1, 3, 5, 6}, {6, 4, 3, 1, 7, 2, 8, 5}};
  std::vector<FeedMap> batches;
  for (int i = 0; i < 40; ++i) batches.push_back(ragged_batch(shapes[size_t(i) % shapes.size()], rng));
  const auto [first, last] = oar::test::train_epochs(opt, batches, 6);
  MESSAGE("mean loss: first epoch " << first << ", last epoch " << last);
  CHECK(last < 0.3 * first);
  // Shapes repeat: the same batch again sizes nothing anew.
  std::vector<LoDTensor> out;
  CHECK(oar_test::steady_state_allocations([&] { opt.step(batches[0], out); }) == 0);
}
