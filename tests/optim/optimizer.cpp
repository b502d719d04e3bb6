// tests/optim/optimizer.cpp: append_update with every update rule on a one-parameter f64 model: two steps with
// fixed feeds, the parameter after each step against the rule's formula computed here from the fetched gradient;
// the accumulators (names, shapes, initial values, persistable globals of the startup program) and the
// per-parameter learning-rate scale.
#include <functional>

#include "pch.hpp"
#include "support/values.hpp"

using namespace oar;
using oar::test::F;
using oar::test::values;
using oar::test::Vec;

namespace {

double norm(const Vec& v) {
  double s = 0;
  for (double x : v) s += x * x;
  return std::sqrt(s);
}
void check_close(const Vec& got, const Vec& want, const std::string& what, double rel = 1e-12) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO(what, "[", i, "]: got ", got[i], " want ", want[i]);
    CHECK(std::abs(got[i] - want[i]) <= rel * std::max(1.0, std::abs(want[i])));
  }
}

const Vec kW0 = {0.3, -0.2, 0.5, 0.1, -0.4, 0.25};  // w: [3, 2]

/// x [-1, 3] -> fc(2, no bias, param "w") -> square_error_cost vs y -> mean; backward + update in one program.
struct Net {
  Topology t;
  std::vector<ParamGrad> pg;
  std::string lr;
  Scope scope;
  Executor exe;
  FeedMap feeds;

  explicit Net(const optim::Rule& rule, ParamAttr w = ParamAttr("w")) {
    Tape tape;
    auto x = data("x", f64, {-1, 3});
    auto y = data("y", f64, {-1, 2});
    auto out = fc(x, 2).param(w).bias(false);
    auto loss = mean(square_error_cost(out, y));
    t = tape.program(loss);
    pg = append_backward(t.main, t.outputs[0]);
    lr = optim::append_update(t.main, t.startup, rule, pg);
    exe.run(t.startup, scope);
    std::memcpy(param().data<double>(), kW0.data(), kW0.size() * sizeof(double));
    feeds["x"] = LoDTensor(Tensor::from(Vec{1.0, -2.0, 0.5, 0.3, 0.8, -1.5, -0.7, 0.2, 1.1, 2.0, -0.5, 0.4}, Shape{4, 3}));
    feeds["y"] = LoDTensor(Tensor::from(Vec{0.5, -1.0, 1.5, 0.2, -0.3, 0.9, 2.0, -0.6}, Shape{4, 2}));
  }
  LoDTensor& param() { return scope.find("w")->tensor(); }
  Vec value(const std::string& n) { return values(scope.find(n)->tensor()); }
  /// One run; returns the gradient the update used.
  Vec step() { return values(exe.run(t.main, scope, feeds, {"w@GRAD"})[0]); }
};

using Update = std::function<void(Vec& p, const Vec& g)>;

/// Runs two steps of `rule`, applying `update` to a copy of the parameter after each from the fetched gradient.
void check_two_steps(const optim::Rule& rule, Update update, double rel = 1e-12) {
  Net m(rule);
  Vec p = kW0;
  for (int s = 0; s < 2; ++s) {
    Vec g = m.step();
    double gn = norm(g);
    CHECK(gn > 0.1);  // a real gradient
    update(p, g);
    check_close(m.value("w"), p, fmt::format("{} step {}", rule.type, s + 1), rel);
  }
  // The parameter moved.
  double moved = 0;
  for (size_t i = 0; i < p.size(); ++i) moved += std::abs(p[i] - kW0[i]);
  CHECK(moved > 1e-4);
}

/// The accumulator `w.<slot>` is a persistable global of main, created in startup with a fill_constant of `init`.
void check_accumulator(Net& m, const std::string& slot, Shape shape, double init) {
  std::string n = "w." + slot;
  INFO(n);
  REQUIRE(m.t.main.global_block().has_var(n));
  const Variable& v = m.t.main.global_block().var(n);
  CHECK(v.persistable());
  CHECK(v.shape() == shape);
  CHECK(v.dtype() == f64);
  REQUIRE(m.t.startup.global_block().has_var(n));
  CHECK(m.t.startup.global_block().var(n).persistable());
  bool init_op = false;
  for (auto* op : m.t.startup.global_block().ops())
    if (op->type() == "fill_constant" && op->output("Out")[0] == n) {
      init_op = true;
      CHECK(op->attr<float>("value") == float(init));
    }
  CHECK(init_op);
  // After startup (before any step) the scope holds the initial value.
  for (double x : m.value(n)) CHECK(x == F(init));
}

}  // namespace

TEST_CASE("optimizer: sgd: p -= lr g, two steps; the learning rate is a persistable f32 global") {
  Net m(optim::sgd(0.1));
  CHECK(m.lr == "learning_rate_0");
  const Variable& lr = m.t.main.global_block().var(m.lr);
  CHECK(lr.persistable());
  CHECK(lr.dtype() == f32);
  CHECK(lr.shape() == Shape{1});
  CHECK(m.value(m.lr) == Vec{F(0.1)});
  // One update op per parameter, in place.
  int n = 0;
  for (auto* op : m.t.main.global_block().ops())
    if (op->type() == "sgd") {
      ++n;
      CHECK(op->input("Param") == std::vector<std::string>{"w"});
      CHECK(op->output("ParamOut") == std::vector<std::string>{"w"});
      CHECK(op->input("Grad") == std::vector<std::string>{"w@GRAD"});
      // The f64 model's update reads the rate cast to f64 once (what the CUDA kernels need; exact).
      CHECK(op->input("LearningRate") == std::vector<std::string>{"learning_rate_0.f64"});
    }
  CHECK(n == 1);
  int casts = 0;
  for (auto* op : m.t.main.global_block().ops())
    if (op->type() == "cast" && op->input("X")[0] == "learning_rate_0" && op->output("Out")[0] == "learning_rate_0.f64") ++casts;
  CHECK(casts == 1);
  check_two_steps(optim::sgd(0.1), [](Vec& p, const Vec& g) {
    for (size_t i = 0; i < p.size(); ++i) p[i] -= F(0.1) * g[i];
  });
}

TEST_CASE("optimizer: momentum and nesterov momentum") {
  Net m(optim::momentum(0.1, 0.9));
  check_accumulator(m, "Velocity", Shape{3, 2}, 0);
  for (bool nesterov : {false, true}) {
    CAPTURE(nesterov);
    Vec v(6, 0.0);
    check_two_steps(optim::momentum(0.1, 0.9, nesterov), [&](Vec& p, const Vec& g) {
      double lr = F(0.1), mu = F(0.9);
      for (size_t i = 0; i < p.size(); ++i) {
        v[i] = mu * v[i] + g[i];
        p[i] -= nesterov ? lr * (g[i] + mu * v[i]) : lr * v[i];
      }
    });
  }
  // The velocity in the scope after two steps.
  Vec v(6, 0.0);
  for (int s = 0; s < 2; ++s) {
    Vec g = m.step();
    for (size_t i = 0; i < 6; ++i) v[i] = F(0.9) * v[i] + g[i];
  }
  check_close(m.value("w.Velocity"), v, "velocity");
}

TEST_CASE("optimizer: adagrad and decayed_adagrad") {
  Net m(optim::adagrad(0.1));
  check_accumulator(m, "Moment", Shape{3, 2}, 0);
  Vec mo(6, 0.0);
  check_two_steps(optim::adagrad(0.1, 1e-6), [&](Vec& p, const Vec& g) {
    for (size_t i = 0; i < p.size(); ++i) {
      mo[i] += g[i] * g[i];
      p[i] -= F(0.1) * g[i] / (std::sqrt(mo[i]) + F(1e-6));
    }
  });
  Net md(optim::decayed_adagrad(0.1, 0.9));
  check_accumulator(md, "Moment", Shape{3, 2}, 0);
  Vec dm(6, 0.0);
  check_two_steps(optim::decayed_adagrad(0.1, 0.9, 1e-6), [&](Vec& p, const Vec& g) {
    double d = F(0.9);
    for (size_t i = 0; i < p.size(); ++i) {
      dm[i] = d * dm[i] + (1 - d) * g[i] * g[i];
      p[i] -= F(0.1) * g[i] / (std::sqrt(dm[i]) + F(1e-6));
    }
  });
}

TEST_CASE("optimizer: adam with bias correction; Beta1Pow starts at beta1 and advances each step") {
  Net m(optim::adam(0.01));
  check_accumulator(m, "Moment1", Shape{3, 2}, 0);
  check_accumulator(m, "Moment2", Shape{3, 2}, 0);
  check_accumulator(m, "Beta1Pow", Shape{1}, 0.9);
  check_accumulator(m, "Beta2Pow", Shape{1}, 0.999);
  Vec m1(6, 0.0), m2(6, 0.0);
  double b1 = F(0.9), b2 = F(0.999), b1p = b1, b2p = b2;
  check_two_steps(optim::adam(0.01, 0.9, 0.999, 1e-8), [&](Vec& p, const Vec& g) {
    double lr_t = F(0.01) * std::sqrt(1 - b2p) / (1 - b1p);
    for (size_t i = 0; i < p.size(); ++i) {
      m1[i] = b1 * m1[i] + (1 - b1) * g[i];
      m2[i] = b2 * m2[i] + (1 - b2) * g[i] * g[i];
      p[i] -= lr_t * m1[i] / (std::sqrt(m2[i]) + F(1e-8));
    }
    b1p *= b1;
    b2p *= b2;
  });
  // After two steps the pows are beta^3 (initial beta, times beta per step).
  m.step();
  m.step();
  check_close(m.value("w.Beta1Pow"), {b1 * b1 * b1}, "Beta1Pow");
  check_close(m.value("w.Beta2Pow"), {b2 * b2 * b2}, "Beta2Pow");
}

TEST_CASE("optimizer: adamw decays the parameter by lr * coeff before adam's step") {
  Net m(optim::adamw(0.01, 0.1));
  check_accumulator(m, "Moment1", Shape{3, 2}, 0);
  check_accumulator(m, "Beta2Pow", Shape{1}, 0.999);
  Vec m1(6, 0.0), m2(6, 0.0);
  double b1 = F(0.9), b2 = F(0.999), b1p = b1, b2p = b2, lr = F(0.01), coeff = F(0.1);
  check_two_steps(optim::adamw(0.01, 0.1), [&](Vec& p, const Vec& g) {
    double lr_t = lr * std::sqrt(1 - b2p) / (1 - b1p);
    for (size_t i = 0; i < p.size(); ++i) {
      double pd = p[i] - lr * coeff * p[i];
      m1[i] = b1 * m1[i] + (1 - b1) * g[i];
      m2[i] = b2 * m2[i] + (1 - b2) * g[i] * g[i];
      p[i] = pd - lr_t * m1[i] / (std::sqrt(m2[i]) + F(1e-8));
    }
    b1p *= b1;
    b2p *= b2;
  });
}

TEST_CASE("optimizer: adamax (infinity norm, no Beta2Pow)") {
  Net m(optim::adamax(0.01));
  check_accumulator(m, "Moment", Shape{3, 2}, 0);
  check_accumulator(m, "InfNorm", Shape{3, 2}, 0);
  check_accumulator(m, "Beta1Pow", Shape{1}, 0.9);
  CHECK_FALSE(m.t.main.global_block().has_var("w.Beta2Pow"));
  Vec mo(6, 0.0), u(6, 0.0);
  double b1 = F(0.9), b2 = F(0.999), b1p = b1;
  check_two_steps(optim::adamax(0.01), [&](Vec& p, const Vec& g) {
    for (size_t i = 0; i < p.size(); ++i) {
      mo[i] = b1 * mo[i] + (1 - b1) * g[i];
      u[i] = std::max(b2 * u[i] + F(1e-8), std::abs(g[i]));
      p[i] -= (F(0.01) / (1 - b1p)) * mo[i] / u[i];
    }
    b1p *= b1;
  });
}

TEST_CASE("optimizer: rmsprop, with momentum and centered") {
  Net m(optim::rmsprop(0.01));
  check_accumulator(m, "Moment", Shape{3, 2}, 0);
  check_accumulator(m, "MeanSquare", Shape{3, 2}, 0);
  CHECK_FALSE(m.t.main.global_block().has_var("w.MeanGrad"));
  Net mc(optim::rmsprop(0.01, 0.9, 1e-6, 0.5, true));
  check_accumulator(mc, "MeanGrad", Shape{3, 2}, 0);
  for (bool centered : {false, true}) {
    CAPTURE(centered);
    Vec ms(6, 0.0), mg(6, 0.0), mom(6, 0.0);
    check_two_steps(optim::rmsprop(0.01, 0.9, 1e-6, 0.5, centered), [&](Vec& p, const Vec& g) {
      double rho = F(0.9), eps = F(1e-6), mu = F(0.5), lr = F(0.01);
      for (size_t i = 0; i < p.size(); ++i) {
        ms[i] = rho * ms[i] + (1 - rho) * g[i] * g[i];
        double denom = ms[i] + eps;
        if (centered) {
          mg[i] = rho * mg[i] + (1 - rho) * g[i];
          denom = ms[i] - mg[i] * mg[i] + eps;
        }
        mom[i] = mu * mom[i] + lr * g[i] / std::sqrt(denom);
        p[i] -= mom[i];
      }
    });
  }
}

TEST_CASE("optimizer: adadelta has no learning-rate input") {
  Net m(optim::adadelta(0.9, 1e-6));
  check_accumulator(m, "AvgSquaredGrad", Shape{3, 2}, 0);
  check_accumulator(m, "AvgSquaredUpdate", Shape{3, 2}, 0);
  for (auto* op : m.t.main.global_block().ops())
    if (op->type() == "adadelta") CHECK_FALSE(op->has_input("LearningRate"));
  Vec eg(6, 0.0), edx(6, 0.0);
  check_two_steps(optim::adadelta(0.9, 1e-6), [&](Vec& p, const Vec& g) {
    double rho = F(0.9), eps = F(1e-6);
    for (size_t i = 0; i < p.size(); ++i) {
      eg[i] = rho * eg[i] + (1 - rho) * g[i] * g[i];
      double d = -std::sqrt((edx[i] + eps) / (eg[i] + eps)) * g[i];
      edx[i] = rho * edx[i] + (1 - rho) * d * d;
      p[i] += d;
    }
  });
}

TEST_CASE("optimizer: lamb scales the adam direction plus decay by the trust ratio") {
  Net m(optim::lamb(0.01, 0.1));
  check_accumulator(m, "Moment1", Shape{3, 2}, 0);
  check_accumulator(m, "Moment2", Shape{3, 2}, 0);
  check_accumulator(m, "Beta1Pow", Shape{1}, 0.9);
  check_accumulator(m, "Beta2Pow", Shape{1}, 0.999);
  Vec m1(6, 0.0), m2(6, 0.0);
  double b1 = F(0.9), b2 = F(0.999), b1p = b1, b2p = b2, wd = F(0.1), eps = F(1e-6);
  check_two_steps(optim::lamb(0.01, 0.1), [&](Vec& p, const Vec& g) {
    Vec r(6);
    for (size_t i = 0; i < p.size(); ++i) {
      m1[i] = b1 * m1[i] + (1 - b1) * g[i];
      m2[i] = b2 * m2[i] + (1 - b2) * g[i] * g[i];
      r[i] = (m1[i] / (1 - b1p)) / (std::sqrt(m2[i] / (1 - b2p)) + eps) + wd * p[i];
    }
    double trust = norm(p) / norm(r);
    for (size_t i = 0; i < p.size(); ++i) p[i] -= F(0.01) * trust * r[i];
    b1p *= b1;
    b2p *= b2;
  }, 1e-10);
}

TEST_CASE("optimizer: ParamAttr::with_learning_rate scales that parameter's step (a scale op on the learning rate)") {
  Net full(optim::sgd(0.1));
  Net half(optim::sgd(0.1), ParamAttr("w").with_learning_rate(0.5));
  const Block& b = half.t.main.global_block();
  REQUIRE(b.has_var("w@LR"));
  bool scaled = false;
  for (auto* op : b.ops()) {
    if (op->type() == "scale" && op->output("Out")[0] == "w@LR") {
      scaled = true;
      CHECK(op->input("X")[0] == "learning_rate_0");
      CHECK(op->attr<float>("scale") == 0.5f);
    }
    if (op->type() == "sgd") CHECK(op->input("LearningRate")[0] == "w@LR.f64");
  }
  CHECK(scaled);
  CHECK_FALSE(full.t.main.global_block().has_var("w@LR"));
  Vec g = full.step();
  Vec g2 = half.step();
  check_close(g2, g, "same gradient");
  Vec pf = full.value("w"), ph = half.value("w");
  for (size_t i = 0; i < 6; ++i) {
    CHECK(kW0[i] - pf[i] == doctest::Approx(F(0.1) * g[i]).epsilon(1e-12));
    CHECK(kW0[i] - ph[i] == doctest::Approx(0.5 * F(0.1) * g[i]).epsilon(1e-12));
  }
}

TEST_CASE("optimizer: several parameters each get an update op and their own accumulators") {
  Tape tape;
  auto x = data("x", f64, {-1, 3});
  auto y = data("y", f64, {-1, 2});
  auto out = fc(fc(x, 4).act(oar::tanh), 2);
  auto loss = mean(square_error_cost(out, y));
  Topology t = tape.program(loss);
  auto pg = append_backward(t.main, t.outputs[0]);
  REQUIRE(pg.size() == 4);
  optim::append_update(t.main, t.startup, optim::adam(0.01), pg);
  int adams = 0;
  for (auto* op : t.main.global_block().ops()) adams += op->type() == "adam";
  CHECK(adams == 4);
  for (auto& [p, g] : pg) {
    CHECK(t.main.global_block().var(p + ".Moment1").shape() == t.main.global_block().var(p).shape());
    CHECK(t.main.global_block().var(p + ".Beta1Pow").shape() == Shape{1});
  }
  // Training reduces the loss.
  Scope scope;
  Executor exe;
  exe.run(t.startup, scope);
  FeedMap feeds{{"x", LoDTensor(Tensor::from(Vec{1.0, -2.0, 0.5, 0.3, 0.8, -1.5}, Shape{2, 3}))},
                {"y", LoDTensor(Tensor::from(Vec{0.5, -0.3, 0.2, 0.4}, Shape{2, 2}))}};
  double first = exe.run(t.main, scope, feeds, {t.outputs[0]})[0].get(0), last = first;
  for (int i = 0; i < 50; ++i) last = exe.run(t.main, scope, feeds, {t.outputs[0]})[0].get(0);
  CHECK(last < 0.5 * first);
}

TEST_CASE("optimizer: an unknown rule is an error") {
  optim::Rule r{"nope", 0.1, {}};
  Tape tape;
  auto x = data("x", f64, {-1, 3});
  auto loss = mean(fc(x, 2));
  Topology t = tape.program(loss);
  auto pg = append_backward(t.main, t.outputs[0]);
  CHECK_THROWS_WITH_AS(optim::append_update(t.main, t.startup, r, pg), doctest::Contains("unknown update rule 'nope'"), Error);
}
