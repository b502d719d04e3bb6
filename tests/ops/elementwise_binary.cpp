// tests/ops/elementwise_binary.cpp: elementwise_{add,sub,mul,div,max,min,pow}: forward against a plain loop over
// X's multi-index for every broadcast form, gradients (both inputs, with the Y sum over broadcast dims) against
// finite differences, and the shape errors.
#include "pch.hpp"
#include "support/op_check.hpp"

using namespace oar;
using namespace oar::test;

namespace {
struct Row {
  const char* type;
  double (*ref)(double, double);
  double lo, hi;  // input range of both X and Y (keeps div and pow in their domain)
};
const Row rows[] = {
    {"elementwise_add", [](double x, double y) { return x + y; }, -1, 1},
    {"elementwise_sub", [](double x, double y) { return x - y; }, -1, 1},
    {"elementwise_mul", [](double x, double y) { return x * y; }, -1, 1},
    {"elementwise_div", [](double x, double y) { return x / y; }, 0.5, 2},
    {"elementwise_max", [](double x, double y) { return std::max(x, y); }, -1, 1},
    {"elementwise_min", [](double x, double y) { return std::min(x, y); }, -1, 1},
    {"elementwise_pow", [](double x, double y) { return std::pow(x, y); }, 0.5, 2},
};

/// The index into Y of each element of X, by Fluid's rule, written out over X's multi-index.
int64_t y_index(const Shape& xs, const Shape& ys, int axis, int64_t flat) {
  if (xs == ys) return flat;
  int ax = axis == -1 ? xs.rank() - ys.rank() : axis;
  int ry = ys.rank();
  while (ry > 0 && ys[ry - 1] == 1) --ry;
  std::vector<int64_t> idx(size_t(xs.rank()));
  for (int d = xs.rank() - 1; d >= 0; --d) idx[size_t(d)] = flat % xs[d], flat /= xs[d];
  int64_t yi = 0;
  for (int d = 0; d < ry; ++d) yi = yi * ys[d] + idx[size_t(ax + d)];
  return yi;
}

Tensor reference(const Row& r, const Tensor& x, const Tensor& y, int axis) {
  return make_tensor<double>(x.shape(), [&](int64_t i) { return r.ref(x.get(i), y.get(y_index(x.shape(), y.shape(), axis, i))); });
}

struct Case {
  Shape x, y;
  int axis;
};
// Every broadcast form: same shape, bias rows, a middle slice, a leading slice, a scalar, trailing ones.
const Case cases[] = {
    {{4, 5}, {4, 5}, -1},     {{6, 5}, {5}, -1},      {{2, 3, 4, 5}, {3, 4}, 1}, {{2, 3, 4}, {2}, 0},
    {{2, 3, 4}, {1}, -1},     {{7}, {1}, -1},         {{2, 3, 4}, {3, 1}, 1},    {{2, 3, 4}, {3, 4}, -1},
    {{2, 3, 4}, {2, 3}, 0},   {{3, 1, 4}, {1, 4}, 1},
};

template <class T>
void check_forward(const Row& r, const Shape& xs, const Shape& ys, int axis, bool unknown_batch = false) {
  CAPTURE(xs.str());
  CAPTURE(ys.str());
  CAPTURE(axis);
  auto x = random_tensor<T>(xs, r.lo, r.hi, uint64_t(xs.numel() + 1));
  auto y = random_tensor<T>(ys, r.lo, r.hi, uint64_t(ys.numel() + 100));
  auto out = OpTest(r.type).input("X", x).input("Y", y).attr("axis", axis).unknown_batch(unknown_batch).run();
  double tol = std::is_same_v<T, float> ? 1e-6 : 1e-14;
  check_close(to_f64(out["Out"]), reference(r, to_f64(x), to_f64(y), axis), tol, tol, r.type);
}
}  // namespace

TEST_CASE_TEMPLATE("elementwise_binary: same shapes match a plain loop (sizes 1..100000)", T, float, double) {
  for (const Row& r : rows) {
    CAPTURE(r.type);
    for (int64_t n : {1, 3, 17, 64, 100000}) check_forward<T>(r, {n}, {n}, -1);
  }
}

TEST_CASE_TEMPLATE("elementwise_binary: every broadcast form matches a plain loop", T, float, double) {
  for (const Row& r : rows) {
    CAPTURE(r.type);
    for (const Case& k : cases) check_forward<T>(r, k.x, k.y, k.axis);
    for (int64_t m : {1, 3, 17, 64, 2000}) check_forward<T>(r, {m, 50}, {50}, -1, true);  // fc bias, unknown batch
    check_forward<T>(r, {4, 3, 4000}, {3}, 1);                                           // large post
    check_forward<T>(r, {300, 7, 50}, {7, 50}, 1);                                       // many rows of a slab
  }
}

TEST_CASE("elementwise_binary: integer add, sub, mul, max, min") {
  auto x = Tensor::from<int64_t>({5, -3, 7, 2, 0, 9}, {2, 3});
  auto y = Tensor::from<int64_t>({2, 4, -1});
  auto add = OpTest("elementwise_add").input("X", x).input("Y", y).run()["Out"];
  CHECK(add.to_vector<int64_t>() == std::vector<int64_t>{7, 1, 6, 4, 4, 8});
  auto mx = OpTest("elementwise_max").input("X", x).input("Y", y).run()["Out"];
  CHECK(mx.to_vector<int64_t>() == std::vector<int64_t>{5, 4, 7, 2, 4, 9});
  auto xi = Tensor::from<int32_t>({1, 2, 3});
  auto mul = OpTest("elementwise_mul").input("X", xi).input("Y", Tensor::from<int32_t>({3})).run()["Out"];
  CHECK(mul.to_vector<int32_t>() == std::vector<int32_t>{3, 6, 9});
  auto msg = error_of([&] { OpTest("elementwise_div").input("X", xi).input("Y", xi).run(); });
  CHECK(msg.find("i32") != std::string::npos);
}

TEST_CASE("elementwise_binary: grads of X and Y match finite differences (f64, every broadcast form)") {
  for (const Row& r : rows) {
    CAPTURE(r.type);
    for (const Case& k : cases) {
      CAPTURE(k.x.str());
      CAPTURE(k.y.str());
      auto x = random_tensor<double>(k.x, r.lo, r.hi, 3);
      auto y = random_tensor<double>(k.y, r.lo, r.hi, 4);
      if (std::string(r.type) == "elementwise_max" || std::string(r.type) == "elementwise_min") {
        // Keep x and y apart (the kink is at x == y): x in [-1, -0.6) or [0.6, 1), y in (-0.3, 0.3).
        x = make_tensor<double>(k.x, [&](int64_t i) { double v = x.get(i); return v < 0 ? v * 0.4 - 0.6 : v * 0.4 + 0.6; });
        y = make_tensor<double>(k.y, [&](int64_t i) { return y.get(i) * 0.3; });
      }
      OpTest(r.type).input("X", x).input("Y", y).attr("axis", k.axis).check_grad({"X", "Y"}, {"Out"});
      OpTest(r.type).input("X", x).input("Y", y).attr("axis", k.axis).check_grad({"Y"}, {"Out"});  // X@GRAD not wanted
      OpTest(r.type).input("X", x).input("Y", y).attr("axis", k.axis).check_grad({"X"}, {"Out"});  // Y@GRAD not wanted
    }
  }
}

TEST_CASE_TEMPLATE("elementwise_add: bias grad sums dOut over the rows (large)", T, float, double) {
  // Y@GRAD of [pre, n] + [n] with dOut = 1/numel everywhere is pre / numel per column; check a big case directly.
  for (int64_t pre : {1, 3, 17, 64, 5000}) {
    CAPTURE(pre);
    const int64_t n = 40;
    Program p = OpTest("elementwise_add").input("X", random_tensor<T>({pre, n})).input("Y", random_tensor<T>({n})).build();
    Block& b = p.global_block();
    b.create_var("Out_0@GRAD", {.dtype = dtype_of<T>, .shape = Shape{pre, n}});
    GradContext gc(b.op(0), b);
    for (auto& g : op_def("elementwise_add").grad(gc)) add_op(b, g);
    auto dout = random_tensor<T>({pre, n}, -1, 1, 5);
    Scope scope;
    Executor exe;
    auto r = exe.run(p, scope, {{"X_0", random_tensor<T>({pre, n})}, {"Y_0", random_tensor<T>({n})}, {"Out_0@GRAD", dout}}, {"X_0@GRAD", "Y_0@GRAD"});
    check_close(to_f64(r[0]), to_f64(dout), 0, 0, "X@GRAD");
    auto want = make_tensor<double>({n}, [&](int64_t j) {
      double s = 0;
      for (int64_t i = 0; i < pre; ++i) s += dout.get(i * n + j);
      return s;
    });
    double tol = std::is_same_v<T, float> ? 1e-4 : 1e-12;
    check_close(to_f64(r[1]), want, tol, tol, "Y@GRAD");
  }
}

TEST_CASE("elementwise_binary: Out keeps X's LoD") {
  LoDTensor x(random_tensor<double>({5, 2}), {{0, 2, 5}});
  auto out = OpTest("elementwise_mul").input("X", x).input("Y", random_tensor<double>({2})).run()["Out"];
  CHECK(out.lod() == LoD{{0, 2, 5}});
}

TEST_CASE("elementwise_binary: empty batch, NaN and Inf pass through without a crash") {
  auto e = OpTest("elementwise_add").input("X", Tensor(Shape{0, 4}, f32)).input("Y", random_tensor<float>({4})).run();
  CHECK(e["Out"].shape() == Shape{0, 4});
  auto x = Tensor::from<float>({std::nanf(""), INFINITY, -INFINITY});
  auto o = OpTest("elementwise_div").input("X", x).input("Y", Tensor::from<float>({0.f})).run()["Out"];
  CHECK(std::isnan(o.get(0)));
  CHECK(o.get(1) == INFINITY);
  CHECK(o.get(2) == -INFINITY);
}

TEST_CASE("elementwise_binary: incompatible shapes are an oar::Error naming both shapes") {
  auto mismatch = error_of([] {
    OpTest("elementwise_add").input("X", random_tensor<float>({2, 3, 4})).input("Y", random_tensor<float>({5})).build();
  });
  test::check_contains(mismatch, {"elementwise_add", "[2, 3, 4]", "[5]"});

  auto rank = error_of([] {
    OpTest("elementwise_sub").input("X", random_tensor<float>({3})).input("Y", random_tensor<float>({2, 3})).build();
  });
  CHECK(rank.find("higher rank") != std::string::npos);
  CHECK(rank.find("[2, 3]") != std::string::npos);

  auto axis = error_of([] {
    OpTest("elementwise_mul").input("X", random_tensor<float>({2, 3})).input("Y", random_tensor<float>({3})).attr("axis", 2).build();
  });
  CHECK(axis.find("axis = 2") != std::string::npos);

  auto wrong_axis = error_of([] {
    OpTest("elementwise_mul").input("X", random_tensor<float>({2, 3})).input("Y", random_tensor<float>({3})).attr("axis", 0).build();
  });
  CHECK(wrong_axis.find("Y dim 0 is 3 but X dim 0 is 2") != std::string::npos);

  auto dtype = error_of([] {
    OpTest("elementwise_max").input("X", random_tensor<float>({3})).input("Y", random_tensor<double>({3})).build();
  });
  CHECK(dtype.find("f64") != std::string::npos);

  // A batch that is unknown at build time is checked again when the op runs.
  auto run = error_of([] {
    OpTest("elementwise_add").input("X", random_tensor<float>({4, 3})).input("Y", random_tensor<float>({5, 3})).attr("axis", 0).unknown_batch().run();
  });
  CHECK(run.find("[4, 3]") != std::string::npos);
  CHECK(run.find("[5, 3]") != std::string::npos);
}
