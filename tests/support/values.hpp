// tests/support/values.hpp: a tensor's elements as doubles and the rounding of a float, for tests that compare
// what a program computed with a formula evaluated in the test.
#pragma once
#include <oar/oar.hpp>

#include <vector>

namespace oar::test {

using Vec = std::vector<double>;

/// The value a float attribute or an f32 variable holds.
inline double F(double v) { return double(float(v)); }

/// Every element of `t`, in order, as a double.
inline Vec values(const LoDTensor& t) {
  Vec out(size_t(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) out[size_t(i)] = t.get(i);
  return out;
}

}  // namespace oar::test
