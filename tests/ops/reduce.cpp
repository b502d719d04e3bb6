// tests/ops/reduce.cpp: reduce_{sum,mean,max,min}: forward against a plain loop over X's multi-index for every
// pattern of reduced dims, keep_dim / reduce_all / negative dims, gradients against finite differences, errors.
#include "pch.hpp"
#include "support/op_check.hpp"

using namespace oar;
using namespace oar::test;

namespace {
const char* const types[] = {"reduce_sum", "reduce_mean", "reduce_max", "reduce_min"};

/// The reference: every element of X goes to the output position given by its kept dims.
Tensor reference(const std::string& type, const Tensor& x, std::vector<int> dims, bool keep_dim, bool reduce_all) {
  const Shape& s = x.shape();
  std::vector<bool> red(size_t(s.rank()), reduce_all);
  for (int d : dims) red[size_t(d < 0 ? d + s.rank() : d)] = true;
  Shape out;
  for (int d = 0; d < s.rank(); ++d)
    if (!red[size_t(d)]) out.push_back(s[d]);
    else if (keep_dim) out.push_back(1);
  if (out.empty()) out.push_back(1);
  const int64_t on = out.numel();
  bool is_max = type == "reduce_max", is_min = type == "reduce_min";
  std::vector<double> acc(size_t(on), is_max ? -INFINITY : (is_min ? INFINITY : 0.0));
  std::vector<int64_t> cnt(size_t(on), 0);
  for (int64_t i = 0; i < x.numel(); ++i) {
    int64_t rest = i, o = 0, stride = 1;
    for (int d = s.rank() - 1; d >= 0; --d) {
      int64_t idx = rest % s[d];
      rest /= s[d];
      if (!red[size_t(d)]) o += idx * stride, stride *= s[d];
    }
    double v = x.get(i);
    double& a = acc[size_t(o)];
    a = is_max ? std::max(a, v) : is_min ? std::min(a, v) : a + v;
    cnt[size_t(o)]++;
  }
  if (type == "reduce_mean")
    for (size_t o = 0; o < acc.size(); ++o) acc[o] /= double(cnt[o]);
  return Tensor::from<double>(acc, out);
}

struct Case {
  Shape x;
  std::vector<int> dim;
  bool keep_dim = false, reduce_all = false;
};
const Case cases[] = {
    {{5}, {0}},                   // everything
    {{4, 6}, {1}},                // rows
    {{4, 6}, {0}},                // columns
    {{4, 6}, {-1}, true},         // negative dim, keep_dim
    {{2, 3, 4}, {1}},             // middle slab
    {{2, 3, 4}, {0, 2}},          // two separate runs
    {{2, 3, 4}, {1, 2}},          // merged trailing run
    {{2, 3, 4}, {0, 1}, true},    // merged leading run, keep_dim
    {{2, 3, 4, 5}, {0, 2}},       // alternating runs
    {{2, 1, 4}, {1}},             // a size-1 dim
    {{2, 3, 4}, {}, false, true}, // reduce_all
    {{2, 3, 4}, {}, true, true},  // reduce_all, keep_dim
};

OpTest make(const std::string& type, const Tensor& x, const Case& k) {
  OpTest t(type);
  t.input("X", x).attr("keep_dim", k.keep_dim).attr("reduce_all", k.reduce_all);
  if (!k.dim.empty()) t.attr("dim", std::vector<int32_t>(k.dim.begin(), k.dim.end()));
  return t;
}
}  // namespace

TEST_CASE_TEMPLATE("reduce: every pattern of reduced dims matches a plain loop", T, float, double) {
  for (const char* type : types) {
    CAPTURE(type);
    for (const Case& k : cases) {
      CAPTURE(k.x.str());
      auto x = random_tensor<T>(k.x, -1, 1, uint64_t(k.x.numel()));
      auto out = make(type, x, k).run()["Out"];
      double tol = std::is_same_v<T, float> ? 1e-6 : 1e-13;
      check_close(to_f64(out), reference(type, to_f64(x), k.dim, k.keep_dim, k.reduce_all), tol, tol, type);
    }
  }
}

TEST_CASE_TEMPLATE("reduce: sizes 1..100000 along rows, columns and everything", T, float, double) {
  for (const char* type : types) {
    CAPTURE(type);
    for (int64_t n : {1, 3, 17, 64, 100000}) {
      CAPTURE(n);
      double tol = std::is_same_v<T, float> ? 2e-5 : 1e-11;
      auto flat = random_tensor<T>({n}, -1, 1, uint64_t(n));
      check_close(to_f64(make(type, flat, {{n}, {0}}).run()["Out"]), reference(type, to_f64(flat), {0}, false, false), tol, tol, type);
      auto rows = random_tensor<T>({n, 7}, -1, 1, uint64_t(n + 1));
      for (int d : {0, 1})
        check_close(to_f64(make(type, rows, {{n, 7}, {d}}).run()["Out"]), reference(type, to_f64(rows), {d}, false, false), tol, tol, type);
      auto slab = random_tensor<T>({3, n, 5}, -1, 1, uint64_t(n + 2));
      check_close(to_f64(make(type, slab, {{3, n, 5}, {1}}).run()["Out"]), reference(type, to_f64(slab), {1}, false, false), tol, tol, type);
    }
  }
}

TEST_CASE("reduce: integer tensors") {
  auto x = Tensor::from<int64_t>({1, 5, -2, 4, 3, 9}, {2, 3});
  CHECK(OpTest("reduce_sum").input("X", x).attr("dim", std::vector<int32_t>{1}).run()["Out"].to_vector<int64_t>() == std::vector<int64_t>{4, 16});
  CHECK(OpTest("reduce_max").input("X", x).run()["Out"].to_vector<int64_t>() == std::vector<int64_t>{4, 5, 9});
  CHECK(OpTest("reduce_min").input("X", Tensor::from<int32_t>({3, -7, 2})).run()["Out"].to_vector<int32_t>() == std::vector<int32_t>{-7});
}

TEST_CASE("reduce: grads match finite differences (f64, every pattern)") {
  for (const char* type : types) {
    CAPTURE(type);
    for (const Case& k : cases) {
      CAPTURE(k.x.str());
      // Distinct values (a shuffled ramp) so max / min have one arg-extreme each and no near-ties.
      int64_t n = k.x.numel();
      auto x = make_tensor<double>(k.x, [&](int64_t i) { return double((i * 7919) % n) / double(n) - 0.5; });
      make(type, x, k).check_grad({"X"}, {"Out"});
    }
  }
}

TEST_CASE("reduce_max / reduce_min: ties send the gradient to every equal element (Fluid's rule)") {
  auto x = Tensor::from<double>({1.0, 3.0, 3.0, 0.0}, {1, 4});
  for (const char* type : {"reduce_max", "reduce_min"}) {
    Program p = OpTest(type).input("X", x).attr("dim", std::vector<int32_t>{1}).build();
    Block& b = p.global_block();
    b.create_var("Out_0@GRAD", {.dtype = f64, .shape = Shape{1}});
    GradContext gc(b.op(0), b);
    for (auto& g : op_def(type).grad(gc)) add_op(b, g);
    Scope scope;
    Executor exe;
    auto r = exe.run(p, scope, {{"X_0", x}, {"Out_0@GRAD", Tensor::from<double>({2.0}, Shape{1})}}, {"X_0@GRAD"});
    std::vector<double> want = std::string(type) == "reduce_max" ? std::vector<double>{0, 2, 2, 0} : std::vector<double>{0, 0, 0, 2};
    CHECK(r[0].to_vector<double>() == want);
  }
}

TEST_CASE("reduce: empty dims and NaN do not crash") {
  auto e = OpTest("reduce_sum").input("X", Tensor(Shape{0, 4}, f32)).run()["Out"];
  CHECK(e.shape() == Shape{4});
  CHECK(e.get(0) == 0.0);
  auto m = OpTest("reduce_mean").input("X", Tensor(Shape{0, 4}, f32)).run()["Out"];
  CHECK(std::isnan(m.get(0)));
  auto rows = OpTest("reduce_max").input("X", Tensor(Shape{0, 4}, f32)).attr("dim", std::vector<int32_t>{1}).run()["Out"];
  CHECK(rows.shape() == Shape{0});
  auto n = OpTest("reduce_sum").input("X", Tensor::from<float>({1.f, std::nanf("")})).run()["Out"];
  CHECK(std::isnan(n.get(0)));
}

TEST_CASE("reduce: bad dims are an oar::Error naming X's shape") {
  auto range = error_of([] { OpTest("reduce_sum").input("X", random_tensor<float>({2, 3})).attr("dim", std::vector<int32_t>{2}).build(); });
  test::check_contains(range, {"reduce_sum", "dim 2 is out of range", "[2, 3]"});
  auto neg = error_of([] { OpTest("reduce_max").input("X", random_tensor<float>({2, 3})).attr("dim", std::vector<int32_t>{-3}).build(); });
  CHECK(neg.find("dim -3") != std::string::npos);
  auto twice = error_of([] { OpTest("reduce_mean").input("X", random_tensor<float>({2, 3})).attr("dim", std::vector<int32_t>{1, -1}).build(); });
  CHECK(twice.find("twice") != std::string::npos);
}
