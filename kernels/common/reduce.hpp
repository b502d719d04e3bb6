// kernels/common/reduce.hpp: the plan of a reduction over some of X's dims, by which the CPU and the CUDA
// kernels of reduce_* (and the CUDA grad of fused_elementwise) walk X.
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

#include "oar/core/shape.hpp"

namespace oar::kernels {

/// X's dims merged into runs: size[g], whether run g is reduced, its stride in Out (0 when reduced).
/// Size-1 dims are dropped (they never change an index). count = reduced elements per output.
struct ReducePlan {
  std::vector<int64_t> size, ostride;
  std::vector<bool> red;
  int64_t count = 1, out_numel = 1;
  int num_reduced() const { return int(std::count(red.begin(), red.end(), true)); }
};

inline ReducePlan make_reduce_plan(const Shape& x, const std::vector<int>& axes) {
  ReducePlan p;
  for (int i = 0; i < x.rank(); ++i) {
    bool r = std::find(axes.begin(), axes.end(), i) != axes.end();
    if (r) p.count *= x[i];
    else p.out_numel *= x[i];
    if (x[i] == 1) continue;
    if (!p.size.empty() && p.red.back() == r) p.size.back() *= x[i];
    else p.size.push_back(x[i]), p.red.push_back(r);
  }
  if (p.size.empty()) p.size.push_back(1), p.red.push_back(false);
  p.ostride.assign(p.size.size(), 0);
  int64_t s = 1;
  for (size_t g = p.size.size(); g-- > 0;)
    if (!p.red[g]) p.ostride[g] = s, s *= p.size[g];
  return p;
}

}  // namespace oar::kernels
