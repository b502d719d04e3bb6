// tests/support/rnn_ref.hpp: what the recurrent ops' tests share: the activations by name in double (for
// the per-step loop references) and many random sequence lengths.
#pragma once
#include <oar/oar.hpp>

#include <cmath>
#include <cstdint>
#include <random>
#include <string_view>
#include <vector>

#include "support/threads.hpp"

namespace oar::test {

/// An RNN activation by its attribute's name, in double.
inline double rnn_act(std::string_view a, double v) {
  if (a == "sigmoid") return 1 / (1 + std::exp(-v));
  if (a == "tanh") return std::tanh(v);
  if (a == "relu") return v > 0 ? v : 0;
  return v;  // identity
}

/// The offsets of `n` sequences whose lengths are uniform in 0 .. max_len, so that some are empty.
inline std::vector<size_t> random_offsets(int n, size_t max_len, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<size_t> off{0};
  for (int s = 0; s < n; ++s) off.push_back(off.back() + size_t(rng() % (max_len + 1)));
  return off;
}

}  // namespace oar::test
