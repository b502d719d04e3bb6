// tests/support/toy.hpp: a small classification set for model-level tests: three classes from sums of 8
// standard normal inputs (class = the largest of the sums over inputs j % 3), learnable by a small MLP.
#pragma once
#include <oar/oar.hpp>

#include <algorithm>
#include <random>
#include <vector>

namespace oar::test {

/// `n` examples: x [n, 8] f32, label [n, 1] i64, drawn from `seed`.
inline io::Reader toy_classes(int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d;
  std::vector<float> x(size_t(n * 8));
  std::vector<int64_t> y(static_cast<size_t>(n));
  for (auto& v : x) v = d(rng);
  for (int64_t i = 0; i < n; ++i) {
    float s[3] = {0, 0, 0};
    for (int j = 0; j < 8; ++j) s[j % 3] += x[size_t(i * 8 + j)];
    y[size_t(i)] = std::max_element(s, s + 3) - s;
  }
  return io::Reader::from_tensors({Tensor::from<float>(x, {n, 8}), Tensor::from<int64_t>(y, {n, 1})});
}

}  // namespace oar::test
