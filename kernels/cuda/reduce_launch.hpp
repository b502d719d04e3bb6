// kernels/cuda/reduce_launch.hpp: the launchers reduce.cu defines (what they share and how they report: launch.hpp).
#pragma once
#include "kernels/cuda/launch.hpp"

namespace oar::cuda_kernels {

// reduce_sum / mean / max / min over X seen as alternating groups of kept and reduced dims
// (kernels::ReducePlan): out[o] reduces the `count` elements of X at output index o.
enum class Reduce : int { sum, mean, max, min };
struct ReduceGroups {
  static constexpr int max_groups = 9;
  int groups = 0;
  int64_t size[max_groups] = {}, ostride[max_groups] = {}, xstride[max_groups] = {};
  bool red[max_groups] = {};
  int64_t count = 1, out_numel = 1;
};
/// out[o] for every o (f32, f64, i32, i64; sums in double or int64); an empty reduction gives the identity
/// (sum 0, mean NaN for floats and 0 for integers, max -inf or lowest, min +inf or max).
int reduce(Reduce r, Elem t, const ReduceGroups& g, const void* x, void* out, Stream s);
/// dx[i] = dout[o(i)] (sum), / count (mean), or where x[i] == out[o(i)] (max, min; out may be null otherwise).
int reduce_grad(Reduce r, Elem t, const ReduceGroups& g, const void* x, const void* out, const void* dout, void* dx, Stream s);

}  // namespace oar::cuda_kernels
