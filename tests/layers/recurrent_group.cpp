// tests/layers/recurrent_group.cpp: recurrent groups (layers/recurrent_group.hpp): the forward pass against a
// per-sequence loop, against an unrolled network with the same parameters (outputs and gradients), parameter
// gradients against finite differences, and the tape's rules (memories, whole groups, errors at the user's line).
#include "pch.hpp"
#include "support/param_grad_check.hpp"
#include "support/heap.hpp"
#include "support/op_check.hpp"

#include "oar/ops/recurrent.hpp"

using namespace oar;
using test::error_of;

namespace {

constexpr int64_t D = 3, H = 4;

/// x [T, D] f64 with one LoD level; the step is h = tanh(x_t Wx + h_prev Wh + b), the memory following "h".
struct Group {
  Var x, out, loss;
  explicit Group(bool with_head = true) {
    x = data("x", f64, {-1, D}).lod_level(1);
    out = recurrent_group({x}, [&](std::vector<Var> in) {
      auto h_prev = memory("h", H);
      return fc({in[0], h_prev}, H).act(oar::tanh).params({ParamAttr("wx"), ParamAttr("wh")}).bias(ParamAttr("b")).name("h");
    });
    if (with_head) loss = mean(fc(out, 1).param("wo").bias(ParamAttr("bo")));
  }
};

LoDTensor sequences(const std::vector<size_t>& lengths, uint64_t seed) {
  std::vector<size_t> off{0};
  for (size_t n : lengths) off.push_back(off.back() + n);
  return LoDTensor(test::random_tensor<double>({int64_t(off.back()), D}, -1, 1, seed), {off});
}

std::vector<double> values(const Scope& s, const std::string& name) { return s.tensor(name).to_vector<double>(); }

/// The step by hand, one sequence at a time, from the model's parameters; sequence s starts from row s of
/// `boot` ([S, H]) when one is given, from zeros otherwise.
std::vector<double> per_sequence_loop(const Model& m, const LoDTensor& x, const std::vector<double>& boot = {}) {
  auto wx = values(m.scope(), "wx"), wh = values(m.scope(), "wh"), b = values(m.scope(), "b");
  auto xs = x.to_vector<double>();
  std::vector<double> out(size_t(x.dim(0)) * H);
  const auto& off = x.lod()[0];
  for (size_t s = 0; s + 1 < off.size(); ++s) {
    std::vector<double> h(H, 0.0);
    if (!boot.empty()) std::copy(boot.begin() + ptrdiff_t(s * H), boot.begin() + ptrdiff_t((s + 1) * H), h.begin());
    for (size_t r = off[s]; r < off[s + 1]; ++r) {
      std::vector<double> next(H);
      for (int64_t j = 0; j < H; ++j) {
        double acc = b[size_t(j)];
        for (int64_t k = 0; k < D; ++k) acc += xs[r * D + size_t(k)] * wx[size_t(k * H + j)];
        for (int64_t k = 0; k < H; ++k) acc += h[size_t(k)] * wh[size_t(k * H + j)];
        next[size_t(j)] = std::tanh(acc);
      }
      h = next;
      std::copy(h.begin(), h.end(), out.begin() + ptrdiff_t(r * H));
    }
  }
  return out;
}

void copy_params(const Model& from, const Model& to, std::initializer_list<const char*> names) {
  for (auto* n : names) to.scope().tensor(n).copy_from(from.scope().tensor(n));
}

}  // namespace

TEST_CASE("recurrent_group: the forward pass equals a per-sequence loop, for unsorted lengths, empty and length-1 sequences") {
  Tape tape;
  Group g(false);
  Model model(tape.program(g.out));
  Evaluator ev(model);
  // Several batches through one evaluator: the step scopes grow, shrink and are reused.
  for (auto [lengths, seed] : {std::pair{std::vector<size_t>{3, 0, 1, 5, 1, 2}, 1}, std::pair{std::vector<size_t>{2, 2, 7}, 2},
                               std::pair{std::vector<size_t>{1}, 3}, std::pair{std::vector<size_t>{0, 4, 0}, 4}, std::pair{std::vector<size_t>{3, 0, 1, 5, 1, 2}, 5}}) {
    CAPTURE(seed);
    LoDTensor x = sequences(lengths, uint64_t(seed));
    auto got = ev.forward({{"x", x}});
    REQUIRE(got[0].shape() == Shape{x.dim(0), H});
    CHECK(got[0].lod() == x.lod());
    auto want = per_sequence_loop(model, x);
    auto have = got[0].to_vector<double>();
    for (size_t i = 0; i < want.size(); ++i) CHECK(have[i] == doctest::Approx(want[i]).epsilon(1e-12));
  }
  // Only empty sequences: no step runs, and the output has no rows.
  auto none = ev.forward({{"x", sequences({0, 0}, 9)}});
  CHECK(none[0].shape() == Shape{0, H});
}

TEST_CASE("recurrent_group: a boot memory starts each sequence from its own row") {
  Tape tape;
  auto x = data("x", f64, {-1, D}).lod_level(1);
  auto boot = data("boot", f64, {-1, H});
  auto out = recurrent_group(x, [&](Var xt) {
    auto h_prev = memory("h", H, boot);
    return fc({xt, h_prev}, H).act(oar::tanh).params({ParamAttr("wx"), ParamAttr("wh")}).bias(ParamAttr("b")).name("h");
  });
  Model model(tape.program(out));
  Evaluator ev(model);
  LoDTensor xv = sequences({2, 0, 3}, 21);
  Tensor bv = test::random_tensor<double>({3, H}, -1, 1, 22);
  auto got = ev.forward({{"x", xv}, {"boot", LoDTensor(bv)}})[0].to_vector<double>();
  // By hand: the first step of sequence s reads boot row s.
  const auto want = per_sequence_loop(model, xv, bv.to_vector<double>());
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < want.size(); ++i) CHECK(got[i] == doctest::Approx(want[i]).epsilon(1e-12));
  // The boot must have one row per sequence.
  CHECK(error_of([&] { ev.forward({{"x", xv}, {"boot", LoDTensor(test::random_tensor<double>({2, H}, -1, 1, 23))}}); }).find("has 2 rows for 3 sequences") !=
        std::string::npos);
}

TEST_CASE("recurrent_group: a recurrent group and an unrolled network with the same parameters give the same outputs and gradients") {
  constexpr int64_t S = 3, T = 4;
  LoDTensor x = sequences({T, T, T}, 31);
  // The group.
  Tape tg;
  Group g;
  Model mg(tg.program(g.loss));
  GradientMachine gmg(mg, g.loss, {g.out});
  // The same network unrolled by hand: T fc calls sharing Wx, Wh and b by name, step t fed as x_t [S, D].
  Tape tu;
  std::vector<Var> hs;
  Var h = data("h_boot", f64, {-1, H});
  for (int64_t t = 0; t < T; ++t) {
    auto xt = data(fmt::format("x{}", t), f64, {-1, D});
    h = fc({xt, h}, H).act(oar::tanh).params({ParamAttr("wx"), ParamAttr("wh")}).bias(ParamAttr("b"));
    hs.push_back(h);
  }
  auto all = concat(hs, 0);
  auto loss_u = mean(fc(all, 1).param("wo").bias(ParamAttr("bo")));
  Model mu(tu.program({loss_u, all}));
  copy_params(mg, mu, {"wx", "wh", "b", "wo", "bo"});
  GradientMachine gmu(mu, loss_u, {all});
  FeedMap fu{{"h_boot", LoDTensor(Tensor::from<double>(std::vector<double>(S * H, 0.0), {S, H}))}};
  auto xs = x.to_vector<double>();
  for (int64_t t = 0; t < T; ++t) {
    std::vector<double> rows;
    for (int64_t s = 0; s < S; ++s) rows.insert(rows.end(), xs.begin() + (s * T + t) * D, xs.begin() + (s * T + t + 1) * D);
    fu[fmt::format("x{}", t)] = LoDTensor(Tensor::from<double>(rows, {S, D}));
  }
  for (int run = 0; run < 2; ++run) {  // the second run reuses the step scopes and must not accumulate
    CAPTURE(run);
    auto og = gmg.forward_backward({{"x", x}});
    auto ou = gmu.forward_backward(fu);
    CHECK(og[0].get(0) == doctest::Approx(ou[0].get(0)).epsilon(1e-12));
    auto hg = og[1].to_vector<double>(), hu = ou[1].to_vector<double>();  // rows: group (s, t) = s * T + t; unrolled t * S + s
    for (int64_t s = 0; s < S; ++s)
      for (int64_t t = 0; t < T; ++t)
        for (int64_t j = 0; j < H; ++j) CHECK(hg[size_t((s * T + t) * H + j)] == doctest::Approx(hu[size_t((t * S + s) * H + j)]).epsilon(1e-12));
    auto gg = gmg.gradients(), gu = gmu.gradients();
    REQUIRE(gg.size() == 5);
    REQUIRE(gu.size() == 5);
    for (auto* p : {"wx", "wh", "b", "wo", "bo"}) {
      CAPTURE(p);
      auto a = gg.at(p).dense.to_vector<double>(), b = gu.at(p).dense.to_vector<double>();
      REQUIRE(a.size() == b.size());
      for (size_t i = 0; i < a.size(); ++i) CHECK(a[i] == doctest::Approx(b[i]).epsilon(1e-10));
    }
  }
}

TEST_CASE("recurrent_group: parameter gradients through the group match finite differences (f64)") {
  Tape tape;
  auto x = data("x", f64, {-1, 2}).lod_level(1);
  auto b0 = data("b0", f64, {-1, 2});
  auto xp = fc(x, D).param("wp").bias(false);    // before the group: its gradient comes through the step inputs
  auto boot = fc(b0, H).param("wb").bias(false);  // the boot: its gradient comes through the memory at step 0
  auto out = recurrent_group({xp}, [&](std::vector<Var> in) {
    auto h_prev = memory("h", H, boot);
    auto h = fc({in[0], h_prev}, H).act(oar::tanh).params({ParamAttr("wx"), ParamAttr("wh")}).bias(ParamAttr("b")).name("h");
    return fc(h, 2).act(oar::sigmoid).param("wy").bias(ParamAttr("by"));  // the output is not the state
  });
  auto loss = mean(fc(out, 1).param("wo").bias(false));
  Model model(tape.program(loss));
  GradientMachine gm(model, loss);
  std::vector<size_t> lengths{3, 0, 1, 4, 1, 2};
  std::vector<size_t> off{0};
  for (size_t n : lengths) off.push_back(off.back() + n);
  FeedMap feeds{{"x", LoDTensor(test::random_tensor<double>({int64_t(off.back()), 2}, -1, 1, 41), {off})},
                {"b0", LoDTensor(test::random_tensor<double>({int64_t(lengths.size()), 2}, -1, 1, 42))}};
  gm.forward_backward(feeds);
  auto grads = gm.gradients();
  Evaluator ev(model);
  test::check_parameter_gradients(model, grads, ev, feeds, {"wp", "wb", "wx", "wh", "b", "wy", "by", "wo"});
}

TEST_CASE("recurrent_group: a memory nothing reads is in the program, and the group replays whole") {
  Tape tape;
  auto x = data("x", f64, {-1, D}).lod_level(1);
  auto before = fc(x, 2);
  auto out = recurrent_group(x, [&](Var xt) {
    memory("h", H);  // nothing reads it, but the group keeps it
    auto unused = fc(xt, 5);  // nothing reads it either: the step block holds it all the same
    (void)unused;
    return fc(xt, H).act(oar::tanh).name("h");
  });
  Topology t = tape.program(out);
  auto top = test::op_types(t.main, 0);
  REQUIRE(std::count(top.begin(), top.end(), "recurrent") == 1);
  const Operator* rec = nullptr;
  for (auto* op : t.main.global_block().ops())
    if (op->type() == "recurrent") rec = op;
  REQUIRE(rec);
  CHECK(rec->attr(ops::Recurrent::states) == std::vector<std::string>{"h"});
  REQUIRE(rec->attr(ops::Recurrent::ex_states).size() == 1);
  const Block& sb = t.main.block(rec->sub_block());
  CHECK(sb.has_var(rec->attr(ops::Recurrent::ex_states)[0]));  // the memory's variable
  CHECK(test::op_types(t.main, sb.idx()) == std::vector<std::string>{"mul", "elementwise_add", "mul", "elementwise_add", "tanh"});
  // The parameters made in the step are in the global block, and the op lists them as its outer inputs.
  for (auto& p : rec->input(ops::Recurrent::parameters)) CHECK(t.main.global_block().var(p).is_parameter());
  CHECK(rec->input(ops::Recurrent::parameters).size() == 4);
  // An output recorded before the group leaves the group out entirely.
  Topology early = tape.program(before);
  CHECK(early.main.num_blocks() == 1);
  CHECK(test::op_types(early.main, 0) == std::vector<std::string>{"mul", "elementwise_add"});
  // The unread memory still runs: zeros at every step, the output as without it.
  Model model(t);
  Evaluator ev(model);
  LoDTensor xv = sequences({2, 1}, 51);
  auto got = ev.forward({{"x", xv}})[0];
  CHECK(got.shape() == Shape{3, H});
}

TEST_CASE("recurrent_group: errors name the user's line") {
  {
    Tape tape;
    auto x = data("x", f64, {-1, D}).lod_level(1);
    int line = 0;
    auto out = recurrent_group(x, [&](Var xt) {
      line = __LINE__ + 1;
      auto g = memory("g", H);  // names a layer the step never creates
      return fc({xt, g}, H).name("h");
    });
    auto msg = error_of([&] { tape.program(out); });
    CHECK(msg.find("'g' names no layer") != std::string::npos);
    CHECK(msg.find(fmt::format("recurrent_group.cpp:{}", line)) != std::string::npos);
  }
  {
    Tape tape;
    auto x = data("x", f64, {-1, D});  // no LoD
    const int line = __LINE__ + 1;
    auto out = recurrent_group(x, [&](Var xt) { return fc(xt, H); });
    auto msg = error_of([&] { tape.program(out); });
    CHECK(msg.find("has no LoD") != std::string::npos);
    CHECK(msg.find(fmt::format("recurrent_group.cpp:{}", line)) != std::string::npos);
  }
  {
    Tape tape;
    const int line = __LINE__ + 1;
    auto msg = error_of([&] { memory("h", H); });
    CHECK(msg.find("inside recurrent_group's step") != std::string::npos);
    CHECK(msg.find(fmt::format("recurrent_group.cpp:{}", line)) != std::string::npos);
  }
  {
    Tape tape;
    auto x = data("x", f64, {-1, D}).lod_level(1);
    const int line = __LINE__ + 2;
    auto out = recurrent_group(x, [&](Var xt) {
      auto h_prev = memory("h", H + 1);  // the wrong width for the layer it follows
      return fc({xt, h_prev}, H).name("h");
    });
    auto msg = error_of([&] { tape.program(out); });
    CHECK(msg.find("but the memory is f64 [?, 5]") != std::string::npos);
    CHECK(msg.find(fmt::format("recurrent_group.cpp:{}", line)) != std::string::npos);
  }
}

TEST_CASE("recurrent_group: a training step allocates nothing on the heap once its shapes repeat") {
  Tape tape;
  Group g;
  Model model(tape.program(g.loss));
  GradientMachine gm(model, g.loss);
  FeedMap feeds{{"x", sequences({3, 0, 1, 5, 1, 2}, 61)}};
  std::vector<LoDTensor> out;
  for (int i = 0; i < 3; ++i) gm.forward_backward(feeds, out);  // the first runs make the step scopes and size every buffer
  CHECK(oar_test::allocations_during([&] { for (int i = 0; i < 3; ++i) gm.forward_backward(feeds, out); }) == 0);
}

TEST_CASE("recurrent_group: an is_sparse embedding inside the step sums its rows over the steps; scattered they equal the dense gradient") {
  // ids of 3 sequences (lengths 3, 1, 2) -> per step: embedding -> fc with the memory -> h; loss = mean(h w).
  const LoD lod{{0, 3, 4, 6}};
  FeedMap feeds{{"ids", LoDTensor(Tensor::from<int64_t>({2, 5, 2, 0, 5, 5}, {6, 1}), lod)}};
  std::map<bool, Gradient> table_grad;
  std::map<bool, Gradient> w_grad;
  for (bool sparse : {false, true}) {
    Tape tape;
    auto ids = data("ids", i64, {-1, 1}).lod_level(1);
    Var out = recurrent_group({ids}, [&](std::vector<Var> in) {
      Var e = embedding(in[0], {6, D}).dtype(f64).sparse(sparse).param("table");
      return fc({e, memory("h", H, f64)}, H).act(oar::tanh).params({ParamAttr("wx"), ParamAttr("wh")}).bias(ParamAttr("b")).name("h");
    });
    Var loss = mean(fc(out, 1).param("wo").bias(false));
    Model model(tape.program(loss));
    // The same initial parameters for both models.
    for (auto* p : {"table", "wx", "wh", "b", "wo"}) {
      auto& t = model.scope().tensor(p);
      t.copy_from(test::random_tensor<double>(t.shape(), -0.5, 0.5, 11));
    }
    GradientMachine gm(model, loss);
    gm.forward_backward(feeds);
    auto grads = gm.gradients();
    table_grad[sparse] = grads.at("table");
    w_grad[sparse] = grads.at("wx");
  }
  REQUIRE(table_grad[true].sparse);
  CHECK(!table_grad[false].sparse);
  auto rows = table_grad[true].rows;
  std::sort(rows.begin(), rows.end());
  CHECK(rows == std::vector<int64_t>{0, 2, 2, 5, 5, 5});  // one row per looked-up id, from all the steps
  auto same = [](const Tensor& a, const Tensor& b) {
    REQUIRE(a.shape() == b.shape());
    auto x = a.to_vector<double>(), y = b.to_vector<double>();
    for (size_t k = 0; k < x.size(); ++k) CHECK(x[k] == doctest::Approx(y[k]).epsilon(1e-12));
  };
  same(table_grad[true].to_dense(), table_grad[false].dense);
  same(w_grad[true].dense, w_grad[false].dense);
}

TEST_CASE("recurrent_group: a cond and a while loop nested in the step: parameter gradients match finite differences (f64)") {
  // step: u = cond(flag, tanh(fc(x_t, h_prev))); then two more tanh(fc(u)) by a while loop counting to 2.
  Tape tape;
  auto x = data("x", f64, {-1, D}).lod_level(1);
  auto flag = data("flag", boolean, {1});
  auto out = recurrent_group({x}, [&](std::vector<Var> in) {
    Var h_prev = memory("h", H);
    Var u = cond(flag, [&] { return fc({in[0], h_prev}, H).act(oar::tanh).params({ParamAttr("wx"), ParamAttr("wh")}).bias(ParamAttr("b")); });
    Var two = fill_constant(Shape{1}, i64, 2);
    auto loop = while_loop(
        {fill_constant(Shape{1}, i64, 0), u}, [&](std::vector<Var> v) { return less_than(v[0], two); },
        [&](std::vector<Var> v) { return std::vector<Var>{increment(v[0]), fc(v[1], H).act(oar::tanh).param("wl").bias(false)}; });
    return scale(loop[1], 1.0).name("h");
  });
  auto loss = mean(fc(out, 1).param("wo").bias(false));
  Model model(tape.program(loss));
  GradientMachine gm(model, loss);
  Tensor f(Shape{1}, boolean);
  f.data<bool>()[0] = true;
  FeedMap feeds{{"x", sequences({3, 1, 0, 2}, 51)}, {"flag", LoDTensor(f)}};
  gm.forward_backward(feeds);
  Evaluator ev(model, {loss});
  test::check_parameter_gradients(model, gm.gradients(), ev, feeds, {"wx", "wh", "b", "wl", "wo"});
}
