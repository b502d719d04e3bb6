// tests/cuda/optim.cpp: the update ops with CUDA kernels beyond sgd, momentum and adam (adagrad, decayed_adagrad,
// adamax, rmsprop, adadelta, lamb) and the sparse gradients (lookup_table_grad with is_sparse; sgd, adam and
// adamw with a SelectedRows Grad) against the CPU kernels: one step out of place through the op harness, then
// several steps in place as an optimizer's program runs them, a fresh random Grad each step.
#include <doctest/doctest.h>

#include <algorithm>
#include <functional>
#include <variant>

#include <oar/ops/optimizers.hpp>

#include "cuda/compare.hpp"

using namespace oar;
using namespace oar::test;
using namespace oar::test::cuda_check;

namespace {

/// A variable of an update op's program: the slot it is read from, the slot it is written back through (none
/// for LearningRate), its first value.
struct Slotted {
  std::string in, out;
  Tensor value;
};
/// A step's gradient: dense, or SelectedRows.
using Grad = std::variant<Tensor, SelectedRows>;

/// The op `type` run `steps` times on `place`, each variable of `state` updated in place (ParamOut is Param,
/// MomentOut is Moment, ...), Grad = grad(step); the variables after the last step, on the host.
std::map<std::string, Tensor> run_steps(Place place, const std::string& type, const std::vector<Slotted>& state, const std::function<Grad(int)>& grad,
                                        int steps, const std::map<std::string, Attribute>& attrs) {
  Program prog;
  Block& b = prog.global_block();
  Scope scope;
  Operator op(type);
  for (const Slotted& s : state) {
    b.create_var(s.in, {.dtype = s.value.dtype(), .shape = s.value.shape(), .persistable = true});
    scope.var(s.in).tensor() = LoDTensor(s.value.to(place, true));
    op.set_input(s.in, {s.in});
    if (!s.out.empty()) op.set_output(s.out, {s.in});
  }
  auto set_grad = [&](const Grad& g) {
    if (auto* t = std::get_if<Tensor>(&g)) scope.var("Grad").tensor() = LoDTensor(t->to(place, true));
    else {
      const auto& sr = std::get<SelectedRows>(g);
      scope.var("Grad").selected_rows() = SelectedRows{sr.rows, sr.height, sr.value.to(place, true)};
    }
  };
  const Grad g0 = grad(0);
  if (auto* t = std::get_if<Tensor>(&g0)) {
    b.create_var("Grad", {.dtype = t->dtype(), .shape = t->shape(), .persistable = true});
  } else {
    const auto& sr = std::get<SelectedRows>(g0);
    Shape s = sr.value.shape();
    s[0] = sr.height;
    b.create_var("Grad", {.dtype = sr.value.dtype(), .shape = s, .persistable = true, .kind = VarKind::selected_rows});
  }
  set_grad(g0);
  op.set_input("Grad", {"Grad"});
  for (auto& [k, v] : attrs) op.set_attr(k, v);
  add_op(b, op);
  Executor exe(place);
  auto prepared = exe.prepare(prog, scope);
  for (int step = 0; step < steps; ++step) {
    if (step > 0) set_grad(grad(step));
    exe.run(*prepared, scope, {}, {});
  }
  std::map<std::string, Tensor> out;
  for (const Slotted& s : state) out[s.in] = scope.find(s.in)->tensor().to(cpu());
  return out;
}

/// run_steps on the CPU and on cuda:0, every variable compared (|cuda - cpu| <= atol + rtol |cpu|).
void compare_steps(const std::string& what, const std::string& type, const std::vector<Slotted>& state, const std::function<Grad(int)>& grad, int steps,
                   const std::map<std::string, Attribute>& attrs, double atol, double rtol) {
  CAPTURE(what);
  const auto want = run_steps(cpu(), type, state, grad, steps, attrs);
  for (const Slotted& s : state)  // the case is well formed: the CPU moved the parameter
    if (s.in == "Param") CHECK_MESSAGE(want.at(s.in).get(0) != s.value.get(0), what << ": Param did not change");
  if (std::ranges::any_of(state, [](const Slotted& s) { return s.value.dtype() == f32; })) {  // the same steps in f64
    std::vector<Slotted> wide = state;
    for (Slotted& s : wide)
      if (s.value.dtype() == f32) s.value = to_f64(s.value);
    auto wide_grad = [&](int step) -> Grad {
      Grad g = grad(step);
      if (auto* t = std::get_if<Tensor>(&g)) return to_f64(*t);
      SelectedRows sr = std::get<SelectedRows>(g);
      sr.value = to_f64(sr.value);
      return sr;
    };
    check_f32_margin(want, run_steps(cpu(), type, wide, wide_grad, steps, attrs), what, atol, rtol);
  }
  if (!have_device()) {
    ++g_skipped;
    return;
  }
  const auto got = run_steps(cuda(0), type, state, grad, steps, attrs);
  for (auto& [n, t] : want) check_close(LoDTensor(got.at(n)), LoDTensor(t), atol, rtol, what + " " + n);
}

template <class T>
Tensor one(double v) {
  return Tensor::from<T>({T(v)}, {1});
}

/// A SelectedRows of `rows` (repeats allowed) of Param [height, width], random values.
template <class T>
SelectedRows sparse(std::vector<int64_t> rows, int64_t height, int64_t width, uint64_t seed) {
  SelectedRows sr;
  sr.height = height;
  sr.value = random_tensor<T>({int64_t(rows.size()), width}, -1, 1, seed);
  sr.rows = std::move(rows);
  return sr;
}

/// Each dense case's op, variables and attributes (T: the dtype).
struct DenseCase {
  std::string what, type;
  std::vector<Slotted> state;
  std::map<std::string, Attribute> attrs;
};

template <class T>
std::vector<DenseCase> dense_cases(const Shape& s) {
  auto r = [&](double lo, double hi, uint64_t seed) { return random_tensor<T>(s, lo, hi, seed); };
  const Tensor p = r(-1, 1, 901), lr = one<T>(0.05);
  const Slotted param{"Param", "ParamOut", p}, rate{"LearningRate", "", lr};
  std::vector<DenseCase> cases;
  cases.push_back({"adagrad", "adagrad", {param, rate, {"Moment", "MomentOut", r(0, 1, 902)}}, {{"epsilon", Attribute(1e-6f)}}});
  cases.push_back({"decayed_adagrad", "decayed_adagrad", {param, rate, {"Moment", "MomentOut", r(0, 1, 903)}},
                   {{"decay", Attribute(0.95f)}, {"epsilon", Attribute(1e-6f)}}});
  cases.push_back({"adamax", "adamax",
                   {param, rate, {"Moment", "MomentOut", r(-1, 1, 904)}, {"InfNorm", "InfNormOut", r(0, 1, 905)},
                    {"Beta1Pow", "Beta1PowOut", one<T>(0.9 * 0.9)}},
                   {{"beta1", Attribute(0.9f)}, {"beta2", Attribute(0.999f)}, {"epsilon", Attribute(1e-8f)}}});
  for (bool centered : {false, true})
    for (float momentum : {0.0f, 0.9f}) {
      // MeanSquare above MeanGrad^2, so that ms - mg^2 + eps stays away from 0 (rho of it survives each step).
      std::vector<Slotted> st{param, rate, {"MeanSquare", "MeanSquareOut", r(0.5, 1, 906)}, {"Moment", "MomentOut", r(-0.1, 0.1, 907)}};
      if (centered) st.push_back({"MeanGrad", "MeanGradOut", r(-0.3, 0.3, 908)});
      cases.push_back({std::string("rmsprop") + (centered ? " centered" : "") + " momentum " + std::to_string(momentum), "rmsprop", st,
                       {{"epsilon", Attribute(1e-6f)}, {"decay", Attribute(0.9f)}, {"momentum", Attribute(momentum)}, {"centered", Attribute(centered)}}});
    }
  cases.push_back({"adadelta", "adadelta",
                   {param, {"AvgSquaredGrad", "AvgSquaredGradOut", r(0, 1, 909)}, {"AvgSquaredUpdate", "AvgSquaredUpdateOut", r(0, 1, 910)}},
                   {{"rho", Attribute(0.95f)}, {"epsilon", Attribute(1e-6f)}}});
  cases.push_back({"lamb", "lamb",
                   {param, rate, {"Moment1", "Moment1Out", r(-1, 1, 911)}, {"Moment2", "Moment2Out", r(0, 1, 912)},
                    {"Beta1Pow", "Beta1PowOut", one<T>(0.9 * 0.9)}, {"Beta2Pow", "Beta2PowOut", one<T>(0.999 * 0.999)}},
                   {{"weight_decay", Attribute(0.01f)}, {"beta1", Attribute(0.9f)}, {"beta2", Attribute(0.999f)}, {"epsilon", Attribute(1e-6f)}}});
  return cases;
}

/// The case as one op-harness step, out of place (ParamOut and the accumulators' outputs are other variables).
OpTest one_step(const DenseCase& k, const Tensor& g) {
  OpTest t(k.type);
  for (const Slotted& s : k.state) t.input(s.in, s.value);
  t.input("Grad", g);
  for (auto& [n, v] : k.attrs) t.attr(n, v);
  return t;
}

/// A program of update ops over persistable variables, each with a first value; run(place, steps) runs it on a
/// fresh scope there (`setup` adds what else the scope needs) and returns the variables afterwards, on the host.
struct UpdateProgram {
  Program prog;
  std::vector<std::pair<std::string, Tensor>> init;
  Block& block() { return prog.global_block(); }
  void var(const std::string& n, Tensor t) {
    block().create_var(n, {.dtype = t.dtype(), .shape = t.shape(), .persistable = true});
    init.emplace_back(n, std::move(t));
  }
  const Tensor& first(const std::string& n) const {
    return std::find_if(init.begin(), init.end(), [&](auto& e) { return e.first == n; })->second;
  }
  std::map<std::string, Tensor> run(Place place, int steps, const std::function<void(Scope&, Place)>& setup = {}) const {
    Scope scope;
    for (auto& [n, t] : init) scope.var(n).tensor() = LoDTensor(t.to(place, true));
    if (setup) setup(scope, place);
    Executor exe(place);
    auto prepared = exe.prepare(prog, scope);
    for (int step = 0; step < steps; ++step) exe.run(*prepared, scope, {}, {});
    std::map<std::string, Tensor> out;
    for (auto& [n, t] : init) out[n] = scope.find(n)->tensor().to(cpu());
    return out;
  }
};

}  // namespace

// Tolerances: f32 2e-4 and f64 1e-11 (10 x tol<T>()), absolute plus relative: each step's division by a root
// of an accumulator, and the device's own rounding of sqrt and of contracted multiply-adds, compound over the
// steps; lamb's norms are summed in another order (both in double).
TEST_CASE_TEMPLATE("cuda: adagrad, decayed_adagrad, adamax, rmsprop, adadelta and lamb updates match the CPU", T, float, double) {
  const Shape s{37, 29};
  const double t = 10 * tol<T>();
  for (const DenseCase& k : dense_cases<T>(s)) {
    // One step through the harness (rmsprop only centered: the harness asks for MeanGradOut, which a plain
    // rmsprop leaves unwritten).
    const bool harness = k.type != "rmsprop" || std::get<bool>(k.attrs.at("centered"));
    if (harness) {
      compare_on_cuda(one_step(k, random_tensor<T>(s, -1, 1, 920)), k.what + " (one step)", t, t);
      // SkipUpdate true, out of place: every output must be its input, bit for bit, powers included.
      compare_on_cuda(one_step(k, random_tensor<T>(s, -1, 1, 921)).input("SkipUpdate", Tensor::from<bool>({true}, {1})), k.what + " (skipped)", 0, 0);
    }
    compare_steps(k.what + " (4 steps in place)", k.type, k.state, [&](int step) -> Grad { return random_tensor<T>(s, -1, 1, 930 + uint64_t(step)); }, 4,
                  k.attrs, t, t);
  }
}

TEST_CASE("cuda: lamb's norms over more chunks than one launch has blocks (a block taking several chunks) match the CPU") {
  const Shape s{4100, 4096};  // 4100 chunks of 4096 elements > a launch's 4096 blocks
  for (const DenseCase& k : dense_cases<float>(s))
    if (k.type == "lamb") compare_on_cuda(one_step(k, random_tensor<float>(s, -1, 1, 940)), "lamb " + s.str(), 2e-4, 2e-4);
}

TEST_CASE("cuda: an empty parameter is a no-op update (powers still advanced) as on the CPU") {
  for (const DenseCase& k : dense_cases<double>(Shape{0, 3})) {
    if (k.type == "rmsprop" && !std::get<bool>(k.attrs.at("centered"))) continue;
    compare_on_cuda(one_step(k, Tensor(Shape{0, 3}, f64)), k.what + " empty", 0, 0);
  }
}

TEST_CASE("cuda: update ops that write what an earlier one of their run reads are not grouped with it; the result is the CPU's") {
  // sgd twice on one Param (in place), then adam on two Params sharing Beta1Pow and Beta2Pow (each op advances
  // them): one after the other, as the CPU runs them, not read all at once as a group's members are.
  UpdateProgram up;
  Block& b = up.block();
  auto var = [&](const std::string& n, Tensor t) { up.var(n, std::move(t)); };
  const Shape s{9, 7};
  var("lr", one<double>(0.05));
  var("p", random_tensor<double>(s, -1, 1, 990));
  var("b1p", one<double>(0.9));
  var("b2p", one<double>(0.999));
  for (int k = 0; k < 4; ++k) var("g" + std::to_string(k), random_tensor<double>(s, -1, 1, 991 + uint64_t(k)));
  for (int k = 0; k < 2; ++k) {
    Operator op{"sgd"};
    op.set_input(ops::Sgd::param, {"p"}).set_input(ops::Sgd::grad, {"g" + std::to_string(k)}).set_input(ops::Sgd::learning_rate, {"lr"});
    op.set_output(ops::Sgd::param_out, {"p"});
    add_op(b, std::move(op));
  }
  for (int k = 0; k < 2; ++k) {
    using A = ops::Adam;
    const std::string i = std::to_string(k);
    var("q" + i, random_tensor<double>(s, -1, 1, 995 + uint64_t(k)));
    var("m" + i, random_tensor<double>(s, -1, 1, 997 + uint64_t(k)));
    var("u" + i, random_tensor<double>(s, 0, 1, 999 + uint64_t(k)));
    Operator op{"adam"};
    op.set_input(A::param, {"q" + i}).set_input(A::grad, {"g" + std::to_string(k + 2)}).set_input(A::learning_rate, {"lr"});
    op.set_input(A::moment1, {"m" + i}).set_input(A::moment2, {"u" + i}).set_input(A::beta1_pow, {"b1p"}).set_input(A::beta2_pow, {"b2p"});
    op.set_output(A::param_out, {"q" + i}).set_output(A::moment1_out, {"m" + i}).set_output(A::moment2_out, {"u" + i});
    op.set_output(A::beta1_pow_out, {"b1p"}).set_output(A::beta2_pow_out, {"b2p"});
    add_op(b, std::move(op));
  }
  const auto want = up.run(cpu(), 1);
  // The CPU itself: both sgd steps landed, and the powers advanced once per adam op.
  const auto at = [](const std::map<std::string, Tensor>& m, const std::string& n) { return m.at(n).data<double>(); };
  const auto first = [&](const std::string& n) { return up.first(n).data<double>(); };
  for (int64_t e = 0; e < s.numel(); ++e) CHECK(at(want, "p")[e] == doctest::Approx(first("p")[e] - 0.05 * (first("g0")[e] + first("g1")[e])).epsilon(1e-14));
  CHECK(at(want, "b1p")[0] == doctest::Approx(0.9 * double(0.9f) * double(0.9f)).epsilon(1e-15));  // beta1 is a float attribute
  CHECK(at(want, "b2p")[0] == doctest::Approx(0.999 * double(0.999f) * double(0.999f)).epsilon(1e-15));
  if (!have_device()) {
    ++g_skipped;
    return;
  }
  const auto got = up.run(cuda(0), 1);
  for (auto& [n, t] : want) check_close(LoDTensor(got.at(n)), LoDTensor(t), 1e-12, 1e-12, n);
}

// ---- SelectedRows gradients

TEST_CASE_TEMPLATE("cuda: lookup_table_grad with is_sparse gives the CPU's SelectedRows (rows in order, repeats kept, padding left out)", T, float,
                   double) {
  const int64_t v = 20, d = 7;
  const Tensor w = random_tensor<T>({v, d}, -1, 1, 951);
  const Tensor ids = Tensor::from<int64_t>({3, 0, 19, 3, 5, 3, 12, 5, 0}, {9, 1});
  const Tensor dout = random_tensor<T>({9, d}, -1, 1, 952);
  for (int64_t pad : {int64_t(-1), int64_t(5), int64_t(-20)}) {  // -20: V - 20 = row 0
    CAPTURE(pad);
    auto run = [&](Place place) {
      OpTest g("lookup_table_grad");
      g.input("W", w).input("Ids", ids).input("Out@GRAD", dout).attr("is_sparse", true).attr("padding_idx", pad);
      Program p = g.build();
      Scope scope;
      Executor exe(place);
      auto prep = exe.prepare(p, scope);
      exe.run(*prep, scope, {{"W_0", w}, {"Ids_0", ids}, {"Out@GRAD_0", dout}}, {});
      const Value* gv = prep->local_scope()->find("W@GRAD_0");
      REQUIRE(gv != nullptr);
      REQUIRE(gv->is_selected_rows());
      SelectedRows sr = const_cast<Value*>(gv)->selected_rows();
      CHECK(sr.value.place() == place);
      sr.value = sr.value.to(cpu());
      return sr;
    };
    const SelectedRows want = run(cpu());
    CHECK(want.rows.size() == (pad == -1 ? 9u : 7u));
    if (!have_device()) {
      ++g_skipped;
      continue;
    }
    const SelectedRows got = run(cuda(0));
    CHECK(got.rows == want.rows);
    CHECK(got.height == want.height);
    check_close(got.value, want.value, 0, 0, "lookup_table_grad sparse value");  // copies of Out@GRAD rows: exact
  }
}

TEST_CASE("cuda: lookup_table_grad with is_sparse checks the ids on the host, as the CPU does") {
  if (!have_device()) {
    ++g_skipped;
    return;
  }
  OpTest g("lookup_table_grad");
  g.input("W", random_tensor<float>({5, 3})).input("Ids", Tensor::from<int64_t>({1, 2, 9}, {3, 1})).input("Out@GRAD", random_tensor<float>({3, 3}));
  g.attr("is_sparse", true).skip_inferred_check();
  const std::string m = error_of([&] { g.run(cuda(0)); });
  CHECK(m.find("lookup_table_grad") != std::string::npos);
  CHECK(m.find("Ids[2] = 9 is out of range [0, 5)") != std::string::npos);
}

// Sparse rows are summed in the CPU's order (sgd: subtracted one by one in the order listed; adam: merged from 0
// in that order), so only the update's own rounding differs: the dense cases' tolerances.
TEST_CASE_TEMPLATE("cuda: sgd, adam and adamw with a SelectedRows Grad (repeated rows, lazy_mode or not) match the CPU", T, float, double) {
  const int64_t height = 30, width = 11;
  const Shape s{height, width};
  const double t = 10 * tol<T>();
  // Rows of each step: repeats, an unlisted majority, a row listed once; the last step lists none.
  const std::vector<std::vector<int64_t>> steps = {{4, 17, 4, 29, 0, 4}, {17, 17, 2}, {29}, {}};
  auto grad = [&](int step) -> Grad { return sparse<T>(steps[size_t(step)], height, width, 960 + uint64_t(step)); };
  const Tensor p = random_tensor<T>(s, -1, 1, 961), lr = one<T>(0.05);
  {
    OpTest first("sgd");
    first.input("Param", p).input("LearningRate", lr).selected_rows_input("Grad", sparse<T>(steps[0], height, width, 960));
    compare_on_cuda(first, "sgd sparse (one step)", t, t);
    OpTest skipped = first;  // SkipUpdate true: every output is its input, out of place
    compare_on_cuda(skipped.input("SkipUpdate", Tensor::from<bool>({true}, {1})), "sgd sparse skipped", 0, 0);
    compare_steps("sgd sparse (4 steps in place)", "sgd", {{"Param", "ParamOut", p}, {"LearningRate", "", lr}}, grad, 4, {}, t, t);
  }
  const Tensor m1 = random_tensor<T>(s, -1, 1, 962), m2 = random_tensor<T>(s, 0, 1, 963);
  for (const char* type : {"adam", "adamw"})
    for (bool lazy : {false, true}) {
      const std::string what = std::string(type) + (lazy ? " lazy" : "") + " sparse";
      std::map<std::string, Attribute> attrs{{"beta1", Attribute(0.9f)}, {"beta2", Attribute(0.999f)}, {"epsilon", Attribute(1e-8f)}, {"lazy_mode", Attribute(lazy)}};
      if (std::string(type) == "adamw") attrs["coeff"] = Attribute(0.01f);
      const std::vector<Slotted> state{{"Param", "ParamOut", p},          {"LearningRate", "", lr},
                                       {"Moment1", "Moment1Out", m1},     {"Moment2", "Moment2Out", m2},
                                       {"Beta1Pow", "Beta1PowOut", one<T>(0.9 * 0.9)}, {"Beta2Pow", "Beta2PowOut", one<T>(0.999 * 0.999)}};
      OpTest first(type);
      for (const Slotted& v : state) first.input(v.in, v.value);
      first.selected_rows_input("Grad", sparse<T>(steps[0], height, width, 960));
      for (auto& [n, a] : attrs) first.attr(n, a);
      compare_on_cuda(first, what + " (one step)", t, t);
      OpTest skipped = first;
      compare_on_cuda(skipped.input("SkipUpdate", Tensor::from<bool>({true}, {1})), what + " skipped", 0, 0);
      compare_steps(what + " (4 steps in place)", type, state, grad, 4, attrs, t, t);
    }
}

TEST_CASE("cuda: a SelectedRows Grad in a run of grouped update ops takes its own kernel; the group matches the CPU") {
  // sgd, adam: three parameters each, the middle one's gradient sparse (the executor groups the three ops).
  for (const std::string rule : {"sgd", "adam"}) {
    CAPTURE(rule);
    UpdateProgram up;
    Block& b = up.block();
    auto var = [&](const std::string& n, Tensor t) { up.var(n, std::move(t)); };
    var("lr", one<float>(0.05));
    const SelectedRows sg = sparse<float>({3, 8, 3, 1}, 12, 5, 971);
    for (int k = 0; k < 3; ++k) {
      const std::string i = std::to_string(k);
      const Shape s{12, 5};
      var("p" + i, random_tensor<float>(s, -1, 1, 972 + uint64_t(k)));
      if (k == 1) b.create_var("g1", {.dtype = f32, .shape = s, .persistable = true, .kind = VarKind::selected_rows});
      else var("g" + i, random_tensor<float>(s, -1, 1, 975 + uint64_t(k)));
      Operator op{rule};
      op.set_input(ops::Sgd::param, {"p" + i}).set_input(ops::Sgd::grad, {"g" + i}).set_input(ops::Sgd::learning_rate, {"lr"});
      op.set_output(ops::Sgd::param_out, {"p" + i});
      if (rule == "adam") {
        using A = ops::Adam;
        var("m" + i, random_tensor<float>(s, -1, 1, 978 + uint64_t(k)));
        var("u" + i, random_tensor<float>(s, 0, 1, 981 + uint64_t(k)));
        var("b1p" + i, one<float>(0.9));
        var("b2p" + i, one<float>(0.999));
        op.set_input(A::moment1, {"m" + i}).set_input(A::moment2, {"u" + i}).set_input(A::beta1_pow, {"b1p" + i}).set_input(A::beta2_pow, {"b2p" + i});
        op.set_output(A::moment1_out, {"m" + i}).set_output(A::moment2_out, {"u" + i}).set_output(A::beta1_pow_out, {"b1p" + i});
        op.set_output(A::beta2_pow_out, {"b2p" + i});
      }
      add_op(b, std::move(op));
    }
    const auto sparse_grad = [&](Scope& scope, Place place) {
      scope.var("g1").selected_rows() = SelectedRows{sg.rows, sg.height, sg.value.to(place, true)};
    };
    const auto want = up.run(cpu(), 2, sparse_grad);
    if (!have_device()) {
      ++g_skipped;
      continue;
    }
    const auto got = up.run(cuda(0), 2, sparse_grad);
    for (auto& [n, t] : want) check_close(LoDTensor(got.at(n)), LoDTensor(t), 2e-4, 2e-4, rule + " " + n);
  }
}
