// tests/ops/transpose.cpp: transpose against index arithmetic, grads and errors.
#include "pch.hpp"
#include "support/op_check.hpp"

using namespace oar;
using namespace oar::test;

namespace {
/// out[o] = x[i] where o's multi-index is i's permuted by perm.
Tensor naive_transpose(const Tensor& x, const std::vector<int32_t>& perm) {
  const Shape& s = x.shape();
  int r = s.rank();
  Shape os;
  for (int p : perm) os.push_back(s[p]);
  std::vector<double> out(static_cast<size_t>(x.numel()));
  std::vector<int64_t> idx(static_cast<size_t>(r));
  for (int64_t i = 0; i < x.numel(); ++i) {
    int64_t rem = i;
    for (int d = r - 1; d >= 0; --d) idx[size_t(d)] = rem % s[d], rem /= s[d];
    int64_t o = 0;
    for (int k = 0; k < r; ++k) o = o * os[k] + idx[size_t(perm[size_t(k)])];
    out[size_t(o)] = x.get(i);
  }
  return Tensor::from<double>(out, os);
}
}  // namespace

TEST_CASE_TEMPLATE("transpose: matches index arithmetic for 2-D to 4-D permutations", T, float, double, int32_t, int64_t) {
  for (int64_t n : {1, 3, 17, 64}) {
    auto x2 = random_tensor<T>({n, 5}, -9, 9);
    check_close(to_f64(OpTest("transpose").input("X", x2).attr("axis", std::vector<int32_t>{1, 0}).run()["Out"]), naive_transpose(x2, {1, 0}), 0, 0, "2-D");
    auto x4 = random_tensor<T>({n, 3, 4, 2}, -9, 9);
    for (auto perm : {std::vector<int32_t>{0, 2, 3, 1}, {3, 1, 0, 2}, {0, 1, 2, 3}, {1, 0, 2, 3}}) {
      auto out = OpTest("transpose").input("X", x4).attr("axis", perm).run()["Out"];
      check_close(to_f64(out), naive_transpose(x4, perm), 0, 0, "4-D");
    }
  }
  auto big = random_tensor<T>({300, 257}, -9, 9);
  check_close(to_f64(OpTest("transpose").input("X", big).attr("axis", std::vector<int32_t>{1, 0}).run()["Out"]), naive_transpose(big, {1, 0}), 0, 0, "big");
}

TEST_CASE("transpose: build-time shape carries the unknown batch to its new place") {
  OpTest t("transpose");
  t.input("X", random_tensor<float>({5, 3, 4})).attr("axis", std::vector<int32_t>{1, 0, 2}).unknown_batch();
  CHECK(t.build().global_block().var("Out_0").shape() == Shape{3, -1, 4});
  CHECK(t.run()["Out"].shape() == Shape{3, 5, 4});
  CHECK(OpTest("transpose").input("X", random_tensor<float>({0, 3})).attr("axis", std::vector<int32_t>{1, 0}).run()["Out"].shape() == Shape{3, 0});
}

TEST_CASE("transpose: grad (f64)") {
  OpTest("transpose").input("X", random_tensor<double>({2, 3, 4})).attr("axis", std::vector<int32_t>{2, 0, 1}).check_grad({"X"}, {"Out"});
}

TEST_CASE("transpose: an axis that is not a permutation is an oar::Error") {
  auto x = random_tensor<float>({2, 3});
  auto m = error_of([&] { OpTest("transpose").input("X", x).attr("axis", std::vector<int32_t>{0, 0}).build(); });
  CHECK(m.find("transpose") != std::string::npos);
  CHECK(m.find("not a permutation") != std::string::npos);
  auto m2 = error_of([&] { OpTest("transpose").input("X", x).attr("axis", std::vector<int32_t>{0, 1, 2}).build(); });
  CHECK(m2.find("[2, 3]") != std::string::npos);
}
