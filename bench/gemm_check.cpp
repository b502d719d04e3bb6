// bench/gemm_check.cpp - correctness + speed check for oar::cpu::gemm (build by hand, see below).
// g++ -std=c++20 -O3 -march=native [-DOAR_WITH_BLAS] -I/work/main/include -I/work/main
//     -I/usr/include/eigen3 bench/gemm_check.cpp [-lopenblas] -lpthread
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <stdexcept>
#include <thread>
#include <vector>

#include "kernels/cpu/gemm.hpp"

namespace {

template <class T>
void naive_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, T alpha, const T* a,
                int64_t lda, const T* b, int64_t ldb, T beta, T* c, int64_t ldc) {
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      long double acc = 0;
      for (int64_t p = 0; p < k; ++p) {
        T av = ta ? a[p * lda + i] : a[i * lda + p];
        T bv = tb ? b[j * ldb + p] : b[p * ldb + j];
        acc += static_cast<long double>(av) * bv;
      }
      T old = beta == T(0) ? T(0) : beta * c[i * ldc + j];
      c[i * ldc + j] = static_cast<T>(alpha * acc) + old;
    }
}

int g_failures = 0;

template <class T>
void check_one(bool ta, bool tb, int64_t m, int64_t n, int64_t k, T alpha, T beta,
               std::mt19937& rng) {
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  const int64_t pad = 3;  // exercise leading dims larger than the logical width
  const int64_t a_rows = ta ? k : m, a_cols = ta ? m : k;
  const int64_t b_rows = tb ? n : k, b_cols = tb ? k : n;
  const int64_t lda = a_cols + pad, ldb = b_cols + pad, ldc = n + pad;
  std::vector<T> a(std::max<int64_t>(1, a_rows * lda)), b(std::max<int64_t>(1, b_rows * ldb));
  std::vector<T> c(std::max<int64_t>(1, m * ldc)), ref;
  for (auto& v : a) v = static_cast<T>(dist(rng));
  for (auto& v : b) v = static_cast<T>(dist(rng));
  if (beta == T(0)) {
    std::fill(c.begin(), c.end(), std::numeric_limits<T>::quiet_NaN());  // must not be read
  } else {
    for (auto& v : c) v = static_cast<T>(dist(rng));
  }
  ref = c;
  oar::cpu::gemm<T>(ta, tb, m, n, k, alpha, a.data(), lda, b.data(), ldb, beta, c.data(), ldc);
  naive_gemm<T>(ta, tb, m, n, k, alpha, a.data(), lda, b.data(), ldb, beta, ref.data(), ldc);
  const double tol = (std::is_same_v<T, float> ? 2e-6 : 1e-14) * (k + 4);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double got = c[i * ldc + j], want = ref[i * ldc + j];
      if (!(std::fabs(got - want) <= tol * (1 + std::fabs(want)))) {
        if (g_failures++ < 10)
          std::printf("FAIL %s ta=%d tb=%d m=%ld n=%ld k=%ld (%ld,%ld) got %g want %g\n",
                      sizeof(T) == 4 ? "f32" : "f64", ta, tb, (long)m, (long)n, (long)k, (long)i,
                      (long)j, got, want);
        return;
      }
    }
  // Padding columns of C must be untouched.
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = n; j < ldc; ++j) {
      T got = c[i * ldc + j], want = ref[i * ldc + j];
      if (std::memcmp(&got, &want, sizeof(T)) != 0) {
        if (g_failures++ < 10) std::printf("FAIL padding clobbered\n");
        return;
      }
    }
}

template <class T>
void check_batched(std::mt19937& rng) {
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  for (int64_t batch : {1, 3, 8}) {
    for (int64_t sz : {5, 48, 130}) {
      int64_t m = sz, n = sz + 1, k = sz + 2;
      for (int tt = 0; tt < 4; ++tt) {
        bool ta = tt & 1, tb = tt & 2;
        int64_t lda = ta ? m : k, ldb = tb ? k : n, ldc = n;
        int64_t sa = m * k, sb = (batch == 3) ? 0 : k * n, sc = m * n;  // batch 3: broadcast B
        std::vector<T> a(sa * batch), b(std::max<int64_t>(sb * batch, k * n)), c(sc * batch),
            ref;
        for (auto& v : a) v = static_cast<T>(dist(rng));
        for (auto& v : b) v = static_cast<T>(dist(rng));
        std::fill(c.begin(), c.end(), std::numeric_limits<T>::quiet_NaN());
        ref = c;
        oar::cpu::gemm_batched<T>(ta, tb, m, n, k, T(1), a.data(), lda, sa, b.data(), ldb, sb,
                                  T(0), c.data(), ldc, sc, batch);
        for (int64_t i = 0; i < batch; ++i)
          naive_gemm<T>(ta, tb, m, n, k, T(1), a.data() + i * sa, lda, b.data() + i * sb, ldb,
                        T(0), ref.data() + i * sc, ldc);
        const double tol = (std::is_same_v<T, float> ? 2e-6 : 1e-14) * (k + 4);
        for (size_t i = 0; i < c.size(); ++i)
          if (!(std::fabs(double(c[i]) - double(ref[i])) <= tol * (1 + std::fabs(double(ref[i]))))) {
            if (g_failures++ < 10)
              std::printf("FAIL batched %s batch=%ld sz=%ld tt=%d\n", sizeof(T) == 4 ? "f32" : "f64",
                          (long)batch, (long)sz, tt);
            break;
          }
      }
    }
  }
}

template <class T>
void check_all() {
  std::mt19937 rng(42);
  const int64_t sizes[] = {1, 2, 3, 17, 64, 129};
  int count = 0;
  for (int tt = 0; tt < 4; ++tt)
    for (int64_t m : sizes)
      for (int64_t n : sizes)
        for (int64_t k : sizes) {
          const bool ta = tt & 1, tb = tt & 2;
          check_one<T>(ta, tb, m, n, k, T(1), T(0), rng);
          if ((m + n + k) % 3 == 0) check_one<T>(ta, tb, m, n, k, T(0.5), T(-1.5), rng);
          ++count;
        }
  // Larger odd shapes that take the parallel path; k == 0 and empty shapes.
  for (int tt = 0; tt < 4; ++tt) {
    const bool ta = tt & 1, tb = tt & 2;
    check_one<T>(ta, tb, 257, 301, 77, T(1), T(0), rng);
    check_one<T>(ta, tb, 33, 1000, 65, T(2), T(1), rng);
    check_one<T>(ta, tb, 513, 31, 129, T(1), T(0.25), rng);
    check_one<T>(ta, tb, 7, 9, 0, T(1), T(0), rng);
    check_one<T>(ta, tb, 7, 9, 0, T(1), T(3), rng);
    check_one<T>(ta, tb, 0, 9, 5, T(1), T(0), rng);
    check_one<T>(ta, tb, 9, 0, 5, T(1), T(0), rng);
  }
  check_batched<T>(rng);
  std::printf("  %s: %d shape combos x 4 transposes checked\n", sizeof(T) == 4 ? "f32" : "f64",
              count / 4);
}

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Seconds per call: repeat until >= min_time, return the per-call average.
template <class F>
double time_call(F&& f, double min_time = 0.1) {
  f();  // warm up
  int reps = 0;
  double t0 = now_s(), t1;
  do {
    f();
    ++reps;
    t1 = now_s();
  } while (t1 - t0 < min_time);
  return (t1 - t0) / reps;
}

[[maybe_unused]] void settle() {
  // OpenBLAS's own idle threads spin ~2^28 cycles after work; let them go to sleep.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
}

void bench(const char* variant_env) {
  const int64_t sizes[] = {128, 256, 512, 1024, 2048};
  const int reps = 5;  // odd: median is a sample
  std::printf("\nSGEMM GFLOP/s (NN, row-major, median of %d)\n", reps);
#if defined(OAR_WITH_BLAS)
  std::printf("%-6s %-4s %10s %10s %7s\n", "n", "thr", "oar", "openblas", "ratio");
#else
  std::printf("%-6s %-4s %10s\n", "n", "thr", "oar");
#endif
  // Variant selection (for tuning): OAR_GEMM_VARIANT=cols:64 / rows:16 / none / auto.
  oar::cpu::detail::gemm_split split = oar::cpu::detail::gemm_split::auto_;
  int64_t align = 0;
  if (variant_env) {
    std::string v(variant_env);
    if (v.rfind("cols", 0) == 0) split = oar::cpu::detail::gemm_split::cols;
    if (v.rfind("rows", 0) == 0) split = oar::cpu::detail::gemm_split::rows;
    if (v.rfind("none", 0) == 0) split = oar::cpu::detail::gemm_split::none;
    auto colon = v.find(':');
    if (colon != std::string::npos) align = std::atol(v.c_str() + colon + 1);
    std::printf("variant %s\n", variant_env);
  }
  for (int64_t n : sizes) {
    std::vector<float> a(n * n), b(n * n), c(n * n);
    std::mt19937 rng(1);
    std::uniform_real_distribution<float> dist(-1, 1);
    for (auto& v : a) v = dist(rng);
    for (auto& v : b) v = dist(rng);
    const double flops = 2.0 * n * n * n;
    for (int thr : {1, 2}) {
      std::vector<double> t_oar, t_blas;
      auto run_oar = [&] {
#if defined(OAR_WITH_BLAS)
        openblas_set_num_threads(1);
#endif
        oar::set_num_threads(thr);
        t_oar.push_back(time_call([&] {
          if (variant_env)
            oar::cpu::detail::gemm_impl<float>(split, align, false, false, n, n, n, 1.f, a.data(),
                                               n, b.data(), n, 0.f, c.data(), n);
          else
            oar::cpu::gemm<float>(false, false, n, n, n, 1.f, a.data(), n, b.data(), n, 0.f,
                                  c.data(), n);
        }));
        oar::set_num_threads(1);  // park oar's workers while OpenBLAS runs itself
      };
      auto run_blas = [&] {
#if defined(OAR_WITH_BLAS)
        openblas_set_num_threads(thr);
        t_blas.push_back(time_call([&] {
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.f, a.data(), n,
                      b.data(), n, 0.f, c.data(), n);
        }));
        openblas_set_num_threads(1);
        if (thr > 1) settle();
#endif
      };
      // Alternate blocks (and their order) so machine noise hits both sides alike.
      for (int r = 0; r < reps; ++r) {
        if (r % 2 == 0) {
          run_oar();
          run_blas();
        } else {
          run_blas();
          run_oar();
        }
      }
      const double g_oar = flops / median(t_oar) * 1e-9;
#if defined(OAR_WITH_BLAS)
      const double g_blas = flops / median(t_blas) * 1e-9;
      std::printf("%-6ld %-4d %10.1f %10.1f %7.2f%s\n", (long)n, thr, g_oar, g_blas,
                  g_oar / g_blas, (n >= 256 && g_oar / g_blas < 0.9) ? "  <0.9" : "");
#else
      std::printf("%-6ld %-4d %10.1f\n", (long)n, thr, g_oar);
#endif
      std::fflush(stdout);
    }
  }
#if defined(OAR_WITH_BLAS)
  openblas_set_num_threads(1);
#endif
  oar::set_num_threads(0);
}

}  // namespace

int main(int argc, char** argv) {
  std::printf("backend: %s, oar threads: %d\n", oar::cpu::gemm_backend_name().c_str(),
              oar::num_threads());
#if defined(OAR_WITH_BLAS)
  std::printf("openblas_get_corename: %s, openblas threads: %d, config: %s\n",
              openblas_get_corename(), openblas_get_num_threads(), openblas_get_config());
#endif
  for (int thr : {1, 2, 3}) {
    oar::set_num_threads(thr);
    std::printf("correctness at %d oar thread(s):\n", thr);
    check_all<float>();
    check_all<double>();
  }
  oar::set_num_threads(0);
  // Exceptions from parallel_for chunks reach the caller.
  bool caught = false;
  try {
    oar::parallel_for(0, 100, 1, [](int64_t lo, int64_t) {
      if (lo > 0) throw std::runtime_error("boom");
    });
  } catch (const std::runtime_error&) {
    caught = true;
  }
  if (!caught && oar::num_threads() > 1) {
    ++g_failures;
    std::printf("FAIL exception not propagated\n");
  }
  std::printf(g_failures ? "CORRECTNESS: %d FAILURES\n" : "CORRECTNESS: OK\n", g_failures);
  if (argc > 1 && std::strcmp(argv[1], "--no-bench") == 0) return g_failures ? 1 : 0;
  bench(std::getenv("OAR_GEMM_VARIANT"));
  return g_failures ? 1 : 0;
}
