// oar/ops/random.hpp: the random initializer ops uniform_random, gaussian_random and truncated_gaussian_random.
// Values come from a counter-based generator (splitmix64 of (seed, element index), kernels/cpu/random.hpp), so
// a tensor is the same whatever the thread count, and a nonzero `seed` gives the same tensor on every run.
#pragma once
#include "oar/ops/op.hpp"

namespace oar::ops {

namespace tensor_detail {
inline OpDef& random_attrs(OpDef& d) {
  d.out("Out").required_attr<std::vector<int64_t>>("shape", "dims of Out (all >= 0)");
  d.attr("dtype", int32_t(DType::f32), "element type as Fluid's VarType number (5 = f32, 6 = f64)")
      .check<int32_t>([](int32_t v) { return v == int32_t(DType::f32) || v == int32_t(DType::f64); }, "must be 5 (f32) or 6 (f64)");
  d.attr("seed", 0, "0: a fresh seed per run from the executor's seed; otherwise the same tensor every run");
  return d;
}
inline void random_infer_shape(InferShapeContext& c) {
  auto s = c.attr<std::vector<int64_t>>("shape");
  for (size_t i = 0; i < s.size(); ++i) c.check(s[i] >= 0, "shape [{}] has dim {} = {}; dims must be >= 0", fmt::join(s, ", "), i, s[i]);
  c.set_output("Out", Shape(s), DType(c.attr<int32_t>("dtype")));
}
}  // namespace tensor_detail

/// out ~ U[min, max).  {shape, dtype, min=-1, max=1, seed=0} -> Out [shape].
struct UniformRandom {
  static OpDef def() {
    OpDef d("uniform_random", "uniform random values in [min, max)");
    tensor_detail::random_attrs(d).attr("min", -1.0f).attr("max", 1.0f);
    return d;
  }
  static void infer_shape(InferShapeContext& c) {
    c.check(c.attr<float>("min") <= c.attr<float>("max"), "min = {} is greater than max = {}", c.attr<float>("min"), c.attr<float>("max"));
    tensor_detail::random_infer_shape(c);
  }
  static void eval_cpu(KernelContext&);  // kernels/cpu/random.hpp
};

/// out ~ N(mean, std^2).  {shape, dtype, mean=0, std=1, seed=0} -> Out [shape].
struct GaussianRandom {
  static OpDef def() {
    OpDef d("gaussian_random", "normal random values N(mean, std^2)");
    tensor_detail::random_attrs(d).attr("mean", 0.0f).attr("std", 1.0f).check<float>([](float s) { return s >= 0; }, "must be >= 0");
    return d;
  }
  static void infer_shape(InferShapeContext& c) { tensor_detail::random_infer_shape(c); }
  static void eval_cpu(KernelContext&);  // kernels/cpu/random.hpp
};

/// out ~ N(mean, std^2) restricted to [mean - 2 std, mean + 2 std] (redrawn outside, as Fluid's).
/// {shape, dtype, mean=0, std=1, seed=0} -> Out [shape].
struct TruncatedGaussianRandom {
  static OpDef def() {
    OpDef d("truncated_gaussian_random", "normal random values truncated at 2 std");
    tensor_detail::random_attrs(d).attr("mean", 0.0f).attr("std", 1.0f).check<float>([](float s) { return s >= 0; }, "must be >= 0");
    return d;
  }
  static void infer_shape(InferShapeContext& c) { tensor_detail::random_infer_shape(c); }
  static void eval_cpu(KernelContext&);  // kernels/cpu/random.hpp
};

}  // namespace oar::ops
