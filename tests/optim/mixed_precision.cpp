// tests/optim/mixed_precision.cpp: `.with_mixed_precision()` on the CPU, where the math stays f32 and the loss
// scaling is what runs: a power-of-two scale leaves every loss bit-identical to plain training; the scale grows
// after clean steps; an overflowed step is skipped (parameters and accumulators untouched) and shrinks the
// scale; the state checkpoints. And the program rewrite that runs products in 16 bits on a GPU.
#include "pch.hpp"

#include <cmath>
#include <filesystem>
#include <random>

#include <oar/ops/optimizers.hpp>

#include "support/toy.hpp"

using namespace oar;

namespace {


struct Net {
  Var x, label, cost, acc;
  Net() {
    x = data("x", f32, {-1, 8});
    label = data("label", i64, {-1, 1});
    Var pred = fc(fc(x, 32).act(relu), 3).act(softmax);
    cost = mean(cross_entropy(pred, label));
    acc = accuracy(pred, label);
  }
};

std::vector<double> losses_of(const optim::Rule& rule, float* final_scale = nullptr, int epochs = 2) {
  Tape tape;
  Net n;
  Model model(tape.program({n.cost, n.acc}), cpu(), 7);
  Optimizer opt(model, n.cost, rule);
  auto r = test::toy_classes(512, 1).batch(64);
  std::vector<double> losses;
  opt.train(r, {n.x, n.label}, epochs, [&](const Event& e) {
    if (e.kind == Event::Kind::end_iteration) losses.push_back(e.loss);
  });
  if (final_scale) *final_scale = opt.loss_scale();
  return losses;
}

}  // namespace

TEST_CASE("mixed precision on the CPU: a power-of-two loss scale trains bit-identically to plain f32, and the scale grows after clean steps") {
  for (auto rule : {optim::adam(0.01), optim::momentum(0.05, 0.9)}) {
    CAPTURE(rule.type);
    const std::vector<double> plain = losses_of(rule);
    optim::MixedPrecision m;
    m.incr_every_n_steps = 4;
    float scale = 0;
    const std::vector<double> scaled = losses_of(rule.with_mixed_precision(m), &scale);
    REQUIRE(plain.size() == 16);
    REQUIRE(scaled.size() == plain.size());
    for (size_t i = 0; i < plain.size(); ++i) CHECK(scaled[i] == plain[i]);
    CHECK(plain.back() < 0.8 * plain.front());
    CHECK(scale == 32768.f * 16);  // doubled after every 4 of the 16 steps
  }
}

TEST_CASE("mixed precision on the CPU: an overflowed step is skipped and shrinks the scale (not below 1); training then goes on") {
  Tape tape;
  Net n;
  Model model(tape.program({n.cost, n.acc}), cpu(), 7);
  optim::MixedPrecision m;
  m.init_loss_scaling = 2.f;
  m.decr_every_n_nan_or_inf = 1;
  Optimizer opt(model, n.cost, optim::adam(0.01).with_schedule(optim::exponential_decay(10, 0.5, false)).with_mixed_precision(m));
  auto batch = test::toy_classes(64, 3).batch(64);
  io::Batch b = *batch.next();
  Tensor bad_x = b[0].to(cpu(), true);
  bad_x.data<float>()[17] = INFINITY;  // every gradient becomes NaN
  const FeedMap bad{{model.name_of(n.x), bad_x}, {model.name_of(n.label), b[1]}};
  const FeedMap good{{model.name_of(n.x), b[0]}, {model.name_of(n.label), b[1]}};
  // Every persistable the update writes: parameters, Adam's moments and powers, the schedule's step counter.
  std::vector<std::string> state;
  for (const auto* v : opt.update_program().global_block().vars())
    if (v->persistable() && v->name() != optim::kLossScaling && v->name() != optim::kGoodSteps && v->name() != optim::kBadSteps)
      state.push_back(v->name());
  REQUIRE(std::count(state.begin(), state.end(), std::string(optim::kStepCounter)) == 1);
  REQUIRE(state.size() == 1 + 5 * model.parameter_names().size());  // the counter; each parameter, its moments and powers
  auto snapshot = [&] {
    std::map<std::string, std::vector<double>> vals;
    for (const std::string& v : state) {
      const LoDTensor& t = model.scope().find(v)->tensor();
      for (int64_t i = 0; i < t.numel(); ++i) vals[v].push_back(t.get(i));
    }
    return vals;
  };
  const auto before = snapshot();
  opt.step(bad);
  CHECK(snapshot() == before);  // skipped: Adam's moments would have moved every weight, the counter advanced
  CHECK(opt.loss_scale() == 1.f);
  opt.step(bad);
  CHECK(snapshot() == before);
  CHECK(opt.loss_scale() == 1.f);  // not below 1
  const double l0 = opt.step(good)[0].get(0);
  const auto after = snapshot();
  for (const std::string& v : state) CHECK_MESSAGE(after.at(v) != before.at(v), v << " did not move on a good step");
  CHECK(model.scope().find(optim::kStepCounter)->tensor().get(0) == 1.0);
  for (int k = 0; k < 20; ++k) opt.step(good);
  CHECK(opt.step(good)[0].get(0) < l0);
}

TEST_CASE("mixed precision: the update program decides a skipped step on the device: SkipUpdate on every update op, no control flow") {
  Tape tape;
  Net n;
  Model model(tape.program({n.cost}), cpu(), 7);
  for (auto rule : {optim::sgd(0.1), optim::lamb(0.01).with_schedule(optim::exponential_decay(10, 0.5, false))}) {
    CAPTURE(rule.type);
    Optimizer opt(model, n.cost, rule.with_mixed_precision());
    const Program& upd = opt.update_program();
    CHECK(upd.num_blocks() == 1);
    int updates = 0;
    for (const Operator* op : upd.global_block().ops()) {
      CHECK(op->sub_block() < 0);
      if (op->type() == rule.type) {
        ++updates;
        CHECK(op->input(ops::param_update::skip_update) == std::vector<std::string>{optim::kFoundInfinite});
      }
      CHECK(op->type() != "increment");  // the counter steps by !found_infinite instead
    }
    CHECK(updates == int(model.parameter_names().size()));
  }
}

TEST_CASE("mixed precision: the loss scale is checkpointed and resumed; the options are checked; one thread only") {
  const auto dir = std::filesystem::temp_directory_path() / "oar_amp_ckpt";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  optim::MixedPrecision m;
  m.incr_every_n_steps = 2;
  {
    Tape tape;
    Net n;
    Model model(tape.program({n.cost}), cpu(), 7);
    Optimizer opt(model, n.cost, optim::sgd(0.1).with_mixed_precision(m));
    auto r = test::toy_classes(256, 1).batch(64);
    opt.train(r, {n.x, n.label}, 1);
    CHECK(opt.loss_scale() == 32768.f * 4);
    opt.checkpoint(dir / "ckpt");
  }
  {
    Tape tape;
    Net n;
    Model model(tape.program({n.cost}), cpu(), 8);
    Optimizer opt(model, n.cost, optim::sgd(0.1).with_mixed_precision(m));
    CHECK(opt.loss_scale() == 32768.f);
    opt.resume(dir / "ckpt");
    CHECK(opt.loss_scale() == 32768.f * 4);
  }
  std::filesystem::remove_all(dir);
  Tape tape;
  Net n;
  Model model(tape.program({n.cost}), cpu(), 7);
  optim::MixedPrecision bad;
  bad.dtype = f64;
  CHECK_THROWS_WITH_AS(Optimizer(model, n.cost, optim::sgd(0.1).with_mixed_precision(bad)), doctest::Contains("f16 or bf16"), Error);
  CHECK_THROWS_WITH_AS(Optimizer(model, n.cost, optim::sgd(0.1).with_mixed_precision(), 2), doctest::Contains("one thread"), Error);
  Optimizer opt(model, n.cost, optim::sgd(0.1));
  CHECK(opt.loss_scale() == 1.f);
  CHECK_THROWS_WITH_AS(opt.with_mixed_precision(bad), doctest::Contains("f16 or bf16"), Error);
  CHECK_FALSE(opt.rule().mixed_precision.has_value());  // refused: nothing changed
  opt.with_mixed_precision();
  CHECK(opt.loss_scale() == 32768.f);
  CHECK_THROWS_WITH_AS(opt.update(std::map<std::string, LoDTensor>{}), doctest::Contains("mixed precision"), Error);
}

TEST_CASE("mixed precision: cast_to_half puts each product in 16 bits between casts, and the backward pass runs through them") {
  for (DType t : {f16, bf16}) {
    CAPTURE(name(t));
    Tape tape;
    Net n;
    Topology topo = tape.program({n.cost});
    Program& p = topo.main;
    CHECK(optim::cast_to_half(p, t) == 2);  // the two fc products
    Block& b = p.global_block();
    int casts = 0;
    for (auto* op : b.ops()) {
      if (op->type() == "cast") ++casts;
      if (op->type() != "mul") continue;
      for (auto& in : op->input_names()) CHECK(b.var(in).dtype() == t);
      for (auto& out : op->output_names()) CHECK(b.var(out).dtype() == t);
    }
    CHECK(casts == 6);  // X and W in, Out back, for each
    CHECK(optim::cast_to_half(p, t) == 0);  // already converted
    auto pg = append_backward(p, topo.name_of(n.cost));
    CHECK(pg.size() == 4);
    for (auto& g : pg) CHECK(b.var(g.grad).dtype() == f32);  // the master weights' gradients come back in f32
    optim::scale_loss_gradient(p, topo.name_of(n.cost));
    bool seeded = false;
    for (auto* op : b.ops())
      if (op->type() == "assign" && op->input("X") == std::vector<std::string>{optim::kLossScaling}) seeded = true;
    CHECK(seeded);
  }
  Tape tape;
  auto x = data("x", f64, {-1, 4});
  Var y = fc(x, 2);
  Program p = tape.program({y}).main;
  CHECK(optim::cast_to_half(p, f16) == 0);  // f64 programs stay as they are
  CHECK_THROWS_WITH_AS(optim::cast_to_half(p, f32), doctest::Contains("f16 or bf16"), Error);
}
