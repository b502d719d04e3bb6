// tests/ops/concat.cpp: concat, split and stack: data against plain loops, build-time shapes, grads, errors.
#include "pch.hpp"
#include "support/op_check.hpp"

using namespace oar;
using namespace oar::test;

namespace {
/// Joins tensors of one rank along `axis` with plain index loops.
Tensor naive_concat(const std::vector<Tensor>& xs, int axis) {
  Shape os = xs[0].shape();
  os[axis] = 0;
  for (auto& x : xs) os[axis] += x.dim(axis);
  int64_t outer = os.numel(0, axis), inner = os.numel(axis + 1, os.rank());
  std::vector<double> out;
  for (int64_t o = 0; o < outer; ++o)
    for (auto& x : xs)
      for (int64_t j = 0; j < x.dim(axis) * inner; ++j) out.push_back(x.get(o * x.dim(axis) * inner + j));
  return Tensor::from<double>(out, os);
}
std::vector<LoDTensor> as_lod(const std::vector<Tensor>& v) { return {v.begin(), v.end()}; }
}  // namespace

TEST_CASE_TEMPLATE("concat: matches plain loops on every axis", T, float, double, int32_t, int64_t) {
  for (int64_t n : {1, 3, 17, 64, 500}) {
    for (int axis : {0, 1, 2, -1}) {
      int a = axis < 0 ? axis + 3 : axis;
      std::vector<Tensor> xs;
      for (int64_t w : {1, 3, 2}) {
        Shape s{n, 4, 5};
        s[a] = a == 0 ? n * w : w;
        xs.push_back(random_tensor<T>(s, -9, 9, uint64_t(w)));
      }
      auto out = OpTest("concat").inputs("X", as_lod(xs)).attr("axis", axis).run()["Out"];
      check_close(to_f64(out), naive_concat(xs, a), 0, 0, "concat");
    }
  }
}

TEST_CASE("concat: build-time shapes with an unknown batch") {
  std::vector<Tensor> xs{random_tensor<float>({5, 2}), random_tensor<float>({5, 3})};
  OpTest t("concat");
  t.inputs("X", as_lod(xs)).attr("axis", 1).unknown_batch();
  CHECK(t.build().global_block().var("Out_0").shape() == Shape{-1, 5});
  CHECK(t.run()["Out"].shape() == Shape{5, 5});
  OpTest t0("concat");
  t0.inputs("X", as_lod(xs)).attr("axis", 0).unknown_batch();
  auto m = error_of([&] { t0.build(); });
  CHECK(m.find("dim 1") != std::string::npos);
}

TEST_CASE("concat: grad splits Out@GRAD (f64), and skips unwanted inputs") {
  std::vector<Tensor> xs{random_tensor<double>({2, 3}, -1, 1, 1), random_tensor<double>({2, 1}, -1, 1, 2), random_tensor<double>({2, 2}, -1, 1, 3)};
  OpTest("concat").inputs("X", as_lod(xs)).attr("axis", 1).check_grad({"X"}, {"Out"});
  std::vector<Tensor> ys{random_tensor<double>({1, 3}, -1, 1, 1), random_tensor<double>({3, 3}, -1, 1, 2)};
  OpTest("concat").inputs("X", as_lod(ys)).attr("axis", 0).check_grad({"X"}, {"Out"});
}

TEST_CASE("concat: mismatched dims and axis out of range are oar::Errors naming shapes") {
  std::vector<Tensor> xs{random_tensor<float>({2, 3}), random_tensor<float>({4, 3})};
  auto m = error_of([&] { OpTest("concat").inputs("X", as_lod(xs)).attr("axis", 1).build(); });
  test::check_contains(m, {"concat", "[4, 3]", "[2, 3]"});
  auto m2 = error_of([&] { OpTest("concat").inputs("X", as_lod(xs)).attr("axis", 2).build(); });
  CHECK(m2.find("axis = 2 is out of range") != std::string::npos);
}

TEST_CASE_TEMPLATE("split: num and sections (with -1) give the pieces, any axis", T, float, double, int32_t, int64_t) {
  for (int64_t n : {1, 3, 17, 64}) {
    auto x = random_tensor<T>({n, 6, 4}, -9, 9);
    auto out = OpTest("split").input("X", x).attr("num", 3).attr("axis", 1).outputs("Out", 3).run();
    std::vector<Tensor> pieces{out["Out"], out["Out#1"], out["Out#2"]};
    for (auto& p : pieces) CHECK(p.shape() == Shape{n, 2, 4});
    check_close(naive_concat(pieces, 1), to_f64(x), 0, 0, "split num");
    auto sec = OpTest("split").input("X", x).attr("sections", std::vector<int32_t>{1, -1, 2}).attr("axis", -1).outputs("Out", 3).run();
    CHECK(sec["Out"].shape() == Shape{n, 6, 1});
    CHECK(sec["Out#1"].shape() == Shape{n, 6, 1});
    CHECK(sec["Out#2"].shape() == Shape{n, 6, 2});
    check_close(naive_concat({sec["Out"], sec["Out#1"], sec["Out#2"]}, 2), to_f64(x), 0, 0, "split sections");
  }
}

TEST_CASE("split: batch axis unknown at build time, and without num or sections") {
  OpTest t("split");
  t.input("X", random_tensor<float>({6, 4})).attr("axis", 0).outputs("Out", 2).unknown_batch();
  CHECK(t.build().global_block().var("Out_1").shape() == Shape{-1, 4});
  auto out = t.run();
  CHECK(out["Out#1"].shape() == Shape{3, 4});
}

TEST_CASE("split: grad is concat of the output grads") {
  auto x = random_tensor<double>({2, 5});
  Program p = OpTest("split").input("X", x).attr("sections", std::vector<int32_t>{2, 3}).attr("axis", 1).outputs("Out", 2).build();
  Block& b = p.global_block();
  std::set<std::string> ng;
  GradContext gc(b.op(0), b, ng);
  auto gops = op_def("split").grad(gc);
  REQUIRE(gops.size() == 1);
  CHECK(gops[0].type() == "concat");
  CHECK(gops[0].input("X") == std::vector<std::string>{"Out_0@GRAD", "Out_1@GRAD"});
  CHECK(gops[0].output("Out") == std::vector<std::string>{"X_0@GRAD"});
  for (int i = 0; i < 2; ++i) b.create_var(fmt::format("Out_{}@GRAD", i), {.dtype = f64, .shape = b.var(fmt::format("Out_{}", i)).shape()});
  add_op(b, gops[0]);
  auto g0 = random_tensor<double>({2, 2}, -1, 1, 4), g1 = random_tensor<double>({2, 3}, -1, 1, 5);
  Scope scope;
  Executor exe;
  auto dx = exe.run(p, scope, {{"X_0", x}, {"Out_0@GRAD", g0}, {"Out_1@GRAD", g1}}, {"X_0@GRAD"})[0];
  check_close(dx, naive_concat({g0, g1}, 1), 0, 0, "split grad");
}

TEST_CASE("split: sizes that do not fit are oar::Errors") {
  auto x = random_tensor<float>({4, 6});
  auto m = error_of([&] { OpTest("split").input("X", x).attr("num", 4).attr("axis", 1).outputs("Out", 4).build(); });
  CHECK(m.find("split") != std::string::npos);
  CHECK(m.find("not a multiple of num = 4") != std::string::npos);
  auto m2 = error_of([&] { OpTest("split").input("X", x).attr("sections", std::vector<int32_t>{2, 2}).attr("axis", 1).outputs("Out", 2).build(); });
  CHECK(m2.find("add up to 4 but the split dim is 6") != std::string::npos);
  auto m3 = error_of([&] { OpTest("split").input("X", x).attr("num", 3).attr("axis", 1).outputs("Out", 2).build(); });
  CHECK(m3.find("Out has 2 variables") != std::string::npos);
  auto m4 = error_of([&] { OpTest("split").input("X", x).attr("num", 2).attr("axis", 2).outputs("Out", 2).build(); });
  CHECK(m4.find("axis = 2 is out of range") != std::string::npos);
}

TEST_CASE_TEMPLATE("stack: Y[..., i, ...] = X[i] for every axis", T, float, double, int32_t, int64_t) {
  for (int64_t n : {1, 3, 17, 64}) {
    std::vector<Tensor> xs;
    for (int i = 0; i < 3; ++i) xs.push_back(random_tensor<T>({n, 4}, -9, 9, uint64_t(i + 1)));
    for (int axis : {0, 1, 2, -1, -3}) {
      int a = axis < 0 ? axis + 3 : axis;
      auto y = OpTest("stack").inputs("X", as_lod(xs)).attr("axis", axis).run()["Y"];
      Shape ys{n, 4};
      ys.insert(a, 3);
      REQUIRE(y.shape() == ys);
      std::vector<Tensor> xv;
      for (auto& x : xs) {
        Shape s{n, 4};
        s.insert(a, 1);
        xv.push_back(x.view(s));
      }
      check_close(to_f64(y), naive_concat(xv, a), 0, 0, "stack");
    }
  }
}

TEST_CASE("stack: build-time shape, grad (f64) and errors") {
  std::vector<Tensor> xs{random_tensor<double>({2, 3}, -1, 1, 1), random_tensor<double>({2, 3}, -1, 1, 2)};
  OpTest t("stack");
  t.inputs("X", as_lod(xs)).attr("axis", 1).unknown_batch();
  CHECK(t.build().global_block().var("Y_0").shape() == Shape{-1, 2, 3});
  OpTest("stack").inputs("X", as_lod(xs)).attr("axis", 1).check_grad({"X"}, {"Y"});
  OpTest("stack").inputs("X", as_lod(xs)).attr("axis", -1).check_grad({"X"}, {"Y"});
  std::vector<Tensor> bad{random_tensor<float>({2, 3}), random_tensor<float>({2, 4})};
  auto m = error_of([&] { OpTest("stack").inputs("X", as_lod(bad)).build(); });
  CHECK(m.find("stack") != std::string::npos);
  CHECK(m.find("[2, 4]") != std::string::npos);
  auto m2 = error_of([&] { OpTest("stack").inputs("X", as_lod(xs)).attr("axis", 3).build(); });
  CHECK(m2.find("axis = 3 is out of range") != std::string::npos);
}
