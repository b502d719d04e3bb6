// oar/ops/random.hpp: the random initializer ops uniform_random, gaussian_random and truncated_gaussian_random.
// Values come from a counter-based generator (splitmix64 of (seed, element index), kernels/cpu/random.hpp), so
// a tensor is the same whatever the thread count, and a nonzero `seed` gives the same tensor on every run.
#pragma once
#include "oar/ops/op.hpp"

namespace oar::ops {

namespace tensor_detail {
/// The names all three random ops share.
struct RandomNames {
  static constexpr Slot out{"Out"};
  static constexpr Attr<std::vector<int64_t>> shape{"shape"};
  static constexpr Attr<int32_t> dtype{"dtype"}, seed{"seed"};
};

/// The names of the normal ops' parameters.
struct GaussianNames : RandomNames {
  static constexpr Attr<float> mean{"mean"}, std{"std"};
};

inline OpDef& random_attrs(OpDef& d) {
  d.out(RandomNames::out).required_attr(RandomNames::shape, "dims of Out (all >= 0)");
  d.attr(RandomNames::dtype, int32_t(DType::f32), "element type as Fluid's VarType number (5 = f32, 6 = f64)")
      .check<int32_t>([](int32_t v) { return v == int32_t(DType::f32) || v == int32_t(DType::f64); }, "must be 5 (f32) or 6 (f64)");
  d.attr(RandomNames::seed, 0, "0: a fresh seed per run from the executor's seed; otherwise the same tensor every run");
  d.replayable_when([](const Operator& op) { return op.attr_or(RandomNames::seed, 0) != 0; });
  return d;
}
inline void random_infer_shape(InferShapeContext& c) {
  auto s = c.attr(RandomNames::shape);
  for (size_t i = 0; i < s.size(); ++i) c.check(s[i] >= 0, "shape [{}] has dim {} = {}; dims must be >= 0", fmt::join(s, ", "), i, s[i]);
  c.set_output(RandomNames::out, Shape(s), DType(c.attr(RandomNames::dtype)));
}

/// `shape` as a Shape (dims inline: no heap), `dtype`, `seed`.
struct RandomAttrs {
  Shape shape;
  DType dtype;
  int32_t seed;
  explicit RandomAttrs(const AttrReader& r) : shape(r(RandomNames::shape)), dtype(DType(r(RandomNames::dtype))), seed(r(RandomNames::seed)) {}
};

/// The normal ops' decoded attributes: the common ones, `mean` and `std`.
struct GaussianAttrs : RandomAttrs {
  float mean, std;
  explicit GaussianAttrs(const AttrReader& r) : RandomAttrs(r), mean(r(GaussianNames::mean)), std(r(GaussianNames::std)) {}
};

inline OpDef& gaussian_attrs(OpDef& d) {
  return random_attrs(d).attr(GaussianNames::mean, 0.0f).attr(GaussianNames::std, 1.0f).check<float>([](float s) { return s >= 0; }, "must be >= 0");
}
}  // namespace tensor_detail

/// out ~ U[min, max).  {shape, dtype, min=-1, max=1, seed=0} -> Out [shape].
struct UniformRandom : tensor_detail::RandomNames {
  static constexpr std::string_view type = "uniform_random";
  static constexpr Attr<float> min{"min"}, max{"max"};
  struct Attrs : tensor_detail::RandomAttrs {
    float min, max;
    explicit Attrs(const AttrReader& r) : RandomAttrs(r), min(r(UniformRandom::min)), max(r(UniformRandom::max)) {}
  };
  static OpDef def() {
    OpDef d(type, "uniform random values in [min, max)");
    tensor_detail::random_attrs(d).attr(min, -1.0f).attr(max, 1.0f);
    return d;
  }
  static void infer_shape(InferShapeContext& c) {
    c.check(c.attr(min) <= c.attr(max), "min = {} is greater than max = {}", c.attr(min), c.attr(max));
    tensor_detail::random_infer_shape(c);
  }
  static void eval_cpu(KernelContext&, const Attrs&);  // kernels/cpu/random.hpp
  static void eval_cuda(KernelContext&, const Attrs&);  // kernels/cuda/random.hpp
};

/// out ~ N(mean, std^2).  {shape, dtype, mean=0, std=1, seed=0} -> Out [shape].
struct GaussianRandom : tensor_detail::GaussianNames {
  static constexpr std::string_view type = "gaussian_random";
  using Attrs = tensor_detail::GaussianAttrs;
  static OpDef def() {
    OpDef d(type, "normal random values N(mean, std^2)");
    tensor_detail::gaussian_attrs(d);
    return d;
  }
  static void infer_shape(InferShapeContext& c) { tensor_detail::random_infer_shape(c); }
  static void eval_cpu(KernelContext&, const Attrs&);  // kernels/cpu/random.hpp
  static void eval_cuda(KernelContext&, const Attrs&);  // kernels/cuda/random.hpp
};

/// out ~ N(mean, std^2) restricted to [mean - 2 std, mean + 2 std] (redrawn outside, as Fluid's).
/// {shape, dtype, mean=0, std=1, seed=0} -> Out [shape].
struct TruncatedGaussianRandom : tensor_detail::GaussianNames {
  static constexpr std::string_view type = "truncated_gaussian_random";
  using Attrs = tensor_detail::GaussianAttrs;
  static OpDef def() {
    OpDef d(type, "normal random values truncated at 2 std");
    tensor_detail::gaussian_attrs(d);
    return d;
  }
  static void infer_shape(InferShapeContext& c) { tensor_detail::random_infer_shape(c); }
  static void eval_cpu(KernelContext&, const Attrs&);  // kernels/cpu/random.hpp
  static void eval_cuda(KernelContext&, const Attrs&);  // kernels/cuda/random.hpp
};

}  // namespace oar::ops
