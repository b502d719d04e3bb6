// tests/ops/accuracy.cpp: accuracy (top-k hit rate) through the op harness.
#include "pch.hpp"
#include "support/op_check.hpp"

using namespace oar;
using namespace oar::test;

TEST_CASE("accuracy: counts rows whose label is among the k indices") {
  for (int64_t n : {1, 3, 17, 64, 1000})
    for (int64_t k : {1, 3}) {
      auto ind = random_tensor<int64_t>({n, k}, 0, 10, uint64_t(n * k));
      auto label = random_tensor<int64_t>({n, 1}, 0, 10, uint64_t(n + k));
      int64_t correct = 0;
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < k; ++j)
          if (ind.get(i * k + j) == label.get(i)) {
            ++correct;
            break;
          }
      auto out = OpTest("accuracy").input("Out", random_tensor<float>({n, k})).input("Indices", ind).input("Label", label).unknown_batch().run();
      CHECK(out["Correct"].dtype() == i32);
      CHECK(out["Correct"].get(0) == double(correct));
      CHECK(out["Total"].get(0) == double(n));
      CHECK(out["Accuracy"].dtype() == f32);
      CHECK(out["Accuracy"].get(0) == doctest::Approx(double(correct) / double(n)));
    }
}

TEST_CASE("accuracy: a repeated index counts once; i32 labels and indices work") {
  auto ind = Tensor::from<int32_t>({2, 2, 1, 0, 3, 3}, {3, 2});
  auto label = Tensor::from<int32_t>({2, 1, 0}, {3, 1});
  auto out = OpTest("accuracy").input("Out", random_tensor<double>({3, 2})).input("Indices", ind).input("Label", label).run();
  CHECK(out["Correct"].get(0) == 2);
  CHECK(out["Accuracy"].get(0) == doctest::Approx(2.0 / 3.0));
}

TEST_CASE("accuracy: an empty batch gives 0 / 0 = 0 without crashing") {
  auto out = OpTest("accuracy").input("Out", Tensor(Shape{0, 1}, f32)).input("Indices", Tensor(Shape{0, 1}, i64)).input("Label", Tensor(Shape{0, 1}, i64)).run();
  CHECK(out["Accuracy"].get(0) == 0.0);
  CHECK(out["Total"].get(0) == 0.0);
}

TEST_CASE("accuracy: mismatched batch sizes are an oar::Error naming the shapes") {
  auto msg = error_of([] {
    OpTest("accuracy").input("Out", random_tensor<float>({4, 2})).input("Indices", random_tensor<int64_t>({4, 2}, 0, 5))
        .input("Label", random_tensor<int64_t>({3, 1}, 0, 5)).build();
  });
  test::check_contains(msg, {"accuracy", "[3, 1]", "[4, 2]"});
}
