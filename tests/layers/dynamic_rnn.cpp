// tests/layers/dynamic_rnn.cpp: DynamicRNN (layers/dynamic_rnn.hpp), Fluid's RNN over LoD sequences built from a
// rank table, tensor arrays and a while loop: against a recurrent group with the same parameters (outputs and
// gradients, unsorted lengths with empty and length-1 sequences, run twice), a boot memory and a static input
// against a per-sequence loop, parameter gradients against f64 finite differences, the program it emits, and
// errors at the user's line.
#include "pch.hpp"
#include "support/op_check.hpp"
#include "support/param_grad_check.hpp"

#include <filesystem>
#include <unistd.h>

using namespace oar;

namespace {

constexpr int64_t D = 3, H = 4;

LoDTensor sequences(const std::vector<size_t>& lengths, uint64_t seed, int64_t width = D) {
  std::vector<size_t> off{0};
  for (size_t n : lengths) off.push_back(off.back() + n);
  return LoDTensor(test::random_tensor<double>({int64_t(off.back()), width}, -1, 1, seed), {off});
}

/// h = tanh(x_t wx + h_prev wh + b) over the sequences of x, from zeros, in a DynamicRNN.
struct Dyn {
  Var x = data("x", f64, {-1, D}).lod_level(1);
  Var out, loss;
  Dyn() {
    DynamicRNN rnn;
    rnn.step([&] {
      Var h_prev = rnn.memory(Shape{-1, H}, 0.0, f64);
      Var h = fc({rnn.step_input(x), h_prev}, H).act(oar::tanh).params({ParamAttr("wx"), ParamAttr("wh")}).bias(ParamAttr("b"));
      rnn.update_memory(h_prev, h);
      rnn.output(h);
    });
    out = rnn();
    loss = mean(fc(out, 1).param("wo").bias(ParamAttr("bo")));
  }
};

/// The same in a recurrent group.
struct Group {
  Var x = data("x", f64, {-1, D}).lod_level(1);
  Var out, loss;
  Group() {
    out = recurrent_group({x}, [&](std::vector<Var> in) {
      return fc({in[0], memory("h", H)}, H).act(oar::tanh).params({ParamAttr("wx"), ParamAttr("wh")}).bias(ParamAttr("b")).name("h");
    });
    loss = mean(fc(out, 1).param("wo").bias(ParamAttr("bo")));
  }
};

}  // namespace

TEST_CASE("DynamicRNN: equals a recurrent group with the same parameters (outputs and gradients), for unsorted lengths, empty and length-1 sequences") {
  Tape td;
  Dyn d;
  Model md(td.program(d.loss));
  Tape tg;
  Group g;
  Model mg(tg.program(g.loss));
  for (auto* p : {"wx", "wh", "b", "wo", "bo"}) mg.scope().tensor(p).copy_from(md.scope().tensor(p));
  GradientMachine gd(md, d.loss, {d.out}), gg(mg, g.loss, {g.out});
  for (auto lengths : {std::vector<size_t>{2, 5, 0, 1, 3, 5}, std::vector<size_t>{1, 4}, std::vector<size_t>{2, 5, 0, 1, 3, 5}}) {
    CAPTURE(lengths.size());
    const FeedMap feeds{{"x", sequences(lengths, 7 + lengths.size())}};
    auto od = gd.forward_backward(feeds), og = gg.forward_backward(feeds);
    CHECK(od[0].get(0) == doctest::Approx(og[0].get(0)).epsilon(1e-12));
    CHECK(od[1].lod() == feeds.at("x").lod());
    auto a = od[1].to_vector<double>(), b = og[1].to_vector<double>();
    REQUIRE(a.size() == b.size());
    for (size_t k = 0; k < a.size(); ++k) CHECK(a[k] == doctest::Approx(b[k]).epsilon(1e-12));
    auto ga = gd.gradients(), gb = gg.gradients();
    for (auto* p : {"wx", "wh", "b", "wo", "bo"}) {
      CAPTURE(p);
      auto u = ga.at(p).dense.to_vector<double>(), v = gb.at(p).dense.to_vector<double>();
      REQUIRE(u.size() == v.size());
      for (size_t k = 0; k < u.size(); ++k) CHECK(u[k] == doctest::Approx(v[k]).epsilon(1e-10));
    }
  }
}

TEST_CASE("DynamicRNN: a boot memory and a static input against a per-sequence loop; parameter gradients match finite differences (f64)") {
  Tape tape;
  Var x = data("x", f64, {-1, D}).lod_level(1);
  Var c = data("c", f64, {-1, 2});  // one row per sequence
  Var boot = fc(c, H).param("wb").bias(false);
  DynamicRNN rnn;
  rnn.step([&] {
    Var h_prev = rnn.memory(boot);
    Var ct = rnn.static_input(c);
    Var h = fc({rnn.step_input(x), h_prev, ct}, H).act(oar::tanh).params({ParamAttr("wx"), ParamAttr("wh"), ParamAttr("wc")}).bias(ParamAttr("b"));
    rnn.update_memory(h_prev, h);
    rnn.output(h);
  });
  Var out = rnn();
  Var loss = mean(fc(out, 1).param("wo").bias(false));
  Model model(tape.program(loss));
  const std::vector<size_t> lengths{3, 0, 1, 4, 2};
  const FeedMap feeds{{"x", sequences(lengths, 3)}, {"c", LoDTensor(test::random_tensor<double>({5, 2}, -1, 1, 4))}};

  Evaluator ev(model, {out});
  auto got = ev.forward(feeds)[0].to_vector<double>();
  auto P = [&](const char* n) { return model.scope().tensor(n).to_vector<double>(); };
  auto wx = P("wx"), wh = P("wh"), wc = P("wc"), b = P("b"), wb = P("wb");
  auto xs = feeds.at("x").to_vector<double>(), cs = feeds.at("c").to_vector<double>();
  size_t row = 0;
  for (size_t s = 0; s < lengths.size(); ++s) {
    std::vector<double> h(H);
    for (int64_t j = 0; j < H; ++j)
      for (int64_t k = 0; k < 2; ++k) h[size_t(j)] += cs[s * 2 + size_t(k)] * wb[size_t(k * H + j)];
    for (size_t t = 0; t < lengths[s]; ++t, ++row) {
      std::vector<double> next(H);
      for (int64_t j = 0; j < H; ++j) {
        double acc = b[size_t(j)];
        for (int64_t k = 0; k < D; ++k) acc += xs[row * D + size_t(k)] * wx[size_t(k * H + j)];
        for (int64_t k = 0; k < H; ++k) acc += h[size_t(k)] * wh[size_t(k * H + j)];
        for (int64_t k = 0; k < 2; ++k) acc += cs[s * 2 + size_t(k)] * wc[size_t(k * H + j)];
        next[size_t(j)] = std::tanh(acc);
      }
      h = next;
      for (int64_t j = 0; j < H; ++j) CHECK(got[row * H + size_t(j)] == doctest::Approx(h[size_t(j)]).epsilon(1e-12));
    }
  }
  GradientMachine gm(model, loss);
  gm.forward_backward(feeds);
  Evaluator le(model, {loss});
  test::check_parameter_gradients(model, gm.gradients(), le, feeds, {"wb", "wx", "wh", "wc", "b", "wo"});
}

TEST_CASE("DynamicRNN: the program is Fluid's: rank table and tensor arrays around a while loop") {
  Tape tape;
  Dyn d;
  Program p = tape.program(d.loss).main;
  std::vector<std::string> global, step;
  for (auto* op : p.global_block().ops()) global.push_back(op->type());
  auto has = [](const std::vector<std::string>& v, const char* t) { return std::find(v.begin(), v.end(), t) != v.end(); };
  for (auto* t : {"lod_rank_table", "max_sequence_len", "lod_tensor_to_array", "fill_constant_batch_size_like", "less_than", "while", "array_to_lod_tensor"})
    CHECK_MESSAGE(has(global, t), t);
  REQUIRE(p.num_blocks() >= 2);
  for (auto* op : p.block(1).ops()) step.push_back(op->type());
  for (auto* t : {"read_from_array", "shrink_rnn_memory", "write_to_array", "increment", "less_than"}) CHECK_MESSAGE(has(step, t), t);
}

TEST_CASE("DynamicRNN: errors name the user's line") {
  {
    Tape tape;
    Var x = data("x", f64, {-1, D});  // no LoD
    DynamicRNN rnn;
    const int line = __LINE__ + 1;
    rnn.step([&] { rnn.output(fc(rnn.step_input(x), H)); });
    auto e = test::error_of([&] { tape.program(rnn()); });
    CHECK(e.find("one LoD level") != std::string::npos);
    CHECK(e.find(fmt::format(":{}", line)) != std::string::npos);
  }
  {
    Tape tape;
    Var x = data("x", f64, {-1, D}).lod_level(1);
    DynamicRNN rnn;
    CHECK_THROWS_WITH_AS(rnn.step([&] {
      Var h = rnn.memory(Shape{-1, H}, 0.0, f64);
      rnn.output(fc({rnn.step_input(x), h}, H));
    }),
                         doctest::Contains("never updated"), Error);
  }
  {
    Tape tape;
    Var x = data("x", f64, {-1, D}).lod_level(1);
    DynamicRNN rnn;
    CHECK_THROWS_WITH_AS(rnn.step_input(x), doctest::Contains("call it inside this DynamicRNN's step function"), Error);
  }
}

TEST_CASE("DynamicRNN: an inference model saved in Fluid's layout loads and gives the same outputs (sub-blocks, arrays and the rank table survive)") {
  Tape tape;
  Dyn d;
  Model model(tape.program(d.loss));
  const FeedMap feeds{{"x", sequences({3, 0, 1, 4}, 61)}};
  Evaluator ev(model, {d.out});
  auto want = ev.forward(feeds)[0];
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("oar_test_dynamic_rnn_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  model.save_inference(dir, {d.x}, {d.out});
  Model loaded = Model::load_inference(dir);
  Evaluator le(loaded);
  auto got = le.forward(feeds)[0];
  std::filesystem::remove_all(dir);
  CHECK(got.lod() == want.lod());
  auto a = got.to_vector<double>(), b = want.to_vector<double>();
  REQUIRE(a.size() == b.size());
  for (size_t k = 0; k < a.size(); ++k) CHECK(a[k] == b[k]);
}
