// tests/ops/assign.cpp: assign, cast and increment through the op harness.
#include "pch.hpp"
#include "kernels/cpu/assign.hpp"  // Assign::eval_cpu, called directly on a SelectedRows input
#include "support/op_check.hpp"

using namespace oar;
using namespace oar::test;

TEST_CASE_TEMPLATE("assign: Out is an equal copy with its own storage", T, float, double, int32_t, int64_t) {
  for (int64_t n : {1, 3, 17, 64, 5000}) {
    auto x = random_tensor<T>({n, 3}, -50, 50);
    auto out = OpTest("assign").input("X", x).unknown_batch().run()["Out"];
    check_close(out, x, 0, 0, "assign");
    CHECK(out.raw() != x.raw());
  }
}

TEST_CASE("assign: keeps LoD, handles empty tensors and NaN") {
  LoDTensor x(make_tensor<double>({4, 2}, [](int64_t i) { return i == 3 ? NAN : double(i); }), {{0, 1, 4}});
  auto out = OpTest("assign").input("X", x).run()["Out"];
  CHECK(out.lod() == x.lod());
  CHECK(std::isnan(out.get(3)));
  CHECK(OpTest("assign").input("X", random_tensor<float>({0, 5})).run()["Out"].shape() == Shape{0, 5});
}

TEST_CASE("assign: grad is the output grad (f64)") {
  OpTest("assign").input("X", random_tensor<double>({3, 4})).check_grad({"X"}, {"Out"});
}

TEST_CASE("assign: copies SelectedRows") {
  Scope scope;
  SelectedRows& in = scope.var("X").selected_rows();
  in.rows = {3, 1, 3};
  in.height = 5;
  in.value = random_tensor<float>({3, 2});
  Operator op("assign");
  op.set_input("X", {"X"}).set_output("Out", {"Out"});
  CpuContext dev(1);
  scope.var("Out");
  KernelContext ctx(op, scope, dev);
  ops::Assign::eval_cpu(ctx, NoAttrs(AttrReader(op, nullptr)));
  const SelectedRows& out = scope.var("Out").selected_rows();
  CHECK(out.rows == in.rows);
  CHECK(out.height == 5);
  check_close(out.value, in.value, 0, 0, "assign rows");
  CHECK(out.value.raw() != in.value.raw());
}

namespace {
template <class To, class From>
Tensor cast_ref(const Tensor& x) {
  std::vector<To> v;
  for (From f : x.to_vector<From>()) {
    if constexpr (std::is_same_v<To, bool>) v.push_back(f != From(0));
    else v.push_back(static_cast<To>(f));
  }
  Tensor t(x.shape(), dtype_of<To>);
  std::copy(v.begin(), v.end(), t.data<To>());
  return t;
}
template <class From, class To>
void check_cast(const Tensor& x) {
  auto out = OpTest("cast").input("X", x).attr("in_dtype", int32_t(dtype_of<From>)).attr("out_dtype", int32_t(dtype_of<To>)).unknown_batch().run()["Out"];
  REQUIRE(out.dtype() == dtype_of<To>);
  check_close(out, cast_ref<To, From>(x), 0, 0, fmt::format("cast {} -> {}", name(dtype_of<From>), name(dtype_of<To>)));
}
template <class From>
Tensor cast_input(int64_t n) {
  if constexpr (std::is_same_v<From, bool>) {
    Tensor t(Shape{n, 2}, boolean);  // no Tensor::from: std::vector<bool> has no span
    for (int64_t i = 0; i < t.numel(); ++i) t.data<bool>()[i] = i % 3 == 0;
    return t;
  }
  else if constexpr (std::is_floating_point_v<From>) return make_tensor<From>({n, 2}, [](int64_t i) { return (double(i) - 20) * 0.75; });
  else return make_tensor<From>({n, 2}, [](int64_t i) { return i % 7 - 3; });
}
template <class From>
void check_cast_from() {
  for (int64_t n : {1, 17, 3000}) {
    Tensor x = cast_input<From>(n);
    check_cast<From, bool>(x);
    check_cast<From, int32_t>(x);
    check_cast<From, int64_t>(x);
    check_cast<From, float>(x);
    check_cast<From, double>(x);
  }
}
}  // namespace

TEST_CASE("cast: every pair among bool, i32, i64, f32, f64 matches static_cast") {
  check_cast_from<bool>();
  check_cast_from<int32_t>();
  check_cast_from<int64_t>();
  check_cast_from<float>();
  check_cast_from<double>();
}

TEST_CASE("cast: float -> int truncates toward zero and saturates; NaN -> 0") {
  auto x = Tensor::from<double>({-2.7, 2.7, 1e30, -1e30, NAN, INFINITY});
  auto out = OpTest("cast").input("X", x).attr("in_dtype", 6).attr("out_dtype", int32_t(i32)).run()["Out"];
  CHECK(out.to_vector<int32_t>() == std::vector<int32_t>{-2, 2, INT32_MAX, INT32_MIN, 0, INT32_MAX});
  auto f = OpTest("cast").input("X", x).attr("in_dtype", 6).attr("out_dtype", 5).run()["Out"];
  CHECK(std::isnan(f.get(4)));
  CHECK(f.get(5) == INFINITY);
}

TEST_CASE("cast: grad casts back (f64 -> f32 -> f64 and f64 -> f64)") {
  OpTest("cast").input("X", random_tensor<double>({3, 4})).attr("in_dtype", 6).attr("out_dtype", 6).check_grad({"X"}, {"Out"});
  // The f64 -> f32 grad: d(mean(cast(x)))/dx = 1/numel, computed through an f32 Out@GRAD.
  Program p = OpTest("cast").input("X", random_tensor<double>({2, 3})).attr("in_dtype", 6).attr("out_dtype", 5).build();
  Block& b = p.global_block();
  std::set<std::string> ng;
  GradContext gc(b.op(0), b, ng);
  auto gops = op_def("cast").grad(gc);
  REQUIRE(gops.size() == 1);
  CHECK(gops[0].type() == "cast");
  CHECK(gops[0].attr<int32_t>("in_dtype") == 5);
  CHECK(gops[0].attr<int32_t>("out_dtype") == 6);
  // No grad across integer casts.
  Program q = OpTest("cast").input("X", random_tensor<double>({2, 3})).attr("in_dtype", 6).attr("out_dtype", 3).build();
  GradContext gq(q.global_block().op(0), q.global_block(), ng);
  CHECK(op_def("cast").grad(gq).empty());
}

TEST_CASE("cast: in_dtype must match X and dtypes must be supported") {
  auto m = error_of([] { OpTest("cast").input("X", random_tensor<float>({2, 3})).attr("in_dtype", 6).attr("out_dtype", 5).build(); });
  CHECK(m.find("cast") != std::string::npos);
  CHECK(m.find("X is f32 but in_dtype is 6") != std::string::npos);
  auto m2 = error_of([] { OpTest("cast").input("X", random_tensor<float>({2, 3})).attr("in_dtype", 5).attr("out_dtype", 1).build(); });
  CHECK(m2.find("out_dtype") != std::string::npos);  // i16 has no cast kernel (f16, 4, and bf16, 22, do: tests/ops/amp.cpp)
}

TEST_CASE_TEMPLATE("increment: Out = X + step for every numeric dtype", T, float, double, int32_t, int64_t) {
  auto x = Tensor::from<T>({T(41)});
  CHECK(OpTest("increment").input("X", x).run()["Out"].get(0) == 42.0);
  CHECK(OpTest("increment").input("X", x).attr("step", 3.0f).run()["Out"].get(0) == 44.0);
  CHECK(OpTest("increment").input("X", x).attr("step", -1.0f).run()["Out"].get(0) == 40.0);
  CHECK(x.get(0) == 41.0);  // the input is untouched
}

TEST_CASE("increment: in place (Out == X) counts up across runs") {
  Program p;
  Block& b = p.global_block();
  b.create_var("i", {.dtype = i64, .shape = Shape{1}, .persistable = true});
  Operator op("increment");
  op.set_input("X", {"i"}).set_output("Out", {"i"});
  add_op(b, op);
  Scope scope;
  scope.var("i").tensor() = LoDTensor(Tensor::from<int64_t>({5}));
  Executor exe;
  for (int k = 0; k < 3; ++k) exe.run(p, scope, {}, {});
  CHECK(scope.tensor("i").get(0) == 8.0);
}

TEST_CASE("increment: X of more than one element is an oar::Error") {
  auto m = error_of([] { OpTest("increment").input("X", random_tensor<float>({2, 3})).build(); });
  CHECK(m.find("increment") != std::string::npos);
  CHECK(m.find("[2, 3]") != std::string::npos);
}
