// tests/ops/mul.cpp: mul through the op harness, and the packed-right-operand product the recurrent ops use.
#include "pch.hpp"
#include "kernels/cpu/gemm.hpp"  // pack_rhs, gemm_packed
#include "support/op_check.hpp"
#include "support/threads.hpp"

using namespace oar;
using namespace oar::test;

namespace {
Tensor naive_mul(const Tensor& x, const Tensor& y, int xd, int yd) {
  int64_t m = x.shape().numel(0, xd), k = x.shape().numel(xd, x.rank()), n = y.shape().numel(yd, y.rank());
  std::vector<double> out(size_t(m * n));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t l = 0; l < k; ++l) s += x.get(i * k + l) * y.get(l * n + j);
      out[size_t(i * n + j)] = s;
    }
  Shape os = x.shape().slice(0, xd);
  for (int i = yd; i < y.rank(); ++i) os.push_back(y.dim(i));
  return Tensor::from<double>(out, os);
}
}  // namespace

TEST_CASE_TEMPLATE("mul: forward matches a plain loop", T, float, double) {
  for (int64_t m : {1, 3, 17, 64, 300}) {
    auto x = random_tensor<T>({m, 7}, -1, 1, 1);
    auto y = random_tensor<T>({7, 5}, -1, 1, 2);
    auto out = OpTest("mul").input("X", x).input("Y", y).unknown_batch().run();
    check_close(to_f64(out["Out"]), naive_mul(x, y, 1, 1), 1e-4, 1e-4, "mul");
  }
}

TEST_CASE("mul: x_num_col_dims flattens the leading dims") {
  auto x = random_tensor<double>({2, 3, 4});
  auto y = random_tensor<double>({4, 6}, -1, 1, 3);
  auto out = OpTest("mul").input("X", x).input("Y", y).attr("x_num_col_dims", 2).run();
  CHECK(out["Out"].shape() == Shape{2, 3, 6});
  check_close(out["Out"], naive_mul(x, y, 2, 1).view({2, 3, 6}), 1e-12, 1e-12, "mul");
}

TEST_CASE("mul: grad matches finite differences (f64)") {
  OpTest("mul").input("X", random_tensor<double>({3, 4})).input("Y", random_tensor<double>({4, 5}, -1, 1, 9)).check_grad({"X", "Y"}, {"Out"});
  OpTest("mul").input("X", random_tensor<double>({2, 2, 3})).input("Y", random_tensor<double>({6, 2}, -1, 1, 9)).attr("x_num_col_dims", 1).check_grad({"X"}, {"Out"});
}

TEST_CASE("mul: mismatched inner dims are an oar::Error naming the shapes") {
  auto msg = error_of([] { OpTest("mul").input("X", random_tensor<float>({3, 4})).input("Y", random_tensor<float>({5, 2})).build(); });
  test::check_contains(msg, {"mul", "[3, 4]", "[5, 2]"});
}

TEST_CASE_TEMPLATE("gemm_packed: C += A op(B) with op(B) packed once matches a plain loop (every row and column tail, 1 and 2 threads)", T, float,
                   double) {
  using cpu_kernels::gemm_packed;
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> u(-1, 1);
  for (int threads : {1, 2}) {
    ThreadsForTest held(threads);
    for (auto [m, n, k] : {std::array<int64_t, 3>{1, 1, 1}, {7, 33, 5}, {13, 17, 64}, {32, 512, 128}, {32, 128, 512}, {9, 40, 3}, {96, 512, 128}})
      for (bool trans : {false, true}) {
        CAPTURE(m); CAPTURE(n); CAPTURE(k); CAPTURE(trans); CAPTURE(threads);
        const int64_t lda = k + 3, ldb = (trans ? k : n) + 2, ldc = n + 1;
        std::vector<T> a(size_t(m * lda)), b(size_t((trans ? n : k) * ldb)), c(size_t(m * ldc));
        for (auto* v : {&a, &b, &c})
          for (T& x : *v) x = T(u(rng));
        std::vector<T> want = c;
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = 0; j < n; ++j) {
            double s = want[size_t(i * ldc + j)];
            for (int64_t l = 0; l < k; ++l) s += double(a[size_t(i * lda + l)]) * double(trans ? b[size_t(j * ldb + l)] : b[size_t(l * ldb + j)]);
            want[size_t(i * ldc + j)] = T(s);
          }
        std::vector<T> bp(cpu_kernels::packed_rhs_size<T>(k, n));
        cpu_kernels::pack_rhs<T>(trans, b.data(), ldb, k, n, bp.data());
        gemm_packed<T>(m, n, k, a.data(), lda, bp.data(), c.data(), ldc);
        const double tol = std::is_same_v<T, float> ? 1e-4 * double(k) : 1e-12 * double(k);
        for (size_t i = 0; i < c.size(); ++i) REQUIRE(std::abs(double(c[i]) - double(want[i])) <= tol);
      }
  }
}
