// tests/ops/amp.cpp: cast to and from f16 / bf16, check_finite_and_unscale and update_loss_scaling (the ops of
// mixed-precision training) through the op harness on the CPU.
#include "pch.hpp"

#include <cmath>

#include "support/op_check.hpp"

using namespace oar;
using namespace oar::test;

TEST_CASE("cast: f32 / f64 / i32 to f16 and bf16 round to nearest even, and back exactly") {
  Tensor x = make_tensor<float>({6, 7}, [](int64_t i) { return i == 5 ? 1e6 : i == 6 ? -1e-9 : (double(i) - 20) * 0.337; });
  for (DType t : {f16, bf16}) {
    CAPTURE(name(t));
    auto h = OpTest("cast").input("X", x).attr("in_dtype", int32_t(f32)).attr("out_dtype", int32_t(t)).run()["Out"];
    REQUIRE(h.dtype() == t);
    for (int64_t i = 0; i < x.numel(); ++i) {
      const float v = x.data<float>()[i];
      const float want = t == f16 ? to_float(to_half(v)) : to_float(to_bfloat16(v));
      CHECK(float(h.get(i)) == want);
    }
    CHECK((t == f16 ? std::isinf(h.get(5)) : h.get(5) == doctest::Approx(1e6).epsilon(0.01)));  // f16 overflows past 65504
    auto back = OpTest("cast").input("X", h).attr("in_dtype", int32_t(t)).attr("out_dtype", int32_t(f32)).run()["Out"];
    for (int64_t i = 0; i < x.numel(); ++i) CHECK(back.get(i) == h.get(i));
    auto d = OpTest("cast").input("X", h).attr("in_dtype", int32_t(t)).attr("out_dtype", int32_t(f64)).run()["Out"];
    for (int64_t i = 0; i < x.numel(); ++i) CHECK(d.get(i) == h.get(i));
  }
  Tensor n = make_tensor<int32_t>({5}, [](int64_t i) { return i * 1000 - 2000; });
  auto h = OpTest("cast").input("X", n).attr("in_dtype", int32_t(i32)).attr("out_dtype", int32_t(f16)).run()["Out"];
  for (int64_t i = 0; i < 5; ++i) CHECK(h.get(i) == double(i * 1000 - 2000));
}

TEST_CASE("cast: the gradient of a cast to f16 is a cast back to f32") {
  Operator fwd{"cast"};
  fwd.set_input("X", {"x"}).set_output("Out", {"y"}).set_attr("in_dtype", int32_t(f32)).set_attr("out_dtype", int32_t(f16));
  Program p;
  Block& b = p.global_block();
  b.create_var("x", {.dtype = f32, .shape = Shape{3}});
  add_op(b, fwd);
  CHECK(b.var("y").dtype() == f16);
  CHECK(error_of([&] {
          Operator bad{"cast"};
          bad.set_input("X", {"x"}).set_output("Out", {"z"}).set_attr("in_dtype", int32_t(f32)).set_attr("out_dtype", int32_t(7));
          add_op(b, bad);
        }).find("22 (bf16)") != std::string::npos);
}

TEST_CASE_TEMPLATE("check_finite_and_unscale: every gradient divided by the scale; FoundInfinite on inf or NaN anywhere", T, float, double) {
  Tensor scale = Tensor::from<float>({1024.f}, Shape{1});
  Tensor a = random_tensor<T>({4, 5}, -100, 100, 3), b = random_tensor<T>({7}, -100, 100, 4);
  auto out = OpTest("check_finite_and_unscale").inputs("X", {a, b}).input("Scale", scale).outputs("Out", 2).run();
  CHECK(out["FoundInfinite"].get(0) == 0);
  for (int64_t i = 0; i < a.numel(); ++i) CHECK(out["Out"].get(i) == doctest::Approx(a.get(i) / 1024).epsilon(1e-7));
  for (int64_t i = 0; i < b.numel(); ++i) CHECK(out["Out#1"].get(i) == doctest::Approx(b.get(i) / 1024).epsilon(1e-7));
  for (double bad : {double(INFINITY), -double(INFINITY), double(NAN)}) {
    Tensor c = b.to(cpu(), true);
    c.data<T>()[6] = T(bad);
    auto o = OpTest("check_finite_and_unscale").inputs("X", {a, c}).input("Scale", scale).outputs("Out", 2).run();
    CHECK(o["FoundInfinite"].get(0) == 1);
  }
}

TEST_CASE("update_loss_scaling: grows after incr_every_n_steps clean steps, shrinks (not below 1) after decr_every_n_nan_or_inf bad ones") {
  float s = 8.f;
  int32_t good = 0, bad = 0;
  // Plain reference: the rule as ops/amp.hpp states it.
  auto reference = [](bool found, float& sc, int32_t& g, int32_t& b) {
    if (found) {
      g = 0;
      if (++b == 2) sc = std::max(1.f, sc * 0.25f), b = 0;
    } else {
      b = 0;
      if (++g == 3) sc = sc * 4.f, g = 0;
    }
  };
  float rs = s;
  int32_t rg = 0, rb = 0;
  const bool pattern[] = {false, false, false, true, false, true, true, true, true, true, true, true, true, false, false, false, false};
  for (bool found : pattern) {
    auto o = OpTest("update_loss_scaling")
                 .input("FoundInfinite", Tensor::from<bool>({found}, Shape{1}))
                 .input("PrevLossScaling", Tensor::from<float>({s}, Shape{1}))
                 .input("InGoodSteps", Tensor::from<int32_t>({good}, Shape{1}))
                 .input("InBadSteps", Tensor::from<int32_t>({bad}, Shape{1}))
                 .attr("incr_every_n_steps", int32_t(3)).attr("decr_every_n_nan_or_inf", int32_t(2))
                 .attr("incr_ratio", 4.f).attr("decr_ratio", 0.25f)
                 .run();
    s = float(o["LossScaling"].get(0)), good = int32_t(o["OutGoodSteps"].get(0)), bad = int32_t(o["OutBadSteps"].get(0));
    reference(found, rs, rg, rb);
    CHECK(s == rs);
    CHECK(good == rg);
    CHECK(bad == rb);
  }
  CHECK(s == 4.f);  // 8 -> 32 -> 8 -> 2 -> 1 (clamped) -> 1 -> 1 -> 4
}

TEST_CASE("update_loss_scaling: a scale that would overflow to inf is kept") {
  auto o = OpTest("update_loss_scaling")
               .input("FoundInfinite", Tensor::from<bool>({false}, Shape{1}))
               .input("PrevLossScaling", Tensor::from<float>({3e38f}, Shape{1}))
               .input("InGoodSteps", Tensor::from<int32_t>({0}, Shape{1}))
               .input("InBadSteps", Tensor::from<int32_t>({0}, Shape{1}))
               .attr("incr_every_n_steps", int32_t(1))
               .run();
  CHECK(o["LossScaling"].get(0) == doctest::Approx(3e38));
  CHECK(o["OutGoodSteps"].get(0) == 0);
}
