// tests/ops/dropout.cpp: dropout (both implementations, train and test, seeding) through the op harness.
#include "pch.hpp"
#include "support/op_check.hpp"
#include "support/threads.hpp"

using namespace oar;
using namespace oar::test;

TEST_CASE_TEMPLATE("dropout: training keeps about 1 - p of the elements, out = x * mask (downgrade_in_infer)", T, float, double) {
  for (int64_t n : {1, 3, 17, 64, 100000}) {
    auto x = random_tensor<T>({n, 2}, 0.5, 2, uint64_t(n));
    auto out = OpTest("dropout").input("X", x).attr("dropout_prob", 0.3f).attr("fix_seed", true).attr("seed", 5).run();
    const auto& y = out["Out"];
    const auto& m = out["Mask"];
    CHECK(m.dtype() == x.dtype());
    int64_t kept = 0;
    for (int64_t i = 0; i < x.numel(); ++i) {
      REQUIRE((m.get(i) == 0.0 || m.get(i) == 1.0));
      kept += m.get(i) == 1.0;
      CHECK(y.get(i) == x.get(i) * m.get(i));
    }
    if (n == 100000) CHECK(double(kept) / double(x.numel()) == doctest::Approx(0.7).epsilon(0.01));
  }
}

TEST_CASE_TEMPLATE("dropout: upscale_in_train scales kept elements by 1 / (1 - p)", T, float, double) {
  auto x = random_tensor<T>({1000, 3}, 0.5, 2, 3);
  auto out = OpTest("dropout").input("X", x).attr("dropout_prob", 0.25f).attr("dropout_implementation", "upscale_in_train").attr("fix_seed", true).run();
  for (int64_t i = 0; i < x.numel(); ++i)
    CHECK(out["Out"].get(i) == doctest::Approx(x.get(i) * out["Mask"].get(i) / 0.75).epsilon(1e-6));
}

TEST_CASE("dropout: is_test gives x * (1 - p) (downgrade_in_infer) or x (upscale_in_train)") {
  auto x = random_tensor<float>({17, 5}, -1, 1, 4);
  auto d = OpTest("dropout").input("X", x).attr("dropout_prob", 0.4f).attr("is_test", true).run();
  for (int64_t i = 0; i < x.numel(); ++i) CHECK(d["Out"].get(i) == doctest::Approx(x.get(i) * (1 - double(0.4f))));
  auto u = OpTest("dropout").input("X", x).attr("dropout_prob", 0.4f).attr("is_test", true).attr("dropout_implementation", "upscale_in_train").run();
  check_close(u["Out"], x, 0, 0, "upscale test");
}

TEST_CASE("dropout: p = 0 keeps everything, p = 1 drops everything") {
  auto x = random_tensor<float>({64, 3}, 0.5, 2, 4);
  check_close(OpTest("dropout").input("X", x).attr("dropout_prob", 0.f).run()["Out"], x, 0, 0, "p=0");
  for (const char* impl : {"downgrade_in_infer", "upscale_in_train"}) {
    auto out = OpTest("dropout").input("X", x).attr("dropout_prob", 1.f).attr("dropout_implementation", impl).run();
    for (int64_t i = 0; i < x.numel(); ++i) CHECK(out["Out"].get(i) == 0.0);
  }
}

TEST_CASE("dropout: fix_seed repeats the mask; the executor's seed stream varies it") {
  auto x = random_tensor<float>({300, 10}, 0.5, 2, 4);
  auto a = OpTest("dropout").input("X", x).attr("fix_seed", true).attr("seed", 7).run()["Mask"];
  auto b = OpTest("dropout").input("X", x).attr("fix_seed", true).attr("seed", 7).run()["Mask"];
  auto c = OpTest("dropout").input("X", x).attr("fix_seed", true).attr("seed", 8).run()["Mask"];
  check_close(a, b, 0, 0, "same seed");
  int64_t diff = 0;
  for (int64_t i = 0; i < a.numel(); ++i) diff += a.get(i) != c.get(i);
  CHECK(diff > 100);
  // without fix_seed two runs of one executor draw different masks
  Program p = OpTest("dropout").input("X", x).build();
  Scope scope;
  Executor exe;
  std::string xn = p.global_block().op(0).input("X")[0], mn = p.global_block().op(0).output("Mask")[0];
  auto m1 = exe.run(p, scope, {{xn, x}}, {mn})[0].clone();
  auto m2 = exe.run(p, scope, {{xn, x}}, {mn})[0].clone();
  diff = 0;
  for (int64_t i = 0; i < m1.numel(); ++i) diff += m1.get(i) != m2.get(i);
  CHECK(diff > 100);
}

TEST_CASE("dropout: the mask does not depend on the thread count") {
  auto x = random_tensor<float>({100000}, 0.5, 2, 4);
  auto mask_on = [&](int threads) {
    ThreadsForTest held(threads);
    return OpTest("dropout").input("X", x).attr("fix_seed", true).attr("seed", 3).run()["Mask"];
  };
  auto a = mask_on(1);
  auto b = mask_on(4);
  check_close(a, b, 0, 0, "mask vs threads");
}

TEST_CASE("dropout: grad matches finite differences with a fixed seed (f64)") {
  auto x = random_tensor<double>({4, 5}, -1, 1, 8);
  OpTest("dropout").input("X", x).attr("fix_seed", true).attr("seed", 11).check_grad({"X"}, {"Out"});
  OpTest("dropout").input("X", x).attr("fix_seed", true).attr("seed", 12).attr("dropout_prob", 0.3f).attr("dropout_implementation", "upscale_in_train")
      .check_grad({"X"}, {"Out"});
  OpTest("dropout").input("X", x).attr("is_test", true).attr("dropout_prob", 0.3f).check_grad({"X"}, {"Out"});
}

TEST_CASE("dropout: a bad dropout_prob or implementation is an oar::Error") {
  auto msg = error_of([] { OpTest("dropout").input("X", random_tensor<float>({3, 4})).attr("dropout_prob", 1.5f).build(); });
  test::check_contains(msg, {"dropout", "dropout_prob", "[0, 1]"});
  auto msg2 = error_of([] { OpTest("dropout").input("X", random_tensor<float>({3, 4})).attr("dropout_prob", -0.1f).build(); });
  CHECK(msg2.find("dropout_prob") != std::string::npos);
  auto msg3 = error_of([] { OpTest("dropout").input("X", random_tensor<float>({3, 4})).attr("dropout_implementation", "scale").build(); });
  CHECK(msg3.find("upscale_in_train") != std::string::npos);
}

TEST_CASE("dropout: NaN / Inf inputs pass through kept elements; empty batch works") {
  auto x = Tensor::from<float>({NAN, INFINITY, 1.f, 2.f}, {2, 2});
  auto out = OpTest("dropout").input("X", x).attr("dropout_prob", 0.f).run();
  CHECK(std::isnan(out["Out"].get(0)));
  CHECK(std::isinf(out["Out"].get(1)));
  auto e = OpTest("dropout").input("X", Tensor(Shape{0, 3}, f32)).run();
  CHECK(e["Out"].shape() == Shape{0, 3});
}
