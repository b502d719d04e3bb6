// kernels/cpu/sum_all.hpp: sum_all, a full reduction sum(f(i)) for i in [0, n), accumulated in double over
// per-thread partials (shared by mean, squared_l2_norm, clip_by_norm).
#pragma once
#include <algorithm>
#include <vector>

#include "oar/device/thread_pool.hpp"

namespace oar::cpu_kernels {

inline constexpr int64_t kSumAllGrain = 1 << 15;

/// sum over i in [0, n) of f(i), in double. Deterministic for a given thread count.
template <class F>
double sum_all(int64_t n, F&& f) {
  if (n <= 0) return 0;
  auto range = [&](int64_t lo, int64_t hi) {
    double a0 = 0, a1 = 0, a2 = 0, a3 = 0;  // four lanes: vectorizable without -ffast-math
    int64_t i = lo;
    for (; i + 4 <= hi; i += 4) a0 += double(f(i)), a1 += double(f(i + 1)), a2 += double(f(i + 2)), a3 += double(f(i + 3));
    for (; i < hi; ++i) a0 += double(f(i));
    return (a0 + a1) + (a2 + a3);
  };
  const int64_t chunks = std::clamp<int64_t>(n / kSumAllGrain, 1, num_threads());
  if (chunks == 1) return range(0, n);
  std::vector<double> part(size_t(chunks), 0.0);
  parallel_for(0, chunks, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t c = lo; c < hi; ++c) part[size_t(c)] = range(n * c / chunks, n * (c + 1) / chunks);
  });
  double s = 0;
  for (double p : part) s += p;
  return s;
}

}  // namespace oar::cpu_kernels
