// tests/ops/shape_ops.cpp: reshape, flatten, squeeze and unsqueeze: shapes (build time and run time), the
// data (a view of X), grads, errors, and that sharing X's storage never lets a later write leak through.
#include "pch.hpp"
#include "support/op_check.hpp"

using namespace oar;
using namespace oar::test;

namespace {
Shape inferred(const OpTest& t, const std::string& var = "Out_0") { return t.build().global_block().var(var).shape(); }
}  // namespace

TEST_CASE_TEMPLATE("reshape: same data in the new shape, 0 copies a dim, -1 is inferred", T, float, double, int32_t, int64_t) {
  for (int64_t n : {1, 3, 17, 64, 1000}) {
    auto x = random_tensor<T>({n, 3, 4}, -9, 9);
    OpTest t("reshape");
    t.input("X", x).attr("shape", std::vector<int32_t>{0, -1}).unknown_batch();
    CHECK(inferred(t) == Shape{-1, 12});
    auto out = t.run()["Out"];
    REQUIRE(out.shape() == Shape{n, 12});
    check_close(out, x.view({n, 12}), 0, 0, "reshape");
    auto out2 = OpTest("reshape").input("X", x).attr("shape", std::vector<int32_t>{-1, 2, 2}).run()["Out"];
    CHECK(out2.shape() == Shape{n * 3, 2, 2});
  }
}

TEST_CASE("reshape: build-time shapes with an unknown batch") {
  auto x = random_tensor<float>({6, 4});
  CHECK(inferred(OpTest("reshape").input("X", x).attr("shape", std::vector<int32_t>{-1, 2, 2}).unknown_batch()) == Shape{-1, 2, 2});
  CHECK(inferred(OpTest("reshape").input("X", x).attr("shape", std::vector<int32_t>{0, 2, 2}).unknown_batch()) == Shape{-1, 2, 2});
  CHECK(inferred(OpTest("reshape").input("X", x).attr("shape", std::vector<int32_t>{4, 6})) == Shape{4, 6});
  auto out = OpTest("reshape").input("X", x).attr("shape", std::vector<int32_t>{0, 2, 2}).unknown_batch().run()["Out"];
  CHECK(out.shape() == Shape{6, 2, 2});
}

TEST_CASE("reshape: grad is Out@GRAD reshaped (f64)") {
  OpTest("reshape").input("X", random_tensor<double>({2, 3, 4})).attr("shape", std::vector<int32_t>{4, -1}).check_grad({"X"}, {"Out"});
}

TEST_CASE("reshape: bad sizes are oar::Errors naming the shapes") {
  auto x = random_tensor<float>({2, 3, 4});
  auto m = error_of([&] { OpTest("reshape").input("X", x).attr("shape", std::vector<int32_t>{5, 5}).build(); });
  test::check_contains(m, {"reshape", "[2, 3, 4]", "[5, 5]"});
  auto m2 = error_of([&] { OpTest("reshape").input("X", x).attr("shape", std::vector<int32_t>{-1, 5}).build(); });
  CHECK(m2.find("not a multiple of 5") != std::string::npos);
  auto m3 = error_of([&] { OpTest("reshape").input("X", x).attr("shape", std::vector<int32_t>{-1, -1}).build(); });
  CHECK(m3.find("more than one -1") != std::string::npos);
  auto m4 = error_of([&] { OpTest("reshape").input("X", x).attr("shape", std::vector<int32_t>{0, 0, 0, 0}).build(); });
  CHECK(m4.find("copies dim 3") != std::string::npos);
  auto m5 = error_of([&] { OpTest("reshape").input("X", x).attr("shape", std::vector<int32_t>{-3, 8}).build(); });
  CHECK(m5.find("-3") != std::string::npos);
  // Caught at run time when the batch is unknown at build time.
  auto m6 = error_of([&] { OpTest("reshape").input("X", x).attr("shape", std::vector<int32_t>{-1, 5}).unknown_batch().run(); });
  CHECK(m6.find("not a multiple of 5") != std::string::npos);
}

TEST_CASE("reshape: Out shares X's storage, yet later writes to X never reach a fetched Out") {
  // reshape(X) -> Out, then assign(Y) -> X overwrites X in the same program.
  Program p;
  Block& b = p.global_block();
  b.create_var("X", {.dtype = f32, .shape = Shape{2, 3}});
  b.create_var("Y", {.dtype = f32, .shape = Shape{2, 3}});
  Operator r("reshape");
  r.set_input("X", {"X"}).set_output("Out", {"Out"}).set_attr("shape", std::vector<int32_t>{3, 2});
  add_op(b, r);
  Operator a("assign");
  a.set_input("X", {"Y"}).set_output("Out", {"X"});
  add_op(b, a);
  auto x = random_tensor<float>({2, 3}, -1, 1, 1);
  auto x_copy = x.clone();
  auto y = random_tensor<float>({2, 3}, -1, 1, 2);
  Scope scope;
  Executor exe;
  auto got = exe.run(p, scope, {{"X", x}, {"Y", y}}, {"Out", "X"});
  check_close(got[0], x_copy.view({3, 2}), 0, 0, "Out after X was overwritten");
  check_close(got[1], y, 0, 0, "X");
  check_close(x, x_copy, 0, 0, "the fed tensor");
  // A second run with another X leaves the first run's fetched Out alone.
  auto x2 = random_tensor<float>({2, 3}, -1, 1, 3);
  auto got2 = exe.run(p, scope, {{"X", x2}, {"Y", y}}, {"Out"});
  check_close(got[0], x_copy.view({3, 2}), 0, 0, "first Out after the second run");
  check_close(got2[0], x2.view({3, 2}), 0, 0, "second Out");
}

TEST_CASE("flatten: [prod(d[:axis]), prod(d[axis:])] for every axis") {
  auto x = random_tensor<double>({2, 3, 4, 5});
  for (int axis = 0; axis <= 4; ++axis) {
    auto out = OpTest("flatten").input("X", x).attr("axis", axis).run()["Out"];
    int64_t rows = x.shape().numel(0, axis);
    REQUIRE(out.shape() == Shape{rows, 120 / rows});
    check_close(out, x.view({rows, 120 / rows}), 0, 0, "flatten");
  }
  CHECK(inferred(OpTest("flatten").input("X", x).unknown_batch()) == Shape{-1, 60});
  CHECK(inferred(OpTest("flatten").input("X", x).attr("axis", 2).unknown_batch()) == Shape{-1, 20});
  CHECK(OpTest("flatten").input("X", random_tensor<float>({0, 4})).run()["Out"].shape() == Shape{0, 4});
}

TEST_CASE("flatten: grad (f64) and axis out of range") {
  OpTest("flatten").input("X", random_tensor<double>({2, 3, 2})).attr("axis", 2).check_grad({"X"}, {"Out"});
  auto m = error_of([] { OpTest("flatten").input("X", random_tensor<float>({2, 3})).attr("axis", 3).build(); });
  CHECK(m.find("flatten") != std::string::npos);
  CHECK(m.find("axis = 3") != std::string::npos);
}

TEST_CASE("squeeze: named axes, negative axes, and all dims of 1") {
  auto x = random_tensor<float>({3, 1, 4, 1});
  CHECK(OpTest("squeeze").input("X", x).attr("axes", std::vector<int32_t>{1}).run()["Out"].shape() == Shape{3, 4, 1});
  CHECK(OpTest("squeeze").input("X", x).attr("axes", std::vector<int32_t>{-1}).run()["Out"].shape() == Shape{3, 1, 4});
  auto all = OpTest("squeeze").input("X", x).run()["Out"];
  CHECK(all.shape() == Shape{3, 4});
  check_close(all, x.view({3, 4}), 0, 0, "squeeze");
  CHECK(inferred(OpTest("squeeze").input("X", x).attr("axes", std::vector<int32_t>{1, 3}).unknown_batch()) == Shape{-1, 4});
  OpTest("squeeze").input("X", random_tensor<double>({2, 1, 3})).attr("axes", std::vector<int32_t>{1}).check_grad({"X"}, {"Out"});
}

TEST_CASE("squeeze: a dim that is not 1, or an axis out of range, is an oar::Error") {
  auto x = random_tensor<float>({3, 1, 4});
  auto m = error_of([&] { OpTest("squeeze").input("X", x).attr("axes", std::vector<int32_t>{2}).build(); });
  CHECK(m.find("squeeze") != std::string::npos);
  CHECK(m.find("dim 2 of X [3, 1, 4]") != std::string::npos);
  auto m2 = error_of([&] { OpTest("squeeze").input("X", x).attr("axes", std::vector<int32_t>{3}).build(); });
  CHECK(m2.find("out of range") != std::string::npos);
}

TEST_CASE("unsqueeze: inserts dims of 1 in order; grad (f64)") {
  auto x = random_tensor<double>({3, 4});
  CHECK(OpTest("unsqueeze").input("X", x).attr("axes", std::vector<int32_t>{0}).run()["Out"].shape() == Shape{1, 3, 4});
  CHECK(OpTest("unsqueeze").input("X", x).attr("axes", std::vector<int32_t>{0, -1}).run()["Out"].shape() == Shape{1, 3, 4, 1});
  CHECK(OpTest("unsqueeze").input("X", x).attr("axes", std::vector<int32_t>{1, 2}).run()["Out"].shape() == Shape{3, 1, 1, 4});
  auto out = OpTest("unsqueeze").input("X", x).attr("axes", std::vector<int32_t>{2}).run()["Out"];
  check_close(out, x.view({3, 4, 1}), 0, 0, "unsqueeze");
  CHECK(inferred(OpTest("unsqueeze").input("X", x).attr("axes", std::vector<int32_t>{1}).unknown_batch()) == Shape{-1, 1, 4});
  OpTest("unsqueeze").input("X", x).attr("axes", std::vector<int32_t>{1}).check_grad({"X"}, {"Out"});
  auto m = error_of([&] { OpTest("unsqueeze").input("X", x).attr("axes", std::vector<int32_t>{4}).build(); });
  CHECK(m.find("unsqueeze") != std::string::npos);
  CHECK(m.find("axes entry 4 is out of range") != std::string::npos);
}
