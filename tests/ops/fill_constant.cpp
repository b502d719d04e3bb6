// tests/ops/fill_constant.cpp: fill_constant and fill_constant_batch_size_like through the op harness.
#include "pch.hpp"
#include "support/op_check.hpp"

using namespace oar;
using namespace oar::test;

TEST_CASE("fill_constant: every dtype holds the value in every element") {
  for (int64_t n : {1, 3, 17, 64, 10000}) {
    for (DType t : {f32, f64, i32, i64}) {
      auto out = OpTest("fill_constant").attr("shape", std::vector<int64_t>{n, 2}).attr("dtype", int32_t(t)).attr("value", 3.0f).run();
      const auto& o = out["Out"];
      REQUIRE(o.shape() == Shape{n, 2});
      REQUIRE(o.dtype() == t);
      for (int64_t i = 0; i < o.numel(); ++i) REQUIRE(o.get(i) == 3.0);
    }
  }
  auto b = OpTest("fill_constant").attr("shape", std::vector<int32_t>{4}).attr("dtype", int32_t(boolean)).attr("value", 1.0f).run()["Out"];
  CHECK(b.dtype() == boolean);
  for (bool v : b.to_vector<bool>()) CHECK(v);
  auto z = OpTest("fill_constant").attr("shape", std::vector<int32_t>{2}).attr("dtype", int32_t(boolean)).run()["Out"];
  for (bool v : z.to_vector<bool>()) CHECK(!v);
}

TEST_CASE("fill_constant: defaults to f32, keeps fractions and converts to integers by truncation") {
  auto o = OpTest("fill_constant").attr("shape", std::vector<int64_t>{2, 3}).attr("value", -0.25f).run()["Out"];
  CHECK(o.dtype() == f32);
  for (float v : o.to_vector<float>()) CHECK(v == -0.25f);
  auto i = OpTest("fill_constant").attr("shape", std::vector<int64_t>{3}).attr("dtype", int32_t(i64)).attr("value", 7.9f).run()["Out"];
  for (int64_t v : i.to_vector<int64_t>()) CHECK(v == 7);
}

TEST_CASE("fill_constant: an empty shape dim gives an empty tensor, NaN and Inf values are kept") {
  auto e = OpTest("fill_constant").attr("shape", std::vector<int64_t>{0, 4}).run()["Out"];
  CHECK(e.shape() == Shape{0, 4});
  auto n = OpTest("fill_constant").attr("shape", std::vector<int64_t>{2}).attr("value", std::nanf("")).run()["Out"];
  CHECK(std::isnan(n.get(0)));
  auto inf = OpTest("fill_constant").attr("shape", std::vector<int64_t>{2}).attr("dtype", 6).attr("value", INFINITY).run()["Out"];
  CHECK(inf.get(1) == INFINITY);
}

TEST_CASE("fill_constant: bad shapes and dtypes are oar::Errors naming them") {
  auto m1 = error_of([] { OpTest("fill_constant").attr("shape", std::vector<int64_t>{2, -1}).build(); });
  CHECK(m1.find("fill_constant") != std::string::npos);
  CHECK(m1.find("[2, -1]") != std::string::npos);
  auto m2 = error_of([] { OpTest("fill_constant").attr("shape", std::vector<int64_t>{2}).attr("dtype", 42).build(); });
  CHECK(m2.find("dtype") != std::string::npos);
  CHECK(m2.find("42") != std::string::npos);
  auto m3 = error_of([] { OpTest("fill_constant").attr("dtype", 5).build(); });
  CHECK(m3.find("shape") != std::string::npos);
}

TEST_CASE("fill_constant_batch_size_like: takes the batch from Input, -1 at build time") {
  for (int64_t n : {1, 3, 17, 64}) {
    auto x = random_tensor<float>({n, 7});
    OpTest t("fill_constant_batch_size_like");
    t.input("Input", x).attr("shape", std::vector<int32_t>{-1, 5}).attr("dtype", 6).attr("value", 2.5f).unknown_batch();
    Program p = t.build();
    CHECK(p.global_block().var("Out_0").shape() == Shape{-1, 5});
    CHECK(p.global_block().var("Out_0").dtype() == f64);
    auto o = t.run()["Out"];
    REQUIRE(o.shape() == Shape{n, 5});
    for (int64_t i = 0; i < o.numel(); ++i) REQUIRE(o.get(i) == 2.5);
  }
}

TEST_CASE("fill_constant_batch_size_like: input_dim_idx and output_dim_idx pick the dims") {
  auto x = random_tensor<double>({4, 6, 2});
  auto o = OpTest("fill_constant_batch_size_like").input("Input", x).attr("shape", std::vector<int32_t>{3, 0, 2})
               .attr("input_dim_idx", 1).attr("output_dim_idx", 1).attr("dtype", int32_t(i32)).attr("value", 1.0f).run()["Out"];
  CHECK(o.shape() == Shape{3, 6, 2});
  CHECK(o.dtype() == i32);
  for (int32_t v : o.to_vector<int32_t>()) CHECK(v == 1);
  auto empty = OpTest("fill_constant_batch_size_like").input("Input", random_tensor<float>({0, 3})).attr("shape", std::vector<int32_t>{-1, 2}).run()["Out"];
  CHECK(empty.shape() == Shape{0, 2});
}

TEST_CASE("fill_constant_batch_size_like: dim indices out of range are oar::Errors") {
  auto x = random_tensor<float>({4, 6});
  auto m = error_of([&] { OpTest("fill_constant_batch_size_like").input("Input", x).attr("shape", std::vector<int32_t>{-1, 2}).attr("input_dim_idx", 2).build(); });
  CHECK(m.find("input_dim_idx = 2") != std::string::npos);
  CHECK(m.find("[4, 6]") != std::string::npos);
  auto m2 = error_of([&] { OpTest("fill_constant_batch_size_like").input("Input", x).attr("shape", std::vector<int32_t>{-1, 2}).attr("output_dim_idx", 5).build(); });
  CHECK(m2.find("output_dim_idx = 5") != std::string::npos);
}
