// tests/optim/lr_schedule.cpp: every learning-rate schedule of append_update against its formula over several
// runs (the step counter @LR_DECAY_COUNTER@ is a persistable variable incremented by each run, so it survives
// in the scope and checkpoints), the scheduled rate driving sgd, and bad schedules.
#include <functional>
#include <numbers>

#include "pch.hpp"
#include "support/values.hpp"

using namespace oar;
using oar::test::F;
using oar::test::values;
using oar::test::Vec;

namespace {

/// x [-1, 3] -> fc(2, "w", no bias) -> mean squared error; sgd(lr) with `schedule`.
struct Scheduled {
  Topology t;
  std::string lr;
  Scope scope;
  Executor exe;
  FeedMap feeds;

  Scheduled(double base_lr, const optim::Schedule& schedule) {
    Tape tape;
    auto x = data("x", f64, {-1, 3});
    auto y = data("y", f64, {-1, 2});
    auto loss = mean(square_error_cost(fc(x, 2).param(ParamAttr("w")).bias(false), y));
    t = tape.program(loss);
    auto pg = append_backward(t.main, t.outputs[0]);
    lr = optim::append_update(t.main, t.startup, optim::sgd(base_lr).with_schedule(schedule), pg);
    exe.run(t.startup, scope);
    feeds["x"] = LoDTensor(Tensor::from(Vec{1.0, -2.0, 0.5, 0.3, 0.8, -1.5}, Shape{2, 3}));
    feeds["y"] = LoDTensor(Tensor::from(Vec{0.5, -1.0, 1.5, 0.2}, Shape{2, 2}));
  }
  /// One run: the learning rate it used.
  double run() { return exe.run(t.main, scope, feeds, {lr})[0].get(0); }
  double counter() { return scope.find(optim::kStepCounter)->tensor().get(0); }
};

/// Runs `steps` times and compares each learning rate with `formula(step)` (step from 0), in f32.
void check_schedule(double lr, const optim::Schedule& s, int steps, const std::function<double(double)>& formula) {
  Scheduled m(lr, s);
  for (int i = 0; i < steps; ++i) {
    double got = m.run();
    double want = formula(double(i));
    INFO(s.kind, " step ", i, ": got ", got, " want ", want);
    CHECK(got == doctest::Approx(double(float(want))).epsilon(1e-6));
    CHECK(m.counter() == double(i + 1));
  }
}

}  // namespace

TEST_CASE("lr_schedule: exponential decay, continuous and staircase") {
  double lr = F(0.1), rate = F(0.5), ds = F(3);
  check_schedule(0.1, optim::exponential_decay(3, 0.5), 8, [&](double s) { return lr * std::pow(rate, s / ds); });
  check_schedule(0.1, optim::exponential_decay(3, 0.5, true), 8, [&](double s) { return lr * std::pow(rate, std::floor(s / ds)); });
  // Staircase is flat within a period and drops at its end.
  Scheduled m(0.1, optim::exponential_decay(3, 0.5, true));
  Vec got;
  for (int i = 0; i < 7; ++i) got.push_back(m.run());
  CHECK(got[0] == got[2]);
  CHECK(got[3] < got[2]);
  CHECK(got[3] == got[5]);
  CHECK(got[6] == doctest::Approx(got[0] * 0.25));
}

TEST_CASE("lr_schedule: natural_exp and inverse_time decay") {
  double lr = F(0.2), rate = F(0.3), ds = F(2);
  check_schedule(0.2, optim::natural_exp_decay(2, 0.3), 7, [&](double s) { return lr * std::exp(-rate * s / ds); });
  check_schedule(0.2, optim::natural_exp_decay(2, 0.3, true), 7, [&](double s) { return lr * std::exp(-rate * std::floor(s / ds)); });
  double r2 = F(0.5);
  check_schedule(0.2, optim::inverse_time_decay(2, 0.5), 7, [&](double s) { return lr / (1 + r2 * s / ds); });
  check_schedule(0.2, optim::inverse_time_decay(2, 0.5, true), 7, [&](double s) { return lr / (1 + r2 * std::floor(s / ds)); });
}

TEST_CASE("lr_schedule: polynomial decay, saturating at end_lr, and with cycle") {
  double lr = F(0.1), end = F(0.01), power = F(2), ds = F(4);
  check_schedule(0.1, optim::polynomial_decay(4, 0.01, 2.0), 9, [&](double s) {
    double t = std::min(s, ds);
    return (lr - end) * std::pow(1 - t / ds, power) + end;
  });
  // Without cycle it stays at end_lr after decay_steps.
  Scheduled m(0.1, optim::polynomial_decay(4, 0.01, 2.0));
  for (int i = 0; i < 4; ++i) m.run();
  for (int i = 0; i < 3; ++i) CHECK(m.run() == doctest::Approx(end).epsilon(1e-6));
  // With cycle the period stretches to decay_steps * ceil(step / decay_steps) (1 at step 0).
  check_schedule(0.1, optim::polynomial_decay(4, 0.01, 1.0, true), 11, [&](double s) {
    double d = ds * std::max(1.0, std::ceil(s / ds));
    return (lr - end) * (1 - s / d) + end;
  });
  Scheduled c(0.1, optim::polynomial_decay(4, 0.01, 1.0, true));
  Vec got;
  for (int i = 0; i < 6; ++i) got.push_back(c.run());
  CHECK(got[4] == doctest::Approx(end).epsilon(1e-6));  // step 4: end of the first period
  CHECK(got[5] > got[4]);                                 // step 5: a new, longer period begins
}

TEST_CASE("lr_schedule: piecewise constant") {
  check_schedule(0.1, optim::piecewise_decay({2, 5}, {0.1f, 0.05f, 0.01f}), 8, [](double s) { return s < 2 ? F(0.1) : s < 5 ? F(0.05) : F(0.01); });
}

TEST_CASE("lr_schedule: cosine decay over total_steps, then flat") {
  double lr = F(0.1), total = F(6);
  check_schedule(0.1, optim::cosine_decay(6), 9, [&](double s) { return lr * 0.5 * (1 + std::cos(std::numbers::pi * std::min(s, total) / total)); });
}

TEST_CASE("lr_schedule: cosine decay after a linear warmup") {
  double lr = F(0.1), total = F(8), w = F(3);
  check_schedule(0.1, optim::cosine_decay(8, 3), 11, [&](double s) {
    if (s < w) return lr * (s + 1) / w;
    return lr * 0.5 * (1 + std::cos(std::numbers::pi * std::min(s - w, total - w) / (total - w)));
  });
  // The peak is reached at the warmup's last step and held for one step, as the cosine starts at lr.
  Scheduled m(0.1, optim::cosine_decay(8, 3));
  Vec got;
  for (int i = 0; i < 5; ++i) got.push_back(m.run());
  CHECK(got[0] < got[1]);
  CHECK(got[2] == doctest::Approx(F(0.1)).epsilon(1e-6));
  CHECK(got[3] == doctest::Approx(F(0.1)).epsilon(1e-6));
  CHECK(got[4] < got[3]);
}

TEST_CASE("lr_schedule: noam (warmup then inverse square root), step counted from 1") {
  double lr = F(2.0), d = F(64), w = F(3);
  check_schedule(2.0, optim::noam_decay(64, 3), 8, [&](double s) {
    double t = s + 1;
    return lr * std::pow(d, -0.5) * std::min(std::pow(t, -0.5), std::pow(w, -1.5) * t);
  });
  // It peaks at the end of the warmup.
  Scheduled m(2.0, optim::noam_decay(64, 3));
  Vec got;
  for (int i = 0; i < 6; ++i) got.push_back(m.run());
  CHECK(got[1] > got[0]);
  CHECK(got[2] > got[1]);
  CHECK(got[3] < got[2]);
}

TEST_CASE("lr_schedule: linear warmup from start_lr to lr, then lr") {
  double lr = F(0.1), start = F(0.01), w = F(4);
  check_schedule(0.1, optim::linear_warmup(4, 0.01), 7, [&](double s) { return s < w ? start + (lr - start) * s / w : lr; });
}

TEST_CASE("lr_schedule: the scheduled rate drives the update; the counter is a persistable global that survives") {
  Scheduled m(0.1, optim::exponential_decay(2, 0.5));
  const Block& b = m.t.main.global_block();
  REQUIRE(b.has_var(optim::kStepCounter));
  CHECK(b.var(optim::kStepCounter).persistable());
  CHECK(m.t.startup.global_block().has_var(optim::kStepCounter));
  CHECK(b.var(m.lr).shape() == Shape{1});
  CHECK(b.var(m.lr).dtype() == f32);
  CHECK(m.counter() == 0);  // startup initialized it
  int schedules = 0, increments = 0;
  for (auto* op : b.ops()) {
    schedules += op->type() == "lr_schedule";
    increments += op->type() == "increment" && op->input("X")[0] == optim::kStepCounter;
  }
  CHECK(schedules == 1);
  CHECK(increments == 1);

  // sgd uses the scheduled rate: w -= lr_step * g.
  for (int i = 0; i < 3; ++i) {
    Vec before = values(m.scope.find("w")->tensor());
    auto r = m.exe.run(m.t.main, m.scope, m.feeds, {m.lr, "w@GRAD"});
    double lr = r[0].get(0);
    Vec g = values(r[1]);
    CHECK(lr == doctest::Approx(F(0.1) * std::pow(F(0.5), i / 2.0)).epsilon(1e-6));
    Vec after = values(m.scope.find("w")->tensor());
    for (size_t k = 0; k < g.size(); ++k) CHECK(before[k] - after[k] == doctest::Approx(lr * g[k]).epsilon(1e-9));
  }
  CHECK(m.counter() == 3);

  // Another executor on the same scope continues from step 3.
  Executor other;
  double lr3 = other.run(m.t.main, m.scope, m.feeds, {m.lr})[0].get(0);
  CHECK(lr3 == doctest::Approx(F(0.1) * std::pow(F(0.5), 1.5)).epsilon(1e-6));
  CHECK(m.counter() == 4);

  // Restoring the counter into a fresh scope (as a checkpoint would) resumes the schedule there.
  Scope fresh;
  Executor e2;
  e2.run(m.t.startup, fresh);
  fresh.find(optim::kStepCounter)->tensor().copy_from(m.scope.find(optim::kStepCounter)->tensor());
  double lr4 = e2.run(m.t.main, fresh, m.feeds, {m.lr})[0].get(0);
  CHECK(lr4 == doctest::Approx(F(0.1) * std::pow(F(0.5), 2.0)).epsilon(1e-6));
}

TEST_CASE("lr_schedule: the constant learning rate has no counter") {
  Tape tape;
  auto x = data("x", f64, {-1, 3});
  auto loss = mean(fc(x, 2));
  Topology t = tape.program(loss);
  auto pg = append_backward(t.main, t.outputs[0]);
  optim::append_update(t.main, t.startup, optim::sgd(0.1), pg);
  CHECK_FALSE(t.main.global_block().has_var(optim::kStepCounter));
}

TEST_CASE("lr_schedule: bad schedules are errors when the update is appended") {
  auto append = [](const optim::Schedule& s) {
    Tape tape;
    auto x = data("x", f64, {-1, 3});
    auto loss = mean(fc(x, 2));
    Topology t = tape.program(loss);
    auto pg = append_backward(t.main, t.outputs[0]);
    optim::append_update(t.main, t.startup, optim::sgd(0.1).with_schedule(s), pg);
  };
  CHECK_THROWS_WITH_AS(append(optim::piecewise_decay({2, 5}, {0.1f, 0.05f})), doctest::Contains("one more value than boundaries"), Error);
  CHECK_THROWS_WITH_AS(append(optim::piecewise_decay({2, 5}, {0.1f, 0.05f, 0.01f, 0.001f})), doctest::Contains("got 4 values and 2 boundaries"), Error);
  CHECK_THROWS_WITH_AS(append(optim::piecewise_decay({5, 2}, {0.1f, 0.05f, 0.01f})), doctest::Contains("ascending"), Error);
  CHECK_THROWS_WITH_AS(append(optim::exponential_decay(0, 0.5)), doctest::Contains("decay_steps > 0"), Error);
  CHECK_THROWS_WITH_AS(append(optim::cosine_decay(0)), doctest::Contains("total_steps > warmup_steps >= 0, got 0 and 0"), Error);
  CHECK_THROWS_WITH_AS(append(optim::cosine_decay(10, 10)), doctest::Contains("got 10 and 10"), Error);
  CHECK_THROWS_WITH_AS(append(optim::noam_decay(64, 0)), doctest::Contains("warmup_steps > 0"), Error);
  CHECK_THROWS_WITH_AS(append(optim::Schedule{"sawtooth", {}}), doctest::Contains("kind"), Error);
  CHECK_NOTHROW(append(optim::piecewise_decay({2, 5}, {0.1f, 0.05f, 0.01f})));
}
