// tests/ops/sign.cpp: sign: forward on floats and integers, zeros and NaN.
#include "pch.hpp"
#include "support/op_check.hpp"

using namespace oar;
using namespace oar::test;

TEST_CASE_TEMPLATE("sign: matches a plain loop", T, float, double) {
  for (int64_t n : {1, 3, 17, 64, 100000}) {
    auto x = random_tensor<T>({n}, -1, 1, uint64_t(n));
    auto want = make_tensor<double>({n}, [&](int64_t i) { double v = x.get(i); return v > 0 ? 1.0 : v < 0 ? -1.0 : 0.0; });
    check_close(to_f64(OpTest("sign").input("X", x).run()["Out"]), want, 0, 0, "sign");
  }
}

TEST_CASE("sign: zero, NaN and integers") {
  auto o = OpTest("sign").input("X", Tensor::from<float>({0.f, std::nanf(""), -INFINITY, 3.f})).run()["Out"];
  CHECK(o.get(0) == 0.0);
  CHECK(std::isnan(o.get(1)));
  CHECK(o.get(2) == -1.0);
  CHECK(o.get(3) == 1.0);
  CHECK(OpTest("sign").input("X", Tensor::from<int32_t>({-5, 0, 7})).run()["Out"].to_vector<int32_t>() == std::vector<int32_t>{-1, 0, 1});
  CHECK(!op_def("sign").grad);
}
