// tests/ops/scale.cpp: scale with bias before and after the scale: forward, integers, grad.
#include "pch.hpp"
#include "support/op_check.hpp"

using namespace oar;
using namespace oar::test;

TEST_CASE_TEMPLATE("scale: scale * x + bias and scale * (x + bias) match a plain loop", T, float, double) {
  for (int64_t n : {1, 3, 17, 64, 100000})
    for (bool after : {true, false}) {
      auto x = random_tensor<T>({n}, -1, 1, uint64_t(n));
      auto out = OpTest("scale").input("X", x).attr("scale", 2.5f).attr("bias", -0.5f).attr("bias_after_scale", after).run()["Out"];
      auto want = make_tensor<double>({n}, [&](int64_t i) { return after ? 2.5 * x.get(i) - 0.5 : 2.5 * (x.get(i) - 0.5); });
      check_close(to_f64(out), want, 1e-6, 1e-6, "scale");
    }
}

TEST_CASE("scale: defaults copy X; integers scale too; LoD is kept") {
  auto x = Tensor::from<double>({1, -2, 3});
  CHECK(OpTest("scale").input("X", x).run()["Out"].to_vector<double>() == std::vector<double>{1, -2, 3});
  auto i = OpTest("scale").input("X", Tensor::from<int64_t>({1, -2, 3})).attr("scale", 3.0f).attr("bias", 1.0f).run()["Out"];
  CHECK(i.to_vector<int64_t>() == std::vector<int64_t>{4, -5, 10});
  LoDTensor l(random_tensor<float>({3, 2}), {{0, 2, 3}});
  CHECK(OpTest("scale").input("X", l).run()["Out"].lod() == LoD{{0, 2, 3}});
}

TEST_CASE("scale: grad is scale * Out@GRAD (f64)") {
  for (bool after : {true, false})
    OpTest("scale").input("X", random_tensor<double>({3, 4})).attr("scale", -1.5f).attr("bias", 2.0f).attr("bias_after_scale", after).check_grad({"X"}, {"Out"});
}
