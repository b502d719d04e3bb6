// tests/ops/mean.cpp: mean of all elements: forward, grad, empty input.
#include "pch.hpp"
#include "support/op_check.hpp"

using namespace oar;
using namespace oar::test;

TEST_CASE_TEMPLATE("mean: matches a plain loop (sizes 1..100000)", T, float, double) {
  for (int64_t n : {1, 3, 17, 64, 100000}) {
    auto x = random_tensor<T>({n, 2}, -1, 1, uint64_t(n));
    auto out = OpTest("mean").input("X", x).unknown_batch().run()["Out"];
    REQUIRE(out.shape() == Shape{1});
    double s = 0;
    for (int64_t i = 0; i < x.numel(); ++i) s += x.get(i);
    CHECK(out.get(0) == doctest::Approx(s / double(x.numel())).epsilon(1e-6));
  }
}

TEST_CASE("mean: grad matches finite differences (f64)") {
  OpTest("mean").input("X", random_tensor<double>({3, 4})).check_grad({"X"}, {"Out"});
}

TEST_CASE("mean: an empty X gives NaN, an integer X is refused") {
  CHECK(std::isnan(OpTest("mean").input("X", Tensor(Shape{0, 3}, f32)).run()["Out"].get(0)));
  auto msg = error_of([] { OpTest("mean").input("X", Tensor::from<int32_t>({1, 2})).build(); });
  CHECK(msg.find("floating-point") != std::string::npos);
}
