// tests/ops/optimizers.cpp: the parameter update ops (ops/optimizers.hpp) against their formulas written out in
// plain C++: one or two hand-fed steps each, f32 and f64, in place (ParamOut = Param) through the Executor,
// SelectedRows gradients for sgd and adam, and the errors.
#include <cmath>

#include "pch.hpp"
#include "support/op_check.hpp"

using namespace oar;
using namespace oar::test;

namespace {

using V = std::vector<double>;

/// The float value an attribute really holds (attributes are f32).
double fa(double x) { return double(float(x)); }

template <class T>
Tensor vec(const V& v, Shape s = {}) {
  std::vector<T> t(v.begin(), v.end());
  return Tensor::from<T>(t, s.empty() ? Shape{int64_t(v.size())} : s);
}
template <class T>
Tensor one(double x) { return vec<T>({x}, Shape{1}); }

V values(const Tensor& t) {
  V v(size_t(t.numel()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = t.get(int64_t(i));
  return v;
}

/// Tolerances of a T computation against the double reference.
template <class T> double tol() { return std::is_same_v<T, float> ? 2e-5 : 1e-12; }

template <class T>
void expect(const Tensor& got, const V& want, const std::string& what) {
  REQUIRE_MESSAGE(got.dtype() == dtype_of<T>, what << ": dtype " << name(got.dtype()));
  check_close(got, Tensor::from<double>(want, got.shape()), tol<T>(), tol<T>() * 5, what);
}

// ---- the formulas, in plain C++ (double) -------------------------------------------------------------------

V sgd_ref(const V& p, const V& g, double lr) {
  V o(p.size());
  for (size_t i = 0; i < p.size(); ++i) o[i] = p[i] - lr * g[i];
  return o;
}

struct MomentumOut { V p, v; };
MomentumOut momentum_ref(const V& p, const V& g, const V& v, double lr, double mu, bool nesterov) {
  MomentumOut o{p, v};
  for (size_t i = 0; i < p.size(); ++i) {
    o.v[i] = mu * v[i] + g[i];
    o.p[i] = nesterov ? p[i] - lr * (g[i] + mu * o.v[i]) : p[i] - lr * o.v[i];
  }
  return o;
}

struct MomentOut { V p, m; };
MomentOut adagrad_ref(const V& p, const V& g, const V& m, double lr, double eps) {
  MomentOut o{p, m};
  for (size_t i = 0; i < p.size(); ++i) {
    o.m[i] = m[i] + g[i] * g[i];
    o.p[i] = p[i] - lr * g[i] / (std::sqrt(o.m[i]) + eps);
  }
  return o;
}
MomentOut decayed_adagrad_ref(const V& p, const V& g, const V& m, double lr, double decay, double eps) {
  MomentOut o{p, m};
  for (size_t i = 0; i < p.size(); ++i) {
    o.m[i] = decay * m[i] + (1 - decay) * g[i] * g[i];
    o.p[i] = p[i] - lr * g[i] / (std::sqrt(o.m[i]) + eps);
  }
  return o;
}

struct AdamState { V p, m1, m2; double b1p, b2p; };
/// adam (coeff = 0) and adamw: p~ = p - lr * coeff * p; lr_t = lr * sqrt(1 - b2p) / (1 - b1p);
/// p' = p~ - lr_t * m1' / (sqrt(m2') + eps); pows advance by beta.
AdamState adam_ref(const AdamState& s, const V& g, double lr, double beta1, double beta2, double eps, double coeff = 0) {
  AdamState o = s;
  double lr_t = lr * std::sqrt(1 - s.b2p) / (1 - s.b1p);
  for (size_t i = 0; i < g.size(); ++i) {
    double p = s.p[i] - lr * coeff * s.p[i];
    o.m1[i] = beta1 * s.m1[i] + (1 - beta1) * g[i];
    o.m2[i] = beta2 * s.m2[i] + (1 - beta2) * g[i] * g[i];
    o.p[i] = p - lr_t * o.m1[i] / (std::sqrt(o.m2[i]) + eps);
  }
  o.b1p = s.b1p * beta1;
  o.b2p = s.b2p * beta2;
  return o;
}

struct AdamaxState { V p, m, u; double b1p; };
AdamaxState adamax_ref(const AdamaxState& s, const V& g, double lr, double beta1, double beta2, double eps) {
  AdamaxState o = s;
  for (size_t i = 0; i < g.size(); ++i) {
    o.m[i] = beta1 * s.m[i] + (1 - beta1) * g[i];
    o.u[i] = std::max(beta2 * s.u[i] + eps, std::abs(g[i]));
    o.p[i] = s.p[i] - (lr / (1 - s.b1p)) * o.m[i] / o.u[i];
  }
  o.b1p = s.b1p * beta1;
  return o;
}

struct RmspropState { V p, ms, mg, mom; };
RmspropState rmsprop_ref(const RmspropState& s, const V& g, double lr, double decay, double eps, double momentum, bool centered) {
  RmspropState o = s;
  for (size_t i = 0; i < g.size(); ++i) {
    o.ms[i] = decay * s.ms[i] + (1 - decay) * g[i] * g[i];
    double denom = o.ms[i] + eps;
    if (centered) {
      o.mg[i] = decay * s.mg[i] + (1 - decay) * g[i];
      denom = o.ms[i] - o.mg[i] * o.mg[i] + eps;
    }
    o.mom[i] = momentum * s.mom[i] + lr * g[i] / std::sqrt(denom);
    o.p[i] = s.p[i] - o.mom[i];
  }
  return o;
}

struct AdadeltaState { V p, eg, edx; };
AdadeltaState adadelta_ref(const AdadeltaState& s, const V& g, double rho, double eps) {
  AdadeltaState o = s;
  for (size_t i = 0; i < g.size(); ++i) {
    o.eg[i] = rho * s.eg[i] + (1 - rho) * g[i] * g[i];
    double d = -std::sqrt((s.edx[i] + eps) / (o.eg[i] + eps)) * g[i];
    o.edx[i] = rho * s.edx[i] + (1 - rho) * d * d;
    o.p[i] = s.p[i] + d;
  }
  return o;
}

/// lamb: r = (m1'/(1-b1p)) / (sqrt(m2'/(1-b2p)) + eps) + wd * p; trust = ||p|| / ||r|| (1 if a norm is 0);
/// p' = p - lr * trust * r.
AdamState lamb_ref(const AdamState& s, const V& g, double lr, double beta1, double beta2, double eps, double wd) {
  AdamState o = s;
  V r(g.size());
  double pn = 0, rn = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    o.m1[i] = beta1 * s.m1[i] + (1 - beta1) * g[i];
    o.m2[i] = beta2 * s.m2[i] + (1 - beta2) * g[i] * g[i];
    r[i] = (o.m1[i] / (1 - s.b1p)) / (std::sqrt(o.m2[i] / (1 - s.b2p)) + eps) + wd * s.p[i];
    pn += s.p[i] * s.p[i];
    rn += r[i] * r[i];
  }
  pn = std::sqrt(pn), rn = std::sqrt(rn);
  double trust = pn > 0 && rn > 0 ? pn / rn : 1.0;
  for (size_t i = 0; i < g.size(); ++i) o.p[i] = s.p[i] - lr * trust * r[i];
  o.b1p = s.b1p * beta1;
  o.b2p = s.b2p * beta2;
  return o;
}

// ---- the hand-fed values -------------------------------------------------------------------------------------

const V P = {0.5, -1.2, 2.0};
const V G = {0.1, -0.3, 0.7};
const V G2 = {-0.2, 0.05, 0.4};
const V M = {0.2, 0.05, 0.4};   // a non-negative accumulator
const V M2 = {0.01, 0.3, 0.02};  // another

/// A value of the scope: a tensor or SelectedRows.
using ScopeVal = std::variant<Tensor, SelectedRows>;

/// Builds one `type` op whose slots name the scope variables given (`ins`, `outs`: slot -> variable), every
/// variable persistable; puts `vals` into `scope` and runs the op `steps` times through Executor::prepare/run.
void run_in_scope(Scope& scope, const std::string& type, const std::map<std::string, ScopeVal>& vals,
                  const std::vector<std::pair<std::string, std::string>>& ins, const std::vector<std::pair<std::string, std::string>>& outs,
                  const std::map<std::string, Attribute>& attrs = {}, int steps = 1) {
  Program prog;
  Block& b = prog.global_block();
  for (auto& [n, v] : vals) {
    if (auto* t = std::get_if<Tensor>(&v)) {
      b.create_var(n, {.dtype = t->dtype(), .shape = t->shape(), .persistable = true});
      scope.var(n).tensor() = LoDTensor(t->clone());
    } else {
      auto& sr = std::get<SelectedRows>(v);
      Shape s = sr.value.shape();
      s[0] = sr.height;
      b.create_var(n, {.dtype = sr.value.dtype(), .shape = s, .persistable = true, .kind = VarKind::selected_rows});
      scope.var(n).selected_rows() = sr;
    }
  }
  Operator op(type);
  for (auto& [slot, n] : ins) op.set_input(slot, {n});
  for (auto& [slot, n] : outs) {
    if (!b.find_var(n)) b.create_var(n, {.persistable = true});
    op.set_output(slot, {n});
  }
  for (auto& [k, v] : attrs) op.set_attr(k, v);
  add_op(b, op);
  Executor exe;
  auto prepared = exe.prepare(prog, scope);
  for (int i = 0; i < steps; ++i) exe.run(*prepared, scope);
}

}  // namespace

// ---- one step of each op against its formula ----------------------------------------------------------------

TEST_CASE_TEMPLATE("sgd: ParamOut = Param - lr * Grad", T, float, double) {
  auto out = OpTest("sgd").input("Param", vec<T>(P)).input("Grad", vec<T>(G)).input("LearningRate", one<T>(0.1)).run();
  expect<T>(out["ParamOut"], sgd_ref(P, G, double(T(0.1))), "sgd");
  // a float32 learning rate with float64 parameters (Fluid's learning-rate variable is float32)
  auto out32 = OpTest("sgd").input("Param", vec<T>(P)).input("Grad", vec<T>(G)).input("LearningRate", one<float>(0.1)).run();
  expect<T>(out32["ParamOut"], sgd_ref(P, G, double(0.1f)), "sgd, f32 lr");
}

TEST_CASE_TEMPLATE("momentum: plain and Nesterov", T, float, double) {
  for (bool nesterov : {false, true}) {
    auto out = OpTest("momentum").input("Param", vec<T>(P)).input("Grad", vec<T>(G)).input("Velocity", vec<T>(M))
                   .input("LearningRate", one<T>(0.05)).attr("mu", 0.9f).attr("use_nesterov", nesterov).run();
    auto want = momentum_ref(P, G, M, double(T(0.05)), fa(0.9), nesterov);
    expect<T>(out["ParamOut"], want.p, "momentum ParamOut");
    expect<T>(out["VelocityOut"], want.v, "momentum VelocityOut");
  }
}

TEST_CASE_TEMPLATE("adagrad and decayed_adagrad", T, float, double) {
  auto a = OpTest("adagrad").input("Param", vec<T>(P)).input("Grad", vec<T>(G)).input("Moment", vec<T>(M)).input("LearningRate", one<T>(0.1)).run();
  auto wa = adagrad_ref(P, G, M, double(T(0.1)), fa(1e-6));
  expect<T>(a["ParamOut"], wa.p, "adagrad ParamOut");
  expect<T>(a["MomentOut"], wa.m, "adagrad MomentOut");

  auto d = OpTest("decayed_adagrad").input("Param", vec<T>(P)).input("Grad", vec<T>(G)).input("Moment", vec<T>(M))
               .input("LearningRate", one<T>(0.1)).attr("decay", 0.8f).attr("epsilon", 1e-4f).run();
  auto wd = decayed_adagrad_ref(P, G, M, double(T(0.1)), fa(0.8), fa(1e-4));
  expect<T>(d["ParamOut"], wd.p, "decayed_adagrad ParamOut");
  expect<T>(d["MomentOut"], wd.m, "decayed_adagrad MomentOut");
  // defaults decay 0.95, epsilon 1e-6
  auto d0 = OpTest("decayed_adagrad").input("Param", vec<T>(P)).input("Grad", vec<T>(G)).input("Moment", vec<T>(M)).input("LearningRate", one<T>(0.1)).run();
  expect<T>(d0["ParamOut"], decayed_adagrad_ref(P, G, M, double(T(0.1)), fa(0.95), fa(1e-6)).p, "decayed_adagrad defaults");
}

namespace {
/// Two adam / adamw steps through OpTest, the second fed with the first's outputs (pows from Beta*PowOut).
template <class T>
void two_adam_steps(const std::string& type, double coeff) {
  const double lr = double(T(0.01)), b1 = fa(0.9), b2 = fa(0.999), eps = fa(1e-8);
  AdamState s{P, M, M2, double(T(b1)), double(T(b2))};
  Tensor p = vec<T>(P), m1 = vec<T>(M), m2 = vec<T>(M2), b1p = one<T>(b1), b2p = one<T>(b2);
  for (const V* g : {&G, &G2}) {
    OpTest t(type);
    t.input("Param", p).input("Grad", vec<T>(*g)).input("LearningRate", one<T>(0.01)).input("Moment1", m1).input("Moment2", m2)
        .input("Beta1Pow", b1p).input("Beta2Pow", b2p);
    if (type == "adamw") t.attr("coeff", float(coeff));
    auto out = t.run();
    s = adam_ref(s, *g, lr, b1, b2, eps, fa(coeff));
    expect<T>(out["ParamOut"], s.p, type + " ParamOut");
    expect<T>(out["Moment1Out"], s.m1, type + " Moment1Out");
    expect<T>(out["Moment2Out"], s.m2, type + " Moment2Out");
    expect<T>(out["Beta1PowOut"], {s.b1p}, type + " Beta1PowOut");
    expect<T>(out["Beta2PowOut"], {s.b2p}, type + " Beta2PowOut");
    p = out["ParamOut"], m1 = out["Moment1Out"], m2 = out["Moment2Out"], b1p = out["Beta1PowOut"], b2p = out["Beta2PowOut"];
  }
}
}  // namespace

TEST_CASE_TEMPLATE("adam: two steps with the beta pows advancing", T, float, double) { two_adam_steps<T>("adam", 0.0); }

TEST_CASE_TEMPLATE("adamw: decoupled decay p -= lr*coeff*p, then adam", T, float, double) {
  two_adam_steps<T>("adamw", 0.01);
  two_adam_steps<T>("adamw", 0.3);
}

TEST_CASE("adamw: with_decay = false is adam") {
  auto base = [](const std::string& type) {
    OpTest t(type);
    t.input("Param", vec<double>(P)).input("Grad", vec<double>(G)).input("LearningRate", one<double>(0.01)).input("Moment1", vec<double>(M))
        .input("Moment2", vec<double>(M2)).input("Beta1Pow", one<double>(0.9)).input("Beta2Pow", one<double>(0.999));
    return t;
  };
  auto a = base("adam").run();
  auto w = base("adamw").attr("coeff", 0.5f).attr("with_decay", false).run();
  check_close(w["ParamOut"], a["ParamOut"], 0, 0, "adamw without decay");
}

TEST_CASE_TEMPLATE("adamax: two steps", T, float, double) {
  const double lr = double(T(0.002)), b1 = fa(0.9), b2 = fa(0.999), eps = fa(1e-8);
  AdamaxState s{P, M, M2, double(T(b1))};
  Tensor p = vec<T>(P), m = vec<T>(M), u = vec<T>(M2), b1p = one<T>(b1);
  for (const V* g : {&G, &G2}) {
    auto out = OpTest("adamax").input("Param", p).input("Grad", vec<T>(*g)).input("LearningRate", one<T>(0.002)).input("Moment", m)
                   .input("InfNorm", u).input("Beta1Pow", b1p).run();
    s = adamax_ref(s, *g, lr, b1, b2, eps);
    expect<T>(out["ParamOut"], s.p, "adamax ParamOut");
    expect<T>(out["MomentOut"], s.m, "adamax MomentOut");
    expect<T>(out["InfNormOut"], s.u, "adamax InfNormOut");
    expect<T>(out["Beta1PowOut"], {s.b1p}, "adamax Beta1PowOut");
    p = out["ParamOut"], m = out["MomentOut"], u = out["InfNormOut"], b1p = out["Beta1PowOut"];
  }
}

TEST_CASE_TEMPLATE("rmsprop: plain and centered, with momentum", T, float, double) {
  const double lr = double(T(0.01));
  for (bool centered : {false, true})
    for (double momentum : {0.0, 0.9}) {
      CAPTURE(centered);
      CAPTURE(momentum);
      RmspropState s{P, M, G2, M2};
      Scope scope;
      std::map<std::string, ScopeVal> vals{{"p", vec<T>(P)}, {"g", vec<T>(G)}, {"ms", vec<T>(M)}, {"mom", vec<T>(M2)}, {"lr", one<T>(0.01)}};
      std::vector<std::pair<std::string, std::string>> ins{{"Param", "p"}, {"Grad", "g"}, {"MeanSquare", "ms"}, {"Moment", "mom"}, {"LearningRate", "lr"}};
      std::vector<std::pair<std::string, std::string>> outs{{"ParamOut", "p_out"}, {"MeanSquareOut", "ms_out"}, {"MomentOut", "mom_out"}};
      if (centered) {
        vals["mg"] = vec<T>(G2);
        ins.push_back({"MeanGrad", "mg"});
        outs.push_back({"MeanGradOut", "mg_out"});
      }
      run_in_scope(scope, "rmsprop", vals, ins, outs, {{"centered", centered}, {"momentum", float(momentum)}, {"decay", 0.9f}, {"epsilon", 1e-6f}});
      auto want = rmsprop_ref(s, G, lr, fa(0.9), fa(1e-6), fa(momentum), centered);
      expect<T>(scope.tensor("p_out"), want.p, "rmsprop ParamOut");
      expect<T>(scope.tensor("ms_out"), want.ms, "rmsprop MeanSquareOut");
      expect<T>(scope.tensor("mom_out"), want.mom, "rmsprop MomentOut");
      if (centered) expect<T>(scope.tensor("mg_out"), want.mg, "rmsprop MeanGradOut");
    }
}

TEST_CASE_TEMPLATE("adadelta: no learning rate", T, float, double) {
  auto out = OpTest("adadelta").input("Param", vec<T>(P)).input("Grad", vec<T>(G)).input("AvgSquaredGrad", vec<T>(M))
                 .input("AvgSquaredUpdate", vec<T>(M2)).attr("rho", 0.9f).run();
  auto want = adadelta_ref({P, M, M2}, G, fa(0.9), fa(1e-6));
  expect<T>(out["ParamOut"], want.p, "adadelta ParamOut");
  expect<T>(out["AvgSquaredGradOut"], want.eg, "adadelta AvgSquaredGradOut");
  expect<T>(out["AvgSquaredUpdateOut"], want.edx, "adadelta AvgSquaredUpdateOut");
}

TEST_CASE_TEMPLATE("lamb: two steps with the trust ratio", T, float, double) {
  for (double wd : {0.01, 0.0}) {
    const double lr = double(T(0.01)), b1 = fa(0.9), b2 = fa(0.999), eps = fa(1e-6);
    AdamState s{P, M, M2, double(T(b1)), double(T(b2))};
    Tensor p = vec<T>(P), m1 = vec<T>(M), m2 = vec<T>(M2), b1p = one<T>(b1), b2p = one<T>(b2);
    for (const V* g : {&G, &G2}) {
      auto out = OpTest("lamb").input("Param", p).input("Grad", vec<T>(*g)).input("LearningRate", one<T>(0.01)).input("Moment1", m1)
                     .input("Moment2", m2).input("Beta1Pow", b1p).input("Beta2Pow", b2p).attr("weight_decay", float(wd)).run();
      s = lamb_ref(s, *g, lr, b1, b2, eps, fa(wd));
      expect<T>(out["ParamOut"], s.p, "lamb ParamOut");
      expect<T>(out["Moment1Out"], s.m1, "lamb Moment1Out");
      expect<T>(out["Moment2Out"], s.m2, "lamb Moment2Out");
      expect<T>(out["Beta1PowOut"], {s.b1p}, "lamb Beta1PowOut");
      expect<T>(out["Beta2PowOut"], {s.b2p}, "lamb Beta2PowOut");
      p = out["ParamOut"], m1 = out["Moment1Out"], m2 = out["Moment2Out"], b1p = out["Beta1PowOut"], b2p = out["Beta2PowOut"];
    }
  }
}

TEST_CASE("lamb: a zero parameter has trust ratio 1") {
  V zero = {0, 0, 0};
  auto out = OpTest("lamb").input("Param", vec<double>(zero)).input("Grad", vec<double>(G)).input("LearningRate", one<double>(0.1))
                 .input("Moment1", vec<double>(M)).input("Moment2", vec<double>(M2)).input("Beta1Pow", one<double>(0.9)).input("Beta2Pow", one<double>(0.999)).run();
  auto want = lamb_ref({zero, M, M2, 0.9, 0.999}, G, 0.1, fa(0.9), fa(0.999), fa(1e-6), fa(0.01));
  expect<double>(out["ParamOut"], want.p, "lamb zero param");
}

// ---- sizes through the parallel path -------------------------------------------------------------------------

TEST_CASE_TEMPLATE("update ops: sizes 1 .. 100000 match the formulas", T, float, double) {
  for (int64_t n : {1, 3, 17, 64, 100000}) {
    CAPTURE(n);
    auto pt = random_tensor<T>({n}, -1, 1, 1), gt = random_tensor<T>({n}, -1, 1, 2), mt = random_tensor<T>({n}, 0, 1, 3), m2t = random_tensor<T>({n}, 0, 1, 4);
    V p = values(pt), g = values(gt), m = values(mt), m2 = values(m2t);
    const double lr = double(T(0.01));
    auto sgd = OpTest("sgd").input("Param", pt).input("Grad", gt).input("LearningRate", one<T>(0.01)).run();
    expect<T>(sgd["ParamOut"], sgd_ref(p, g, lr), "sgd");
    auto mom = OpTest("momentum").input("Param", pt).input("Grad", gt).input("Velocity", mt).input("LearningRate", one<T>(0.01)).attr("mu", 0.9f).run();
    expect<T>(mom["ParamOut"], momentum_ref(p, g, m, lr, fa(0.9), false).p, "momentum");
    auto ada = OpTest("adagrad").input("Param", pt).input("Grad", gt).input("Moment", mt).input("LearningRate", one<T>(0.01)).run();
    expect<T>(ada["ParamOut"], adagrad_ref(p, g, m, lr, fa(1e-6)).p, "adagrad");
    auto adam = OpTest("adam").input("Param", pt).input("Grad", gt).input("LearningRate", one<T>(0.01)).input("Moment1", mt).input("Moment2", m2t)
                    .input("Beta1Pow", one<T>(0.81)).input("Beta2Pow", one<T>(0.998)).run();
    expect<T>(adam["ParamOut"], adam_ref({p, m, m2, double(T(0.81)), double(T(0.998))}, g, lr, fa(0.9), fa(0.999), fa(1e-8)).p, "adam");
    auto ax = OpTest("adamax").input("Param", pt).input("Grad", gt).input("LearningRate", one<T>(0.01)).input("Moment", mt).input("InfNorm", m2t)
                  .input("Beta1Pow", one<T>(0.81)).run();
    expect<T>(ax["ParamOut"], adamax_ref({p, m, m2, double(T(0.81))}, g, lr, fa(0.9), fa(0.999), fa(1e-8)).p, "adamax");
    auto dl = OpTest("adadelta").input("Param", pt).input("Grad", gt).input("AvgSquaredGrad", mt).input("AvgSquaredUpdate", m2t).run();
    expect<T>(dl["ParamOut"], adadelta_ref({p, m, m2}, g, fa(0.95), fa(1e-6)).p, "adadelta");
    auto lb = OpTest("lamb").input("Param", pt).input("Grad", gt).input("LearningRate", one<T>(0.01)).input("Moment1", mt).input("Moment2", m2t)
                  .input("Beta1Pow", one<T>(0.81)).input("Beta2Pow", one<T>(0.998)).run();
    // the norms of a 100000-element f32 tensor carry rounding of the inputs: a looser bound there
    auto want = lamb_ref({p, m, m2, double(T(0.81)), double(T(0.998))}, g, lr, fa(0.9), fa(0.999), fa(1e-6), fa(0.01)).p;
    check_close(lb["ParamOut"], Tensor::from<double>(want, {n}), tol<T>() * 5, tol<T>() * 50, "lamb");
  }
}

TEST_CASE_TEMPLATE("update ops: 2-D parameters", T, float, double) {
  auto pt = random_tensor<T>({4, 5}, -1, 1, 1), gt = random_tensor<T>({4, 5}, -1, 1, 2), mt = random_tensor<T>({4, 5}, 0, 1, 3);
  auto out = OpTest("adagrad").input("Param", pt).input("Grad", gt).input("Moment", mt).input("LearningRate", one<T>(0.1)).run();
  CHECK(out["ParamOut"].shape() == Shape{4, 5});
  expect<T>(out["ParamOut"], adagrad_ref(values(pt), values(gt), values(mt), double(T(0.1)), fa(1e-6)).p, "adagrad 2-D");
}

// ---- in place: ParamOut is Param, MomentOut is Moment, ... ---------------------------------------------------

TEST_CASE_TEMPLATE("in place: every op updates its own variables, two runs of one prepared program", T, float, double) {
  const double lr = double(T(0.01));
  SUBCASE("sgd") {
    Scope s;
    run_in_scope(s, "sgd", {{"p", vec<T>(P)}, {"g", vec<T>(G)}, {"lr", one<T>(0.01)}}, {{"Param", "p"}, {"Grad", "g"}, {"LearningRate", "lr"}},
                 {{"ParamOut", "p"}}, {}, 2);
    expect<T>(s.tensor("p"), sgd_ref(sgd_ref(P, G, lr), G, lr), "sgd in place");
  }
  SUBCASE("momentum") {
    Scope s;
    run_in_scope(s, "momentum", {{"p", vec<T>(P)}, {"g", vec<T>(G)}, {"v", vec<T>(M)}, {"lr", one<T>(0.01)}},
                 {{"Param", "p"}, {"Grad", "g"}, {"Velocity", "v"}, {"LearningRate", "lr"}}, {{"ParamOut", "p"}, {"VelocityOut", "v"}},
                 {{"mu", 0.9f}, {"use_nesterov", true}}, 2);
    auto a = momentum_ref(P, G, M, lr, fa(0.9), true);
    auto b = momentum_ref(a.p, G, a.v, lr, fa(0.9), true);
    expect<T>(s.tensor("p"), b.p, "momentum in place p");
    expect<T>(s.tensor("v"), b.v, "momentum in place v");
  }
  SUBCASE("adagrad / decayed_adagrad") {
    for (std::string type : {"adagrad", "decayed_adagrad"}) {
      Scope s;
      run_in_scope(s, type, {{"p", vec<T>(P)}, {"g", vec<T>(G)}, {"m", vec<T>(M)}, {"lr", one<T>(0.01)}},
                   {{"Param", "p"}, {"Grad", "g"}, {"Moment", "m"}, {"LearningRate", "lr"}}, {{"ParamOut", "p"}, {"MomentOut", "m"}}, {}, 2);
      auto f = [&](const V& p, const V& m) { return type == "adagrad" ? adagrad_ref(p, G, m, lr, fa(1e-6)) : decayed_adagrad_ref(p, G, m, lr, fa(0.95), fa(1e-6)); };
      auto a = f(P, M);
      auto b = f(a.p, a.m);
      expect<T>(s.tensor("p"), b.p, type + " in place p");
      expect<T>(s.tensor("m"), b.m, type + " in place m");
    }
  }
  SUBCASE("adam / adamw / lamb with the pows advanced by the op") {
    for (std::string type : {"adam", "adamw", "lamb"}) {
      Scope s;
      run_in_scope(s, type,
                   {{"p", vec<T>(P)}, {"g", vec<T>(G)}, {"m1", vec<T>(M)}, {"m2", vec<T>(M2)}, {"b1", one<T>(fa(0.9))}, {"b2", one<T>(fa(0.999))}, {"lr", one<T>(0.01)}},
                   {{"Param", "p"}, {"Grad", "g"}, {"Moment1", "m1"}, {"Moment2", "m2"}, {"Beta1Pow", "b1"}, {"Beta2Pow", "b2"}, {"LearningRate", "lr"}},
                   {{"ParamOut", "p"}, {"Moment1Out", "m1"}, {"Moment2Out", "m2"}, {"Beta1PowOut", "b1"}, {"Beta2PowOut", "b2"}}, {}, 2);
      AdamState st{P, M, M2, double(T(fa(0.9))), double(T(fa(0.999)))};
      for (int i = 0; i < 2; ++i)
        st = type == "lamb" ? lamb_ref(st, G, lr, fa(0.9), fa(0.999), fa(1e-6), fa(0.01))
                            : adam_ref(st, G, lr, fa(0.9), fa(0.999), fa(1e-8), type == "adamw" ? fa(0.01) : 0.0);
      expect<T>(s.tensor("p"), st.p, type + " in place p");
      expect<T>(s.tensor("m1"), st.m1, type + " in place m1");
      expect<T>(s.tensor("m2"), st.m2, type + " in place m2");
      expect<T>(s.tensor("b1"), {st.b1p}, type + " in place beta1 pow");
      expect<T>(s.tensor("b2"), {st.b2p}, type + " in place beta2 pow");
    }
  }
  SUBCASE("adamax") {
    Scope s;
    run_in_scope(s, "adamax", {{"p", vec<T>(P)}, {"g", vec<T>(G)}, {"m", vec<T>(M)}, {"u", vec<T>(M2)}, {"b1", one<T>(fa(0.9))}, {"lr", one<T>(0.01)}},
                 {{"Param", "p"}, {"Grad", "g"}, {"Moment", "m"}, {"InfNorm", "u"}, {"Beta1Pow", "b1"}, {"LearningRate", "lr"}},
                 {{"ParamOut", "p"}, {"MomentOut", "m"}, {"InfNormOut", "u"}, {"Beta1PowOut", "b1"}}, {}, 2);
    AdamaxState st{P, M, M2, double(T(fa(0.9)))};
    for (int i = 0; i < 2; ++i) st = adamax_ref(st, G, lr, fa(0.9), fa(0.999), fa(1e-8));
    expect<T>(s.tensor("p"), st.p, "adamax in place p");
    expect<T>(s.tensor("m"), st.m, "adamax in place m");
    expect<T>(s.tensor("u"), st.u, "adamax in place u");
    expect<T>(s.tensor("b1"), {st.b1p}, "adamax in place pow");
  }
  SUBCASE("rmsprop centered") {
    Scope s;
    run_in_scope(s, "rmsprop", {{"p", vec<T>(P)}, {"g", vec<T>(G)}, {"ms", vec<T>(M)}, {"mg", vec<T>(G2)}, {"mom", vec<T>(M2)}, {"lr", one<T>(0.01)}},
                 {{"Param", "p"}, {"Grad", "g"}, {"MeanSquare", "ms"}, {"MeanGrad", "mg"}, {"Moment", "mom"}, {"LearningRate", "lr"}},
                 {{"ParamOut", "p"}, {"MeanSquareOut", "ms"}, {"MeanGradOut", "mg"}, {"MomentOut", "mom"}}, {{"centered", true}, {"momentum", 0.5f}}, 2);
    RmspropState st{P, M, G2, M2};
    for (int i = 0; i < 2; ++i) st = rmsprop_ref(st, G, lr, fa(0.9), fa(1e-6), fa(0.5), true);
    expect<T>(s.tensor("p"), st.p, "rmsprop in place p");
    expect<T>(s.tensor("ms"), st.ms, "rmsprop in place ms");
    expect<T>(s.tensor("mg"), st.mg, "rmsprop in place mg");
    expect<T>(s.tensor("mom"), st.mom, "rmsprop in place mom");
  }
  SUBCASE("adadelta") {
    Scope s;
    run_in_scope(s, "adadelta", {{"p", vec<T>(P)}, {"g", vec<T>(G)}, {"eg", vec<T>(M)}, {"edx", vec<T>(M2)}},
                 {{"Param", "p"}, {"Grad", "g"}, {"AvgSquaredGrad", "eg"}, {"AvgSquaredUpdate", "edx"}},
                 {{"ParamOut", "p"}, {"AvgSquaredGradOut", "eg"}, {"AvgSquaredUpdateOut", "edx"}}, {}, 2);
    AdadeltaState st{P, M, M2};
    for (int i = 0; i < 2; ++i) st = adadelta_ref(st, G, fa(0.95), fa(1e-6));
    expect<T>(s.tensor("p"), st.p, "adadelta in place p");
    expect<T>(s.tensor("eg"), st.eg, "adadelta in place eg");
    expect<T>(s.tensor("edx"), st.edx, "adadelta in place edx");
  }
}

TEST_CASE("in place: a parameter whose storage is shared elsewhere is updated through that storage") {
  // Fluid's ParamOut = Param writes the parameter's own buffer; a tensor sharing it sees the update.
  Scope s;
  run_in_scope(s, "sgd", {{"p", vec<double>(P)}, {"g", vec<double>(G)}, {"lr", one<double>(0.5)}}, {{"Param", "p"}, {"Grad", "g"}, {"LearningRate", "lr"}},
               {{"ParamOut", "p"}});
  Tensor alias = s.tensor("p");  // shares the storage
  Program prog;
  Block& b = prog.global_block();
  for (auto n : {"p", "g", "lr"}) b.create_var(n, {.dtype = f64, .shape = s.tensor(n).shape(), .persistable = true});
  add_op(b, Operator("sgd").set_input("Param", {"p"}).set_input("Grad", {"g"}).set_input("LearningRate", {"lr"}).set_output("ParamOut", {"p"}));
  Executor exe;
  exe.run(prog, s);
  V want = sgd_ref(sgd_ref(P, G, 0.5), G, 0.5);
  expect<double>(s.tensor("p"), want, "sgd second run");
  expect<double>(alias, want, "the shared view");
}

// ---- SelectedRows gradients ----------------------------------------------------------------------------------

namespace {
template <class T>
SelectedRows sparse_grad(std::vector<int64_t> rows, const V& value, int64_t width, int64_t height) {
  SelectedRows sr;
  sr.rows = std::move(rows);
  sr.height = height;
  sr.value = vec<T>(value, Shape{int64_t(sr.rows.size()), width});
  return sr;
}
}  // namespace

TEST_CASE_TEMPLATE("sgd: a SelectedRows Grad updates only its rows, repeated rows add up", T, float, double) {
  V p = {1, 2, 3, 4, 5, 6, 7, 8};  // [4, 2]
  V v = {0.5, -1, 2, 3, 0.25, 0.75};  // rows 1, 3, 1
  const double lr = double(T(0.1));
  V want = p;
  want[2] -= lr * (0.5 + 0.25), want[3] -= lr * (-1 + 0.75);
  want[6] -= lr * 2, want[7] -= lr * 3;
  for (bool in_place : {false, true}) {
    CAPTURE(in_place);
    Scope s;
    run_in_scope(s, "sgd", {{"p", vec<T>(p, {4, 2})}, {"g", sparse_grad<T>({1, 3, 1}, v, 2, 4)}, {"lr", one<T>(0.1)}},
                 {{"Param", "p"}, {"Grad", "g"}, {"LearningRate", "lr"}}, {{"ParamOut", in_place ? "p" : "p_out"}});
    const LoDTensor& out = s.tensor(in_place ? "p" : "p_out");
    CHECK(out.shape() == Shape{4, 2});
    expect<T>(out, want, "sgd sparse");
    if (!in_place) expect<T>(s.tensor("p"), p, "sgd sparse leaves Param");
  }
}

TEST_CASE_TEMPLATE("adam: SelectedRows Grad, lazy and not", T, float, double) {
  V p = {0.5, -1.2, 2.0, 0.3, -0.7, 1.1}, m1 = {0.1, 0.2, -0.1, 0.05, 0, 0.3}, m2 = {0.01, 0.02, 0.03, 0.04, 0.05, 0.06};  // [3, 2]
  V v = {0.1, -0.3, 0.7, 0.2, 0.05, -0.15};  // rows 2, 0, 2
  V dense = {0.7, 0.2, 0, 0, 0.1 + 0.05, -0.3 - 0.15};  // the merged gradient as a dense tensor
  const double lr = double(T(0.01)), b1 = fa(0.9), b2 = fa(0.999);
  for (std::string type : {"adam", "adamw"})
    for (bool lazy : {false, true}) {
      CAPTURE(type);
      CAPTURE(lazy);
      Scope s;
      run_in_scope(s, type,
                   {{"p", vec<T>(p, {3, 2})}, {"g", sparse_grad<T>({2, 0, 2}, v, 2, 3)}, {"m1", vec<T>(m1, {3, 2})}, {"m2", vec<T>(m2, {3, 2})},
                    {"b1", one<T>(b1)}, {"b2", one<T>(b2)}, {"lr", one<T>(0.01)}},
                   {{"Param", "p"}, {"Grad", "g"}, {"Moment1", "m1"}, {"Moment2", "m2"}, {"Beta1Pow", "b1"}, {"Beta2Pow", "b2"}, {"LearningRate", "lr"}},
                   {{"ParamOut", "p_out"}, {"Moment1Out", "m1_out"}, {"Moment2Out", "m2_out"}}, {{"lazy_mode", lazy}});
      AdamState want = adam_ref({p, m1, m2, double(T(b1)), double(T(b2))}, dense, lr, b1, b2, fa(1e-8), type == "adamw" ? fa(0.01) : 0.0);
      if (lazy)  // row 1 is not listed: it keeps its values
        for (int j : {2, 3}) want.p[size_t(j)] = p[size_t(j)], want.m1[size_t(j)] = m1[size_t(j)], want.m2[size_t(j)] = m2[size_t(j)];
      expect<T>(s.tensor("p_out"), want.p, type + " sparse ParamOut");
      expect<T>(s.tensor("m1_out"), want.m1, type + " sparse Moment1Out");
      expect<T>(s.tensor("m2_out"), want.m2, type + " sparse Moment2Out");
    }
}

// ---- edge cases ----------------------------------------------------------------------------------------------

TEST_CASE("update ops: an empty parameter and NaN/Inf gradients do not crash") {
  auto e = OpTest("adam").input("Param", Tensor(Shape{0, 3}, f32)).input("Grad", Tensor(Shape{0, 3}, f32)).input("LearningRate", one<float>(0.1))
               .input("Moment1", Tensor(Shape{0, 3}, f32)).input("Moment2", Tensor(Shape{0, 3}, f32)).input("Beta1Pow", one<float>(0.9))
               .input("Beta2Pow", one<float>(0.999)).run();
  CHECK(e["ParamOut"].shape() == Shape{0, 3});
  auto l = OpTest("lamb").input("Param", Tensor(Shape{0}, f64)).input("Grad", Tensor(Shape{0}, f64)).input("LearningRate", one<double>(0.1))
               .input("Moment1", Tensor(Shape{0}, f64)).input("Moment2", Tensor(Shape{0}, f64)).input("Beta1Pow", one<double>(0.9))
               .input("Beta2Pow", one<double>(0.999)).run();
  CHECK(l["ParamOut"].numel() == 0);
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  auto out = OpTest("sgd").input("Param", vec<double>(P)).input("Grad", vec<double>({nan, inf, 1})).input("LearningRate", one<double>(0.5)).run();
  CHECK(std::isnan(out["ParamOut"].get(0)));
  CHECK(std::isinf(out["ParamOut"].get(1)));
  CHECK(out["ParamOut"].get(2) == doctest::Approx(1.5));
  auto a = OpTest("adam").input("Param", vec<double>(P)).input("Grad", vec<double>({nan, inf, 1})).input("LearningRate", one<double>(0.1))
               .input("Moment1", vec<double>(M)).input("Moment2", vec<double>(M2)).input("Beta1Pow", one<double>(0.9)).input("Beta2Pow", one<double>(0.999)).run();
  CHECK(std::isnan(a["ParamOut"].get(0)));
  CHECK(std::isfinite(a["ParamOut"].get(2)));
}

TEST_CASE("update ops: no grad maker") {
  for (auto type : {"sgd", "momentum", "adagrad", "decayed_adagrad", "adam", "adamw", "adamax", "rmsprop", "adadelta", "lamb"}) {
    CAPTURE(type);
    CHECK_FALSE(bool(op_def(type).grad));
  }
}

// ---- errors --------------------------------------------------------------------------------------------------

TEST_CASE("update ops: Param/Grad shape mismatch is an oar::Error naming the op and shapes") {
  auto msg = error_of([] { OpTest("sgd").input("Param", vec<float>(P)).input("Grad", vec<float>({1, 2, 3, 4})).input("LearningRate", one<float>(0.1)).build(); });
  test::check_contains(msg, {"sgd", "[3]", "[4]"});
  msg = error_of([] {
    OpTest("adam").input("Param", vec<float>(P)).input("Grad", vec<float>(G)).input("LearningRate", one<float>(0.1)).input("Moment1", vec<float>({1, 2}))
        .input("Moment2", vec<float>(M)).input("Beta1Pow", one<float>(0.9)).input("Beta2Pow", one<float>(0.999)).build();
  });
  CHECK(msg.find("adam") != std::string::npos);
  CHECK(msg.find("Moment1") != std::string::npos);
  // a shape only known at run time: the kernel checks it
  msg = error_of([] {
    OpTest("momentum").input("Param", random_tensor<float>({4, 3})).input("Grad", random_tensor<float>({2, 3})).input("Velocity", random_tensor<float>({4, 3}))
        .input("LearningRate", one<float>(0.1)).attr("mu", 0.9f).unknown_batch().run();
  });
  test::check_contains(msg, {"momentum", "[2, 3]", "[4, 3]"});
}

TEST_CASE("update ops: LearningRate must hold one value") {
  auto msg = error_of([] { OpTest("sgd").input("Param", vec<float>(P)).input("Grad", vec<float>(G)).input("LearningRate", vec<float>({0.1, 0.2})).build(); });
  CHECK(msg.find("sgd") != std::string::npos);
  CHECK(msg.find("LearningRate") != std::string::npos);
  msg = error_of([] {
    OpTest("adagrad").input("Param", vec<double>(P)).input("Grad", vec<double>(G)).input("Moment", vec<double>(M)).input("LearningRate", vec<double>({0.1, 0.2, 0.3}))
        .build();
  });
  CHECK(msg.find("adagrad") != std::string::npos);
  CHECK(msg.find("LearningRate") != std::string::npos);
  // unknown at build time: the kernel checks it
  msg = error_of([] {
    OpTest("sgd").input("Param", random_tensor<float>({2, 3})).input("Grad", random_tensor<float>({2, 3})).input("LearningRate", vec<float>({0.1, 0.2}))
        .unknown_batch().run();
  });
  CHECK(msg.find("sgd") != std::string::npos);
  CHECK(msg.find("LearningRate") != std::string::npos);
}

TEST_CASE("update ops: other errors") {
  // a required attribute
  auto msg = error_of([] { OpTest("momentum").input("Param", vec<float>(P)).input("Grad", vec<float>(G)).input("Velocity", vec<float>(M)).input("LearningRate", one<float>(0.1)).build(); });
  CHECK(msg.find("mu") != std::string::npos);
  // bad attributes
  msg = error_of([] {
    OpTest("adam").input("Param", vec<float>(P)).input("Grad", vec<float>(G)).input("LearningRate", one<float>(0.1)).input("Moment1", vec<float>(M))
        .input("Moment2", vec<float>(M)).input("Beta1Pow", one<float>(0.9)).input("Beta2Pow", one<float>(0.999)).attr("beta1", 1.5f).build();
  });
  CHECK(msg.find("beta1") != std::string::npos);
  // dtype mismatch
  msg = error_of([] { OpTest("sgd").input("Param", vec<float>(P)).input("Grad", vec<double>(G)).input("LearningRate", one<float>(0.1)).build(); });
  CHECK(msg.find("sgd") != std::string::npos);
  // centered rmsprop without MeanGrad
  msg = error_of([] {
    Scope s;
    run_in_scope(s, "rmsprop", {{"p", vec<float>(P)}, {"g", vec<float>(G)}, {"ms", vec<float>(M)}, {"mom", vec<float>(M)}, {"lr", one<float>(0.1)}},
                 {{"Param", "p"}, {"Grad", "g"}, {"MeanSquare", "ms"}, {"Moment", "mom"}, {"LearningRate", "lr"}},
                 {{"ParamOut", "p"}, {"MeanSquareOut", "ms"}, {"MomentOut", "mom"}}, {{"centered", true}});
  });
  CHECK(msg.find("rmsprop") != std::string::npos);
  CHECK(msg.find("MeanGrad") != std::string::npos);
  // a SelectedRows Grad where only dense ones are taken, and rows out of range
  msg = error_of([] {
    Scope s;
    run_in_scope(s, "momentum", {{"p", vec<float>(P, {3, 1})}, {"g", sparse_grad<float>({0}, {1}, 1, 3)}, {"v", vec<float>(M, {3, 1})}, {"lr", one<float>(0.1)}},
                 {{"Param", "p"}, {"Grad", "g"}, {"Velocity", "v"}, {"LearningRate", "lr"}}, {{"ParamOut", "p"}, {"VelocityOut", "v"}}, {{"mu", 0.9f}});
  });
  CHECK(msg.find("momentum") != std::string::npos);
  CHECK(msg.find("SelectedRows") != std::string::npos);
  msg = error_of([] {
    Scope s;
    run_in_scope(s, "sgd", {{"p", vec<float>(P, {3, 1})}, {"g", sparse_grad<float>({5}, {1}, 1, 3)}, {"lr", one<float>(0.1)}},
                 {{"Param", "p"}, {"Grad", "g"}, {"LearningRate", "lr"}}, {{"ParamOut", "p"}});
  });
  CHECK(msg.find("sgd") != std::string::npos);
  CHECK(msg.find("row 5") != std::string::npos);
}

// ---- SkipUpdate: the step turned off by a device flag (mixed precision's overflow) ---------------------------

namespace {
/// An update op with random inputs of shape {7}: its slots and values (each state slot's output is `<slot>Out`).
struct SkipCase {
  std::string type;
  std::vector<std::pair<std::string, Tensor>> ins;
  std::map<std::string, Attribute> attrs;
  /// The op, with SkipUpdate = `skip` unless it is -1.
  OpTest op(int skip = -1) const {
    OpTest t(type);
    for (auto& [slot, v] : ins) t.input(slot, v);
    for (auto& [k, v] : attrs) t.attr(k, v);
    if (skip >= 0) t.input("SkipUpdate", Tensor::from<bool>({skip == 1}, {1}));
    return t;
  }
};

template <class T>
std::vector<SkipCase> skip_cases(uint64_t seed) {
  auto r = [&](double lo, double hi) { return random_tensor<T>({7}, lo, hi, seed++); };
  const Tensor lr = one<T>(0.05);
  std::vector<SkipCase> cases;
  cases.push_back({"sgd", {{"Param", r(-1, 1)}, {"Grad", r(-1, 1)}, {"LearningRate", lr}}, {}});
  cases.push_back({"momentum", {{"Param", r(-1, 1)}, {"Grad", r(-1, 1)}, {"Velocity", r(-1, 1)}, {"LearningRate", lr}}, {{"mu", Attribute(0.9f)}}});
  cases.push_back({"adagrad", {{"Param", r(-1, 1)}, {"Grad", r(-1, 1)}, {"Moment", r(0, 1)}, {"LearningRate", lr}}, {}});
  cases.push_back({"decayed_adagrad", {{"Param", r(-1, 1)}, {"Grad", r(-1, 1)}, {"Moment", r(0, 1)}, {"LearningRate", lr}}, {}});
  for (const char* type : {"adam", "adamw", "lamb"})
    cases.push_back({type,
                     {{"Param", r(-1, 1)}, {"Grad", r(-1, 1)}, {"LearningRate", lr}, {"Moment1", r(-1, 1)}, {"Moment2", r(0, 1)}, {"Beta1Pow", one<T>(0.81)},
                      {"Beta2Pow", one<T>(0.998)}},
                     {}});
  cases.push_back(
      {"adamax", {{"Param", r(-1, 1)}, {"Grad", r(-1, 1)}, {"LearningRate", lr}, {"Moment", r(-1, 1)}, {"InfNorm", r(0, 1)}, {"Beta1Pow", one<T>(0.81)}}, {}});
  cases.push_back({"rmsprop",
                   {{"Param", r(-1, 1)}, {"Grad", r(-1, 1)}, {"LearningRate", lr}, {"MeanSquare", r(0.5, 1)}, {"Moment", r(-1, 1)}, {"MeanGrad", r(-0.1, 0.1)}},
                   {{"centered", Attribute(true)}, {"momentum", Attribute(0.9f)}}});
  cases.push_back({"adadelta", {{"Param", r(-1, 1)}, {"Grad", r(-1, 1)}, {"AvgSquaredGrad", r(0, 1)}, {"AvgSquaredUpdate", r(0, 1)}}, {}});
  return cases;
}
}  // namespace

TEST_CASE_TEMPLATE("SkipUpdate: true gives every output its input's value (powers too); false is the plain step, bit for bit", T, float, double) {
  for (const SkipCase& k : skip_cases<T>(70)) {
    CAPTURE(k.type);
    const auto want = k.op().run();
    const auto skipped = k.op(1).run();
    const auto stepped = k.op(0).run();
    for (auto& [slot, in] : k.ins) {
      if (slot == "Grad" || slot == "LearningRate") continue;
      CAPTURE(slot);
      const LoDTensor& kept = skipped.at(slot + "Out");
      REQUIRE(kept.numel() == in.numel());
      for (int64_t i = 0; i < in.numel(); ++i) CHECK(kept.get(i) == in.get(i));
      const LoDTensor& a = stepped.at(slot + "Out");
      const LoDTensor& b = want.at(slot + "Out");
      REQUIRE(a.numel() == b.numel());
      for (int64_t i = 0; i < b.numel(); ++i) CHECK(a.get(i) == b.get(i));
      if (slot == "Param") CHECK(b.get(0) != in.get(0));  // the plain step moved the parameter
    }
  }
}

TEST_CASE("SkipUpdate: a plain rmsprop's MeanGrad, wired but unread, is left alone whether the step runs or is skipped") {
  for (bool skip : {false, true}) {
    CAPTURE(skip);
    Scope scope;
    std::map<std::string, ScopeVal> vals{{"p", vec<double>(P)}, {"g", vec<double>(G)},   {"ms", vec<double>(M)}, {"mom", vec<double>(M2)},
                                         {"mg", vec<double>(G2)}, {"lr", one<double>(0.01)}, {"skip", Tensor::from<bool>({skip}, {1})}};
    run_in_scope(scope, "rmsprop", vals,
                 {{"Param", "p"}, {"Grad", "g"}, {"MeanSquare", "ms"}, {"Moment", "mom"}, {"MeanGrad", "mg"}, {"LearningRate", "lr"}, {"SkipUpdate", "skip"}},
                 {{"ParamOut", "p_out"}, {"MeanSquareOut", "ms_out"}, {"MomentOut", "mom_out"}, {"MeanGradOut", "mg_out"}}, {{"centered", false}});
    const Value* mg = scope.find("mg_out");
    CHECK((!mg || !mg->tensor_if() || !mg->tensor_if()->initialized()));
    REQUIRE(scope.tensor("p_out").numel() == 3);
    CHECK((scope.tensor("p_out").get(0) == P[0]) == skip);  // the step itself did run, or did not
  }
}

TEST_CASE("SkipUpdate: sparse sgd and adam (lazy or not) leave every output as its input; a flag of the wrong kind is an error naming it") {
  const V p = {1, 2, 3, 4, 5, 6}, m1 = {0.1, 0.2, 0.3, 0.4, 0.5, 0.6}, m2 = {0.5, 0.4, 0.3, 0.2, 0.1, 0.05}, v = {1, -1, 2, -2};
  for (const std::string type : {"sgd", "adam", "adam lazy"}) {
    CAPTURE(type);
    Scope s;
    std::map<std::string, ScopeVal> vals{{"p", vec<float>(p, {3, 2})}, {"g", sparse_grad<float>({2, 0}, v, 2, 3)}, {"lr", one<float>(0.1)},
                                         {"skip", Tensor::from<bool>({true}, {1})}};
    std::vector<std::pair<std::string, std::string>> ins{{"Param", "p"}, {"Grad", "g"}, {"LearningRate", "lr"}, {"SkipUpdate", "skip"}};
    std::vector<std::pair<std::string, std::string>> outs{{"ParamOut", "p_out"}};
    std::map<std::string, Attribute> attrs;
    if (type != "sgd") {
      vals.insert({{"m1", vec<float>(m1, {3, 2})}, {"m2", vec<float>(m2, {3, 2})}, {"b1p", one<float>(0.81)}, {"b2p", one<float>(0.998)}});
      ins.insert(ins.end(), {{"Moment1", "m1"}, {"Moment2", "m2"}, {"Beta1Pow", "b1p"}, {"Beta2Pow", "b2p"}});
      outs.insert(outs.end(), {{"Moment1Out", "m1_out"}, {"Moment2Out", "m2_out"}, {"Beta1PowOut", "b1p_out"}, {"Beta2PowOut", "b2p_out"}});
      attrs["lazy_mode"] = Attribute(type == "adam lazy");
    }
    run_in_scope(s, type == "sgd" ? "sgd" : "adam", vals, ins, outs, attrs);
    expect<float>(s.tensor("p_out"), p, "ParamOut");
    if (type != "sgd") {
      expect<float>(s.tensor("m1_out"), m1, "Moment1Out");
      expect<float>(s.tensor("m2_out"), m2, "Moment2Out");
      expect<float>(s.tensor("b1p_out"), {fa(0.81)}, "Beta1PowOut");
      expect<float>(s.tensor("b2p_out"), {fa(0.998)}, "Beta2PowOut");
    }
  }
  // a float flag: refused where the program is built (shape inference) with the slot's name
  CHECK_THROWS_WITH_AS(OpTest("sgd").input("Param", vec<float>(P)).input("Grad", vec<float>(G)).input("LearningRate", one<float>(0.1))
                           .input("SkipUpdate", one<float>(1)).run(),
                       doctest::Contains("SkipUpdate must be bool"), Error);
}
