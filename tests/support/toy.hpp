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

/// Mean losses (the first fetch of each step) of the first and of the last of `epochs` passes of `opt` over `batches`.
struct EpochLosses {
  double first = 0, last = 0;
};
inline EpochLosses train_epochs(Optimizer& opt, const std::vector<FeedMap>& batches, int epochs) {
  EpochLosses r;
  std::vector<LoDTensor> out;
  for (int epoch = 0; epoch < epochs; ++epoch) {
    double sum = 0;
    for (auto& b : batches) {
      opt.step(b, out);
      sum += out[0].get(0);
    }
    if (epoch == 0) r.first = sum / double(batches.size());
    r.last = sum / double(batches.size());
  }
  return r;
}

}  // namespace oar::test
