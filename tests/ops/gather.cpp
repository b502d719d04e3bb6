// tests/ops/gather.cpp: gather (i32 and i64 indices) against plain loops, its scatter-add grad, errors.
#include "pch.hpp"
#include "support/op_check.hpp"

using namespace oar;
using namespace oar::test;

TEST_CASE_TEMPLATE("gather: Out[i] = X[Index[i]] for i32 and i64 indices", T, float, double, int32_t, int64_t) {
  for (int64_t rows : {1, 3, 17, 64, 1000}) {
    auto x = random_tensor<T>({rows, 3, 2}, -9, 9);
    for (int64_t m : {int64_t(1), int64_t(5), rows * 2}) {
      auto idx64 = random_tensor<int64_t>({m}, 0, double(rows), uint64_t(m));
      auto idx32 = random_tensor<int32_t>({m, 1}, 0, double(rows), uint64_t(m));
      for (const Tensor* idx : {&idx64, &idx32}) {
        OpTest t("gather");
        t.input("X", x).input("Index", *idx).unknown_batch();
        CHECK(t.build().global_block().var("Out_0").shape() == Shape{-1, 3, 2});
        auto out = t.run()["Out"];
        REQUIRE(out.shape() == Shape{m, 3, 2});
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = 0; j < 6; ++j) REQUIRE(out.get(i * 6 + j) == x.get(int64_t(idx->get(i)) * 6 + j));
      }
    }
  }
}

TEST_CASE("gather: grad scatter-adds, repeated indices add up (f64)") {
  auto x = random_tensor<double>({5, 3});
  OpTest("gather").input("X", x).input("Index", Tensor::from<int64_t>({4, 0, 4, 2, 4})).check_grad({"X"}, {"Out"});
  OpTest("gather").input("X", x).input("Index", Tensor::from<int32_t>({1, 1})).check_grad({"X"}, {"Out"});
  CHECK(OpTest("gather").input("X", x).input("Index", Tensor(Shape{0}, i64)).run()["Out"].shape() == Shape{0, 3});
}

TEST_CASE("gather: an index out of range is an oar::Error naming it; bad Index dtypes too") {
  auto x = random_tensor<float>({5, 3});
  auto m = error_of([&] { OpTest("gather").input("X", x).input("Index", Tensor::from<int64_t>({1, 7, 2})).run(); });
  CHECK(m.find("gather") != std::string::npos);
  CHECK(m.find("Index[1] = 7 is out of range [0, 5)") != std::string::npos);
  auto m2 = error_of([&] { OpTest("gather").input("X", x).input("Index", Tensor::from<int32_t>({-1}, Shape{1})).run(); });
  CHECK(m2.find("Index[0] = -1") != std::string::npos);
  auto m3 = error_of([&] { OpTest("gather").input("X", x).input("Index", random_tensor<float>({2})).build(); });
  CHECK(m3.find("Index must be i32 or i64") != std::string::npos);
}
