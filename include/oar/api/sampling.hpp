// oar/api/sampling.hpp: picking the next token from a model's probabilities when generating text: greedy,
// temperature and top-k sampling (docs/attention.md).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <span>
#include <vector>

#include "oar/core/error.hpp"

namespace oar {

struct SampleOptions {
  /// 0: greedy (the most probable token). Otherwise probabilities are raised to 1 / temperature and
  /// renormalized: below 1 sharper, above 1 flatter.
  double temperature = 1.0;
  /// Keep only the k most probable tokens (0: all).
  int top_k = 0;
};

/// A token id drawn from `probs` (one row of a softmax, non-negative, any sum > 0) as `o` says, using `rng`.
template <class T, class Rng>
int64_t sample_token(std::span<const T> probs, const SampleOptions& o, Rng& rng) {
  OAR_CHECK(!probs.empty(), "sample_token: no probabilities");
  OAR_CHECK(o.temperature >= 0 && o.top_k >= 0, "sample_token: temperature and top_k must be >= 0, got {} and {}", o.temperature, o.top_k);
  const size_t n = probs.size();
  if (o.temperature == 0) return int64_t(std::max_element(probs.begin(), probs.end()) - probs.begin());
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t(0));
  size_t keep = o.top_k > 0 ? std::min(n, size_t(o.top_k)) : n;
  if (keep < n) std::partial_sort(order.begin(), order.begin() + long(keep), order.end(), [&](size_t a, size_t b) { return probs[a] > probs[b]; });
  std::vector<double> w(keep);
  for (size_t i = 0; i < keep; ++i) w[i] = std::pow(std::max(double(probs[order[i]]), 0.0), 1.0 / o.temperature);
  if (std::accumulate(w.begin(), w.end(), 0.0) <= 0) return int64_t(order[0]);
  std::discrete_distribution<size_t> pick(w.begin(), w.end());
  return int64_t(order[pick(rng)]);
}

}  // namespace oar
