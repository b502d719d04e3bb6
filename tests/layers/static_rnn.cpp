// tests/layers/static_rnn.cpp: StaticRNN (layers/static_rnn.hpp): the forward pass against a plain loop, against
// an unrolled network with the same parameters (outputs and gradients), gradients against finite differences,
// the program it records and errors at the user's line.
#include "pch.hpp"
#include "support/param_grad_check.hpp"
#include "support/op_check.hpp"

#include "oar/ops/recurrent.hpp"

using namespace oar;
using test::error_of;

namespace {

constexpr int64_t T = 5, N = 3, D = 2, H = 4;

std::vector<double> values(const Scope& s, const std::string& name) { return s.tensor(name).to_vector<double>(); }

/// h_t = tanh(x_t Wx + h_{t-1} Wh + b) by hand, x [T, N, D] time-major, h0 [N, H]: the outputs [T, N, H].
std::vector<double> plain_loop(const Model& m, const std::vector<double>& x, std::vector<double> h) {
  auto wx = values(m.scope(), "wx"), wh = values(m.scope(), "wh"), b = values(m.scope(), "b");
  std::vector<double> out;
  for (int64_t t = 0; t < T; ++t) {
    std::vector<double> next(N * H);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t j = 0; j < H; ++j) {
        double acc = b[size_t(j)];
        for (int64_t k = 0; k < D; ++k) acc += x[size_t((t * N + n) * D + k)] * wx[size_t(k * H + j)];
        for (int64_t k = 0; k < H; ++k) acc += h[size_t(n * H + k)] * wh[size_t(k * H + j)];
        next[size_t(n * H + j)] = std::tanh(acc);
      }
    h = next;
    out.insert(out.end(), h.begin(), h.end());
  }
  return out;
}

/// The step h = tanh(fc([x_t, h_prev])) with the parameters named wx, wh, b.
Var cell(const Var& xt, const Var& h_prev) {
  return fc({xt, h_prev}, H).act(oar::tanh).params({ParamAttr("wx"), ParamAttr("wh")}).bias(ParamAttr("b"));
}

/// A StaticRNN of `cell` over x's steps, its memory made inside the step by `memory(rnn)` after the step input:
/// the outputs [T, N, H].
template <class MakeMemory>
Var cell_rnn(const Var& x, MakeMemory memory) {
  StaticRNN rnn;
  rnn.step([&] {
    auto x_t = rnn.step_input(x);
    auto h_prev = memory(rnn);
    auto h = cell(x_t, h_prev);
    rnn.update_memory(h_prev, h);
    rnn.output(h);
  });
  return rnn();
}

}  // namespace

TEST_CASE("static_rnn: the forward pass equals a plain loop, from a boot memory and from a constant one") {
  auto xv = test::random_tensor<double>({T, N, D}, -1, 1, 1);
  auto h0 = test::random_tensor<double>({N, H}, -1, 1, 2);
  SUBCASE("a boot memory, the batch unknown when building") {
    Tape tape;
    auto x = data("x", f64, {T, -1, D});
    auto boot = data("h0", f64, {-1, H});
    auto out = cell_rnn(x, [&](StaticRNN& rnn) { return rnn.memory(boot); });
    CHECK(out.shape() == Shape{T, -1, H});
    Model model(tape.program(out));
    Evaluator ev(model);
    auto got = ev.forward({{"x", LoDTensor(xv)}, {"h0", LoDTensor(h0)}})[0];
    REQUIRE(got.shape() == Shape{T, N, H});
    CHECK(got.lod().empty());
    auto want = plain_loop(model, xv.to_vector<double>(), h0.to_vector<double>());
    auto have = got.to_vector<double>();
    for (size_t i = 0; i < want.size(); ++i) CHECK(have[i] == doctest::Approx(want[i]).epsilon(1e-12));
  }
  for (double init : {0.0, 0.75}) {
    CAPTURE(init);
    Tape tape;
    auto x = data("x", f64, {T, N, D});
    auto out = cell_rnn(x, [&](StaticRNN& rnn) {
      auto h_prev = rnn.memory({-1, H}, init);
      CHECK(h_prev.shape() == Shape{N, H});  // the batch comes from the step input
      return h_prev;
    });
    CHECK(out.shape() == Shape{T, N, H});
    Model model(tape.program(out));
    Evaluator ev(model);
    auto have = ev.forward({{"x", LoDTensor(xv)}})[0].to_vector<double>();
    auto want = plain_loop(model, xv.to_vector<double>(), std::vector<double>(N * H, init));
    REQUIRE(have.size() == want.size());
    for (size_t i = 0; i < want.size(); ++i) CHECK(have[i] == doctest::Approx(want[i]).epsilon(1e-12));
  }
}

TEST_CASE("static_rnn: a StaticRNN and the same network unrolled by hand give the same outputs and parameter gradients") {
  auto xv = test::random_tensor<double>({T, N, D}, -1, 1, 11).to_vector<double>();
  auto h0 = LoDTensor(test::random_tensor<double>({N, H}, -1, 1, 12));
  // The StaticRNN, with a head over all of its outputs.
  Tape tr;
  auto x = data("x", f64, {T, -1, D});
  auto boot = data("h0", f64, {-1, H});
  auto out = cell_rnn(x, [&](StaticRNN& rnn) { return rnn.memory(boot); });
  auto loss = mean(fc(out, 1).flatten_dims(2).param("wo").bias(ParamAttr("bo")));
  Model mr(tr.program(loss));
  GradientMachine gmr(mr, loss, {out});
  // Unrolled: T cells sharing wx, wh and b by name, step t fed as x_t [N, D].
  Tape tu;
  std::vector<Var> hs;
  Var h = data("h0", f64, {-1, H});
  for (int64_t t = 0; t < T; ++t) {
    h = cell(data(fmt::format("x{}", t), f64, {-1, D}), h);
    hs.push_back(h);
  }
  auto all = concat(hs, 0);  // [T * N, H]: the rows of [T, N, H]
  auto loss_u = mean(fc(all, 1).param("wo").bias(ParamAttr("bo")));
  Model mu(tu.program({loss_u, all}));
  for (auto* p : {"wx", "wh", "b", "wo", "bo"}) mu.scope().tensor(p).copy_from(mr.scope().tensor(p));
  GradientMachine gmu(mu, loss_u, {all});
  FeedMap fu{{"h0", h0}};
  for (int64_t t = 0; t < T; ++t)
    fu[fmt::format("x{}", t)] = LoDTensor(Tensor::from<double>(std::vector<double>(xv.begin() + t * N * D, xv.begin() + (t + 1) * N * D), {N, D}));
  for (int run = 0; run < 2; ++run) {  // the second run reuses the step scopes and must not accumulate
    CAPTURE(run);
    auto orr = gmr.forward_backward({{"x", LoDTensor(Tensor::from<double>(xv, {T, N, D}))}, {"h0", h0}});
    auto ou = gmu.forward_backward(fu);
    CHECK(orr[0].get(0) == doctest::Approx(ou[0].get(0)).epsilon(1e-12));
    REQUIRE(orr[1].shape() == Shape{T, N, H});
    auto hr = orr[1].to_vector<double>(), hu = ou[1].to_vector<double>();
    REQUIRE(hr.size() == hu.size());
    for (size_t i = 0; i < hr.size(); ++i) CHECK(hr[i] == doctest::Approx(hu[i]).epsilon(1e-12));
    auto gr = gmr.gradients(), gu = gmu.gradients();
    REQUIRE(gr.size() == 5);
    REQUIRE(gu.size() == 5);
    for (auto* p : {"wx", "wh", "b", "wo", "bo"}) {
      CAPTURE(p);
      auto a = gr.at(p).dense.to_vector<double>(), b = gu.at(p).dense.to_vector<double>();
      REQUIRE(a.size() == b.size());
      for (size_t i = 0; i < a.size(); ++i) CHECK(a[i] == doctest::Approx(b[i]).epsilon(1e-10));
    }
  }
}

TEST_CASE("static_rnn: parameter gradients match finite differences (f64), through the step inputs, the boot and two outputs") {
  Tape tape;
  auto x = data("x", f64, {T, -1, 2});
  auto b0 = data("b0", f64, {-1, 2});
  auto xp = fc(x, D).flatten_dims(2).param("wp").bias(false);  // before the RNN: its gradient comes through the step inputs
  auto boot = fc(b0, H).param("wb").bias(false);                // the boot: its gradient comes through the memory at step 0
  StaticRNN rnn;
  rnn.step([&] {
    auto x_t = rnn.step_input(xp);
    auto h_prev = rnn.memory(boot);
    auto c_prev = rnn.memory({-1, H}, 0.25);
    auto h = fc({x_t, h_prev, c_prev}, H).act(oar::tanh).params({ParamAttr("wx"), ParamAttr("wh"), ParamAttr("wc")}).bias(ParamAttr("b"));
    rnn.update_memory(h_prev, h);
    rnn.update_memory(c_prev, fc(h, H).act(oar::sigmoid).param("wcc").bias(false));
    rnn.output({h, fc(h, 2).act(oar::sigmoid).param("wy").bias(ParamAttr("by"))});  // an output that is not a state
  });
  auto outs = rnn.outputs();
  REQUIRE(outs.size() == 2);
  auto loss = elementwise_add(mean(fc(outs[1], 1).flatten_dims(2).param("wo").bias(false)), mean(outs[0]));
  Model model(tape.program(loss));
  GradientMachine gm(model, loss);
  FeedMap feeds{{"x", LoDTensor(test::random_tensor<double>({T, N, 2}, -1, 1, 41))}, {"b0", LoDTensor(test::random_tensor<double>({N, 2}, -1, 1, 42))}};
  gm.forward_backward(feeds);
  auto grads = gm.gradients();
  Evaluator ev(model);
  test::check_parameter_gradients(model, grads, ev, feeds, {"wp", "wb", "wx", "wh", "wc", "b", "wcc", "wy", "by", "wo"});
}

TEST_CASE("static_rnn: the program is one recurrent op between the time-major conversions") {
  Tape tape;
  auto x = data("x", f64, {T, -1, D});
  Topology t = tape.program(cell_rnn(x, [](StaticRNN& rnn) { return rnn.memory({-1, H}); }));
  CHECK(test::op_types(t.main, 0) ==
        std::vector<std::string>{"fill_constant_batch_size_like", "transpose", "sequence_unpad", "recurrent", "reshape", "transpose"});
  const Operator* rec = nullptr;
  for (auto* op : t.main.global_block().ops())
    if (op->type() == "recurrent") rec = op;
  REQUIRE(rec);
  CHECK(rec->attr(ops::Recurrent::boot_states) == std::vector<int32_t>{-1});  // a zero memory needs no boot
  CHECK(rec->input(ops::Recurrent::initial_states).empty());
  const Block& sb = t.main.block(rec->sub_block());
  CHECK(sb.var(rec->attr(ops::Recurrent::step_inputs)[0]).shape() == Shape{-1, D});
  CHECK(test::op_types(t.main, sb.idx()) == std::vector<std::string>{"mul", "mul", "sum", "elementwise_add", "tanh"});
  for (auto& p : rec->input(ops::Recurrent::parameters)) CHECK(t.main.global_block().var(p).is_parameter());
}

TEST_CASE("static_rnn: errors name the user's line") {
  // The message says `what` and names this file at `line`.
  auto check_error = [](const std::string& msg, std::string_view what, int line) {
    CHECK(msg.find(what) != std::string::npos);
    CHECK(msg.find(fmt::format("static_rnn.cpp:{}", line)) != std::string::npos);
  };
  {  // a step input that is not [T, N, ...]
    Tape tape;
    auto x = data("x", f64, {-1, D});
    StaticRNN rnn;
    int line = 0;
    rnn.step([&] {
      line = __LINE__ + 1;
      auto xt = rnn.step_input(x);
      rnn.output(fc(xt, H));
    });
    auto msg = error_of([&] { tape.program(rnn()); });
    check_error(msg, "must be time-major [T, N, ...]", line);
  }
  {  // T unknown when building
    Tape tape;
    auto x = data("x", f64, {-1, N, D});
    StaticRNN rnn;
    int line = 0;
    rnn.step([&] {
      line = __LINE__ + 1;
      rnn.output(fc(rnn.step_input(x), H));
    });
    auto msg = error_of([&] { tape.program(rnn()); });
    check_error(msg, "T (dim 0) must be known", line);
  }
  {  // update_memory of something that is not a memory
    Tape tape;
    auto x = data("x", f64, {T, N, D});
    StaticRNN rnn;
    int line = 0;
    auto msg = error_of([&] {
      rnn.step([&] {
        auto xt = rnn.step_input(x);
        auto h = fc(xt, H);
        line = __LINE__ + 1;
        rnn.update_memory(xt, h);
        rnn.output(h);
      });
    });
    check_error(msg, "is not a memory of this StaticRNN", line);
  }
  {  // output, step_input and memory outside the step
    Tape tape;
    auto x = data("x", f64, {T, N, D});
    StaticRNN rnn;
    int line = __LINE__ + 1;
    auto msg = error_of([&] { rnn.output(x); });
    check_error(msg, "output: call it inside this StaticRNN's step function", line);
    line = __LINE__ + 1;
    msg = error_of([&] { rnn.step_input(x); });
    check_error(msg, "step_input: call it inside", line);
    rnn.step([&] { rnn.output(fc(rnn.step_input(x), H)); });
    line = __LINE__ + 1;
    msg = error_of([&] { rnn.memory({-1, H}); });
    check_error(msg, "has already been recorded", line);
    CHECK(rnn().shape() == Shape{T, N, H});
  }
  {  // a memory never updated; the new value of the wrong width
    Tape tape;
    auto x = data("x", f64, {T, N, D});
    StaticRNN a;
    int line = 0;
    auto msg = error_of([&] {
      a.step([&] {
        line = __LINE__ + 1;
        auto h_prev = a.memory({-1, H});
        a.output(cell(a.step_input(x), h_prev));
      });
    });
    check_error(msg, "never updated", line);
    // The failed step stays on the tape, and the tape replays it with any later output: the same error.
    auto y = fc(x, 1);
    msg = error_of([&] { tape.program(y); });
    check_error(msg, "never updated", line);
  }
  {
    Tape tape;
    auto x = data("x", f64, {T, N, D});
    int line = 0;
    StaticRNN b;
    b.step([&] {
      auto h_prev = b.memory({-1, H});
      auto h = fc({b.step_input(x), h_prev}, H + 1);
      line = __LINE__ + 1;
      b.update_memory(h_prev, h);
      b.output(h);
    });
    auto msg = error_of([&] { tape.program(b()); });
    check_error(msg, "update_memory: the new value", line);
  }
  {  // a step input computed in the step; two outputs taken as one
    Tape tape;
    auto x = data("x", f64, {T, N, D});
    StaticRNN rnn;
    int line = 0;
    auto msg = error_of([&] {
      rnn.step([&] {
        auto y = fc(x, D).flatten_dims(2);
        line = __LINE__ + 1;
        rnn.output(fc(rnn.step_input(y), H));
      });
    });
    check_error(msg, "is computed in the step", line);
    StaticRNN two;
    two.step([&] {
      auto xt = two.step_input(x);
      two.output({fc(xt, H), fc(xt, 1)});
    });
    line = __LINE__ + 1;
    msg = error_of([&] { two(); });
    check_error(msg, "the step has 2 outputs", line);
    CHECK(two.outputs()[1].shape() == Shape{T, N, 1});
  }
}
