// tests/ops/fill_zeros_like.cpp: fill_zeros_like: zeros of X's shape and dtype, whatever X holds.
#include "pch.hpp"
#include "support/op_check.hpp"

using namespace oar;
using namespace oar::test;

TEST_CASE("fill_zeros_like: zeros of X's shape and dtype") {
  for (int64_t n : {1, 3, 17, 64, 100000}) {
    auto out = OpTest("fill_zeros_like").input("X", random_tensor<float>({n, 2}, 1, 2)).unknown_batch().run()["Out"];
    REQUIRE(out.shape() == Shape{n, 2});
    for (float v : out.span<float>()) REQUIRE(v == 0.0f);
  }
  auto d = OpTest("fill_zeros_like").input("X", Tensor::from<double>({std::nan(""), 1})).run()["Out"];
  CHECK(d.to_vector<double>() == std::vector<double>{0, 0});
  auto i = OpTest("fill_zeros_like").input("X", Tensor::from<int64_t>({4, 5, 6})).run()["Out"];
  CHECK(i.to_vector<int64_t>() == std::vector<int64_t>{0, 0, 0});
  CHECK(OpTest("fill_zeros_like").input("X", Tensor(Shape{0, 3}, f32)).run()["Out"].shape() == Shape{0, 3});
  CHECK(!op_def("fill_zeros_like").grad);
}
