// tests/ops/squared_l2_norm.cpp: squared_l2_norm: forward and grad.
#include "pch.hpp"
#include "support/op_check.hpp"

using namespace oar;
using namespace oar::test;

TEST_CASE_TEMPLATE("squared_l2_norm: matches a plain loop (sizes 1..100000)", T, float, double) {
  for (int64_t n : {1, 3, 17, 64, 100000}) {
    auto x = random_tensor<T>({n}, -1, 1, uint64_t(n));
    double s = 0;
    for (int64_t i = 0; i < n; ++i) s += x.get(i) * x.get(i);
    auto out = OpTest("squared_l2_norm").input("X", x).run()["Out"];
    REQUIRE(out.shape() == Shape{1});
    CHECK(out.get(0) == doctest::Approx(s).epsilon(1e-6));
  }
  CHECK(OpTest("squared_l2_norm").input("X", Tensor(Shape{0, 2}, f32)).run()["Out"].get(0) == 0.0);
}

TEST_CASE("squared_l2_norm: grad matches finite differences (f64)") {
  OpTest("squared_l2_norm").input("X", random_tensor<double>({3, 4})).check_grad({"X"}, {"Out"});
}
