// tests/ops/arg_max.cpp: arg_max, arg_min and top_k against plain loops, ties, NaN, and errors.
#include "pch.hpp"
#include "support/op_check.hpp"

using namespace oar;
using namespace oar::test;

namespace {
/// Index of the max (min) along `axis` of a 3-D tensor, first on ties.
Tensor naive_arg(const Tensor& x, int axis, bool max) {
  const Shape& s = x.shape();
  int64_t outer = s.numel(0, axis), n = s[axis], inner = s.numel(axis + 1, 3);
  std::vector<int64_t> out;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      int64_t best = 0;
      for (int64_t j = 1; j < n; ++j) {
        double v = x.get((o * n + j) * inner + i), b = x.get((o * n + best) * inner + i);
        if (max ? v > b : v < b) best = j;
      }
      out.push_back(best);
    }
  Shape os = s;
  os.erase(axis);
  return Tensor::from<int64_t>(out, os);
}
}  // namespace

TEST_CASE_TEMPLATE("arg_max / arg_min: match plain loops on every axis (ties: first index)", T, float, double, int32_t, int64_t) {
  for (int64_t n : {1, 3, 17, 64}) {
    auto x = random_tensor<T>({n, 4, 6}, -3, 3);  // small integer range: many ties
    for (int axis : {0, 1, 2, -1}) {
      int a = axis < 0 ? axis + 3 : axis;
      auto mx = OpTest("arg_max").input("X", x).attr("axis", int64_t(axis)).run()["Out"];
      REQUIRE(mx.dtype() == i64);
      check_close(mx, naive_arg(x, a, true), 0, 0, "arg_max");
      auto mn = OpTest("arg_min").input("X", x).attr("axis", int64_t(axis)).run()["Out"];
      check_close(mn, naive_arg(x, a, false), 0, 0, "arg_min");
    }
  }
  OpTest t("arg_max");
  t.input("X", random_tensor<float>({5, 7})).attr("axis", int64_t(1)).attr("keepdims", true).unknown_batch();
  CHECK(t.build().global_block().var("Out_0").shape() == Shape{-1, 1});
  CHECK(t.run()["Out"].shape() == Shape{5, 1});
}

TEST_CASE("arg_max: NaN counts as largest; errors") {
  auto x = Tensor::from<float>({1, NAN, 3, 2, 5, 5}, Shape{2, 3});
  CHECK(OpTest("arg_max").input("X", x).attr("axis", int64_t(1)).run()["Out"].to_vector<int64_t>() == std::vector<int64_t>{1, 1});
  auto m = error_of([] { OpTest("arg_max").input("X", random_tensor<float>({2, 3})).attr("axis", int64_t(2)).build(); });
  test::check_contains(m, {"arg_max", "axis = 2 is out of range", "[2, 3]"});
}

TEST_CASE_TEMPLATE("top_k: the k largest of each row, descending, ties by lower index", T, float, double, int32_t, int64_t) {
  for (int64_t rows : {1, 3, 17, 64, 500}) {
    auto x = random_tensor<T>({rows, 20}, -5, 5, uint64_t(rows));
    for (int k : {1, 3, 20}) {
      OpTest t("top_k");
      t.input("X", x).attr("k", k).unknown_batch();
      CHECK(t.build().global_block().var("Out_0").shape() == Shape{-1, k});
      auto out = t.run();
      const auto &vals = out["Out"], &ind = out["Indices"];
      REQUIRE(vals.shape() == Shape{rows, k});
      REQUIRE(ind.dtype() == i64);
      for (int64_t r = 0; r < rows; ++r) {
        std::vector<int64_t> order(20);
        std::iota(order.begin(), order.end(), 0);
        std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return x.get(r * 20 + a) > x.get(r * 20 + b); });
        for (int j = 0; j < k; ++j) {
          REQUIRE(ind.get(r * k + j) == double(order[size_t(j)]));
          REQUIRE(vals.get(r * k + j) == x.get(r * 20 + order[size_t(j)]));
        }
      }
    }
  }
}

TEST_CASE("top_k: rank 3, NaN first, empty batch, k too large") {
  auto x = Tensor::from<double>({1, NAN, 3, 2, 2, 0, 9, -1}, Shape{2, 1, 4});
  auto out = OpTest("top_k").input("X", x).attr("k", 2).run();
  CHECK(out["Indices"].shape() == Shape{2, 1, 2});
  CHECK(out["Indices"].to_vector<int64_t>() == std::vector<int64_t>{1, 2, 2, 0});
  CHECK(std::isnan(out["Out"].get(0)));
  CHECK(out["Out"].get(3) == 2.0);
  CHECK(OpTest("top_k").input("X", random_tensor<float>({0, 4})).attr("k", 2).run()["Out"].shape() == Shape{0, 2});
  auto m = error_of([] { OpTest("top_k").input("X", random_tensor<float>({2, 3})).attr("k", 4).build(); });
  test::check_contains(m, {"top_k", "k = 4", "[2, 3]"});
}
