// tests/ops/one_hot.cpp: one_hot rows, dtypes, build-time shapes and the out-of-range error.
#include "pch.hpp"
#include "support/op_check.hpp"

using namespace oar;
using namespace oar::test;

TEST_CASE("one_hot: one 1 per row at the label, for f32/f64/i32/i64 outputs and i32/i64 labels") {
  for (int64_t n : {1, 3, 17, 64, 1000}) {
    auto x = random_tensor<int64_t>({n, 1}, 0, 10, uint64_t(n));
    auto x32 = random_tensor<int32_t>({n, 1}, 0, 10, uint64_t(n));
    for (DType t : {f32, f64, i32, i64}) {
      for (const Tensor* lab : {&x, &x32}) {
        OpTest op("one_hot");
        op.input("X", *lab).attr("depth", 10).attr("dtype", int32_t(t)).unknown_batch();
        CHECK(op.build().global_block().var("Out_0").shape() == Shape{-1, 10});
        auto out = op.run()["Out"];
        REQUIRE(out.shape() == Shape{n, 10});
        REQUIRE(out.dtype() == t);
        for (int64_t i = 0; i < n; ++i)
          for (int64_t j = 0; j < 10; ++j) REQUIRE(out.get(i * 10 + j) == (j == int64_t(lab->get(i)) ? 1.0 : 0.0));
      }
    }
  }
}

TEST_CASE("one_hot: keeps LoD; empty batch") {
  LoDTensor x(Tensor::from<int64_t>({0, 2, 1}, Shape{3, 1}), {{0, 2, 3}});
  auto out = OpTest("one_hot").input("X", x).attr("depth", 3).run()["Out"];
  CHECK(out.lod() == x.lod());
  CHECK(OpTest("one_hot").input("X", Tensor(Shape{0, 1}, i64)).attr("depth", 4).run()["Out"].shape() == Shape{0, 4});
}

TEST_CASE("one_hot: a label outside [0, depth) is an oar::Error naming it") {
  auto m = error_of([] { OpTest("one_hot").input("X", Tensor::from<int64_t>({1, 5, 2}, Shape{3, 1})).attr("depth", 4).run(); });
  CHECK(m.find("one_hot") != std::string::npos);
  CHECK(m.find("X[1] = 5 is out of range [0, 4)") != std::string::npos);
  auto m2 = error_of([] { OpTest("one_hot").input("X", Tensor::from<int64_t>({-2}, Shape{1, 1})).attr("depth", 4).run(); });
  CHECK(m2.find("X[0] = -2") != std::string::npos);
  auto m3 = error_of([] { OpTest("one_hot").input("X", random_tensor<float>({3, 1})).attr("depth", 4).build(); });
  CHECK(m3.find("X must be i32 or i64") != std::string::npos);
  auto m4 = error_of([] { OpTest("one_hot").input("X", Tensor::from<int64_t>({1, 2}, Shape{1, 2})).attr("depth", 4).build(); });
  CHECK(m4.find("[1, 2]") != std::string::npos);
}
