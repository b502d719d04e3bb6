// tests/layers/if_else.cpp: oar::if_else (split_lod_tensor, two conditional_blocks, merge_lod_tensor): forward
// against a plain per-row reference for mixed, all-true and all-false masks run one after another on one prepared
// program (a branch that does not run must not leak its old outputs), by rows and by sequences, several inputs
// and outputs; gradients of the inputs and of both branches' parameters against finite differences (f64); a small
// classifier trained through it; and the errors for branches that do not agree.
#include "pch.hpp"
#include "support/heap.hpp"
#include "support/param_grad_check.hpp"
#include "support/op_check.hpp"

#include "oar/ops/control_flow.hpp"

using namespace oar;
using oar::test::contains;

namespace {

LoDTensor mask_of(const std::vector<int>& m) {
  Tensor t(Shape{int64_t(m.size()), 1}, boolean);
  for (size_t i = 0; i < m.size(); ++i) t.data<bool>()[i] = m[i] != 0;
  return LoDTensor(t);
}

/// h = tanh(x w_in) (so that the split's gradient reaches a parameter), y = if_else(mask, h): true rows through
/// relu(h w_t + b_t), false rows through 0.5 (h w_f); loss = mean(y w_out).
struct Net {
  Var x = data("x", f64, {-1, 3});
  Var mask = data("mask", boolean, {-1, 1});
  Var h = fc(x, 4).act(oar::tanh).param("w_in").bias(false);
  Var y = if_else(
      mask, h, [](Var v) { return Var(fc(v, 2).act(oar::relu).param("w_t").bias(ParamAttr("b_t"))); },
      [](Var v) { return scale(fc(v, 2).param("w_f").bias(false), 0.5); });
  Var loss = mean(fc(y, 1).param("w_out").bias(false));
};

std::vector<double> values(Model& m, const char* p) { return m.scope().tensor(p).to_vector<double>(); }

/// The plain per-row reference of Net's y.
std::vector<double> reference_y(Model& m, const Tensor& x, const std::vector<int>& mask) {
  auto w_in = values(m, "w_in"), w_t = values(m, "w_t"), b_t = values(m, "b_t"), w_f = values(m, "w_f");
  std::vector<double> y;
  for (int64_t r = 0; r < x.dim(0); ++r) {
    double h[4];
    for (int j = 0; j < 4; ++j) {
      double s = 0;
      for (int i = 0; i < 3; ++i) s += x.get(r * 3 + i) * w_in[size_t(i * 4 + j)];
      h[j] = std::tanh(s);
    }
    for (int k = 0; k < 2; ++k) {
      double s = 0;
      for (int j = 0; j < 4; ++j) s += h[j] * (mask[size_t(r)] ? w_t : w_f)[size_t(j * 2 + k)];
      y.push_back(mask[size_t(r)] ? std::max(s + b_t[size_t(k)], 0.0) : 0.5 * s);
    }
  }
  return y;
}

FeedMap feeds_of(const std::vector<int>& mask, uint64_t seed = 17) {
  return {{"x", LoDTensor(test::random_tensor<double>({int64_t(mask.size()), 3}, -1, 1, seed))}, {"mask", mask_of(mask)}};
}

void check_y(Model& m, const std::vector<LoDTensor>& out, const FeedMap& feeds, const std::vector<int>& mask) {
  const LoDTensor& y = out.at(1);
  REQUIRE(y.shape() == Shape{int64_t(mask.size()), 2});
  const auto want = reference_y(m, feeds.at("x"), mask);
  const auto got = y.to_vector<double>();
  for (size_t i = 0; i < want.size(); ++i) CHECK(got[i] == doctest::Approx(want[i]).epsilon(1e-12));
}

const std::vector<int> kMixed{1, 0, 0, 1, 1, 0, 1};

}  // namespace

TEST_CASE("if_else: each row goes through its branch and comes back in order; all-true and all-false runs after a mixed one leak no stale rows") {
  Tape tape;
  Net n;
  Model model(tape.program({n.loss, n.y}));
  Evaluator ev(model);
  // One prepared program for every run; the row counts change too.
  for (const std::vector<int>& mask : {kMixed, std::vector<int>{1, 1, 1, 1}, std::vector<int>{0, 0, 0, 0, 0}, std::vector<int>{0, 1},
                                       std::vector<int>{1, 1, 1, 1, 1, 1}, kMixed}) {
    CAPTURE(mask.size());
    const FeedMap feeds = feeds_of(mask, 17 + mask.size());
    check_y(model, ev.forward(feeds), feeds, mask);
  }
}

TEST_CASE("if_else: the program is split_lod_tensor, two conditional_blocks on non-scalar conditions, merge_lod_tensor") {
  Tape tape;
  Net n;
  Topology t = tape.program(n.y);
  std::vector<std::string> types = test::op_types(t.main);
  CHECK(std::count(types.begin(), types.end(), "split_lod_tensor") == 1);
  CHECK(std::count(types.begin(), types.end(), "merge_lod_tensor") == 1);
  int blocks = 0;
  for (auto* op : t.main.global_block().ops())
    if (op->type() == ops::ConditionalBlock::type) {
      ++blocks;
      CHECK_FALSE(op->attr(ops::ConditionalBlock::is_scalar_condition));
      CHECK(op->input(ops::ConditionalBlock::cond).size() == 1);
    }
  CHECK(blocks == 2);
  // Parameters made inside a branch live in the global block.
  for (auto* p : {"w_t", "b_t", "w_f"}) CHECK(t.main.global_block().has_var(p));
  CHECK(t.main.num_blocks() == 3);
}

TEST_CASE("if_else: gradients of both branches' parameters and of the input match finite differences (f64), for mixed, all-true and all-false masks") {
  Tape tape;
  Net n;
  n.x.stop_gradient(false);
  Model model(tape.program(n.loss));
  GradientMachine gm(model, n.loss);
  gm.track_gradient(n.x);
  Evaluator ev(model);
  for (const std::vector<int>& mask : {kMixed, std::vector<int>{1, 1, 1}, std::vector<int>{0, 0, 0, 0}, kMixed}) {
    CAPTURE(mask.size());
    const FeedMap feeds = feeds_of(mask, 40 + mask.size());
    gm.forward_backward(feeds);
    auto grads = gm.gradients();
    const bool any_true = std::count(mask.begin(), mask.end(), 1) > 0, any_false = std::count(mask.begin(), mask.end(), 0) > 0;
    // A branch that did not run gives its parameters zero gradients; one that ran, some that are not zero.
    for (auto* p : {"w_t", "b_t", "w_f"}) {
      CAPTURE(p);
      const bool ran = std::string(p) == "w_f" ? any_false : any_true;
      bool nonzero = false;
      for (double g : grads.at(p).dense.to_vector<double>()) nonzero = nonzero || g != 0;
      CHECK(nonzero == ran);
    }
    test::check_parameter_gradients(model, grads, ev, feeds, {"w_in", "w_t", "b_t", "w_f", "w_out"});

    // The input's gradient, element by element.
    const LoDTensor gx = gm.gradient(n.x);
    LoDTensor x = feeds.at("x");
    REQUIRE(gx.shape() == x.shape());
    const double delta = 1e-6;
    for (int64_t i = 0; i < x.numel(); ++i) {
      FeedMap f = feeds;
      LoDTensor xp(x.clone());
      f["x"] = xp;
      xp.data<double>()[i] += delta;
      const double up = ev.forward(f)[0].get(0);
      xp.data<double>()[i] -= 2 * delta;
      const double down = ev.forward(f)[0].get(0);
      CHECK(gx.get(i) == doctest::Approx((up - down) / (2 * delta)).epsilon(1e-6));
    }
  }
}

TEST_CASE("if_else: a training step allocates nothing on the heap once its shapes repeat, with the mask mixed, all true or all false") {
  Tape tape;
  Net n;
  Model model(tape.program(n.loss));
  GradientMachine gm(model, n.loss);
  for (const std::vector<int>& mask : {kMixed, std::vector<int>{1, 1, 1, 1, 1, 1, 1}, std::vector<int>{0, 0, 0, 0, 0, 0, 0}}) {
    CAPTURE(std::count(mask.begin(), mask.end(), 1));
    const FeedMap feeds = feeds_of(mask);
    std::vector<LoDTensor> out;
    for (int i = 0; i < 3; ++i) gm.forward_backward(feeds, out);  // the first runs prepare the blocks and size every buffer
    CHECK(oar_test::allocations_during([&] { for (int i = 0; i < 3; ++i) gm.forward_backward(feeds, out); }) == 0);
  }
}

TEST_CASE("if_else: several inputs and outputs; each branch gets its rows of every input") {
  Tape tape;
  Var x = data("x", f64, {-1, 3});
  Var z = data("z", f64, {-1, 2});
  Var mask = data("mask", boolean, {-1, 1});
  std::vector<Var> outs = if_else(
      mask, {x, z}, [](std::vector<Var> in) { return std::vector<Var>{elementwise_add(fc(in[0], 2).param("w").bias(false), in[1]), scale(in[1], 3)}; },
      [](std::vector<Var> in) { return std::vector<Var>{in[1], fc(in[0], 2).param("w").bias(false)}; });
  REQUIRE(outs.size() == 2);
  Model model(tape.program(outs));
  Evaluator ev(model);
  const auto w = values(model, "w");
  for (const std::vector<int>& m : {std::vector<int>{0, 1, 1, 0, 1}, std::vector<int>{0, 0}, std::vector<int>{1, 1, 1}}) {
    CAPTURE(m.size());
    const int64_t N = int64_t(m.size());
    FeedMap feeds{{"x", LoDTensor(test::random_tensor<double>({N, 3}, -1, 1, 3))}, {"z", LoDTensor(test::random_tensor<double>({N, 2}, -1, 1, 4))}, {"mask", mask_of(m)}};
    auto got = ev.forward(feeds);
    const Tensor& xt = feeds.at("x");
    const Tensor& zt = feeds.at("z");
    for (int64_t r = 0; r < N; ++r)
      for (int k = 0; k < 2; ++k) {
        double xw = 0;
        for (int i = 0; i < 3; ++i) xw += xt.get(r * 3 + i) * w[size_t(i * 2 + k)];
        const double zk = zt.get(r * 2 + k);
        CHECK(got[0].get(r * 2 + k) == doctest::Approx(m[size_t(r)] ? xw + zk : zk));
        CHECK(got[1].get(r * 2 + k) == doctest::Approx(m[size_t(r)] ? 3 * zk : xw));
      }
  }
}

TEST_CASE("if_else: by sequences (one mask entry per sequence), with empty and length-1 sequences; the result keeps the LoD") {
  Tape tape;
  Var x = data("x", f64, {-1, 2}).lod_level(1);
  Var mask = data("mask", boolean, {-1, 1});
  Var y = if_else(mask, x, [](Var v) { return scale(v, 2, 1); }, [](Var v) { return scale(v, -1); });
  Var pooled = sequence_pool(y, SequencePoolType::sum);
  Model model(tape.program({y, pooled}));
  Evaluator ev(model);
  const LoD lod{{0, 2, 2, 3, 6, 6}};
  for (const std::vector<int>& m : {std::vector<int>{1, 0, 0, 1, 1}, std::vector<int>{0, 1, 0, 0, 1}, std::vector<int>{1, 1, 1, 1, 1}}) {
    auto xt = test::random_tensor<double>({6, 2}, -1, 1, 9);
    auto out = ev.forward(FeedMap{{"x", LoDTensor(xt, lod)}, {"mask", mask_of(m)}});
    CHECK(out[0].lod() == lod);
    for (size_t s = 0; s + 1 < lod[0].size(); ++s)
      for (size_t r = lod[0][s]; r < lod[0][s + 1]; ++r)
        for (int64_t d = 0; d < 2; ++d) {
          const double v = xt.get(int64_t(r) * 2 + d);
          CHECK(out[0].get(int64_t(r) * 2 + d) == doctest::Approx(m[s] ? 2 * v + 1 : -v));
        }
    CHECK(out[1].shape() == Shape{5, 2});
  }
}

TEST_CASE("if_else: a classifier whose branch is picked by a feature trains with SGD") {
  // Label = (x1 > 0) where x0 > 0, else (x1 < 0): no single linear classifier fits it; one per branch does.
  Tape tape;
  Var x = data("x", f32, {-1, 2});
  Var mask = data("mask", boolean, {-1, 1});
  Var label = data("label", i64, {-1, 1});
  Var logits = if_else(mask, x, [](Var v) { return Var(fc(v, 2)); }, [](Var v) { return Var(fc(v, 2)); });
  Var loss = mean(softmax_with_cross_entropy(logits, label));
  Model model(tape.program(loss));
  Optimizer opt(model, loss, optim::sgd(0.5));
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<float> u(-1, 1);
  auto batch = [&](int n) {
    Tensor xt(Shape{n, 2}, f32), mt(Shape{n, 1}, boolean), lt(Shape{n, 1}, i64);
    for (int i = 0; i < n; ++i) {
      float a = u(rng), b = u(rng);
      xt.data<float>()[2 * i] = a, xt.data<float>()[2 * i + 1] = b;
      mt.data<bool>()[i] = a > 0;
      lt.data<int64_t>()[i] = a > 0 ? (b > 0) : (b < 0);
    }
    return FeedMap{{"x", LoDTensor(xt)}, {"mask", LoDTensor(mt)}, {"label", LoDTensor(lt)}};
  };
  double first = 0, last = 0;
  for (int step = 0; step < 300; ++step) {
    const double l = opt.step(batch(32))[0].get(0);
    if (step == 0) first = l;
    last = l;
  }
  Evaluator ev(model);
  const double held_out = ev.forward(batch(512))[0].get(0);
  MESSAGE("if_else classifier: loss " << first << " -> " << last << ", held out " << held_out);
  // No single linear classifier gets below about ln 2 = 0.69 on this data.
  CHECK(last < 0.3);
  CHECK(held_out < 0.3);
  CHECK(held_out < first / 2);
}

TEST_CASE("if_else: branches that return different counts, dtypes or widths are oar::Errors at the user's line") {
  // Each case on a tape of its own: a tape replays every top-level creation before the chosen outputs.
  {
    Tape tape;
    Var x = data("x", f32, {-1, 3});
    Var mask = data("mask", boolean, {-1, 1});
    const int line = __LINE__ + 2;
    auto count = test::error_of([&] {
      if_else(mask, {x}, [](std::vector<Var> in) { return in; }, [](std::vector<Var> in) { return std::vector<Var>{in[0], in[0]}; });
    });
    CHECK(contains(count, "if_else: the true branch returns 1 output(s) and the false branch 2"));
    CHECK(contains(count, "if_else.cpp:" + std::to_string(line)));
    auto none = test::error_of([&] { if_else(mask, std::vector<Var>{}, [](std::vector<Var> in) { return in; }, [](std::vector<Var> in) { return in; }); });
    CHECK(contains(none, "if_else: needs at least one input"));
  }
  {
    Tape tape;
    Var x = data("x", f32, {-1, 3});
    Var mask = data("mask", boolean, {-1, 1});
    const int line = __LINE__ + 1;
    Var wide = if_else(mask, x, [](Var v) { return Var(fc(v, 4)); }, [](Var v) { return Var(fc(v, 5)); });
    auto widths = test::error_of([&] { tape.program(wide); });
    CHECK(contains(widths, "if_else: output 0 of the true branch is f32 [?, 4] but the false branch's is f32 [?, 5]"));
    CHECK(contains(widths, "if_else.cpp:" + std::to_string(line)));
  }
  {
    Tape tape;
    Var x = data("x", f32, {-1, 3});
    Var mask = data("mask", boolean, {-1, 1});
    Var typed = if_else(mask, x, [](Var v) { return v; }, [](Var v) { return Var(cast(v, f64)); });
    auto dtypes = test::error_of([&] { tape.program(typed); });
    CHECK(contains(dtypes, "output 0 of the true branch is f32 [?, 3] but the false branch's is f64 [?, 3]"));
  }
  {
    // A mask that does not fit the rows is the split's run-time error.
    Tape tape;
    Var x = data("x", f32, {-1, 3});
    Var mask = data("mask", boolean, {-1, 1});
    Var ok = if_else(mask, x, [](Var v) { return scale(v, 2); }, [](Var v) { return v; });
    Model model(tape.program(ok));
    Evaluator ev(model);
    auto rows = test::error_of([&] { ev.forward(FeedMap{{"x", LoDTensor(test::random_tensor<float>({4, 3}))}, {"mask", mask_of({1, 0, 1})}}); });
    CHECK(contains(rows, "split_lod_tensor: Mask ('mask') [3, 1] must hold one entry per row of X"));
  }
}
