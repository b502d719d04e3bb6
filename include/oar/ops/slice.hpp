// oar/ops/slice.hpp: slice, a box [starts, ends) of a tensor along some axes (Fluid's index rules).
#pragma once
#include "oar/ops/shape_ops.hpp"

namespace oar::ops {

/// out = input[starts[0]:ends[0], ...] along `axes`; other dims are kept whole. A negative start or end
/// counts from the back (dim + v); both are then clamped to [0, dim], and an empty range gives a 0 dim.
/// Input [4, 5], {axes=[1], starts=[1], ends=[-1]} -> Out [4, 3]. Any dtype. Grad: zeros with Out@GRAD in the box.
struct Slice {
  static OpDef def() {
    return OpDef("slice", "a box of Input along axes")
        .in("Input").out("Out")
        .required_attr<std::vector<int32_t>>("axes").required_attr<std::vector<int32_t>>("starts").required_attr<std::vector<int32_t>>("ends");
  }
  static void infer_shape(InferShapeContext& c) {
    const Shape& in = c.shape("Input");
    Shape out = in;
    for (auto [axis, b, e] : ranges(c, in)) out[axis] = in[axis] < 0 ? -1 : e - b;
    c.set_output("Out", out, c.dtype("Input"));
    c.share_lod("Input", "Out");
  }
  struct Range {
    int axis;
    int64_t begin, end;
  };
  /// The checked, clamped range of each sliced axis (begin = end = -1 where the dim is unknown).
  template <class Ctx>
  static std::vector<Range> ranges(const Ctx& c, const Shape& in) {
    auto axes = c.template attr<std::vector<int32_t>>("axes");
    auto starts = c.template attr<std::vector<int32_t>>("starts"), ends = c.template attr<std::vector<int32_t>>("ends");
    c.check(axes.size() == starts.size() && axes.size() == ends.size(), "axes [{}], starts [{}] and ends [{}] must have one length",
            fmt::join(axes, ", "), fmt::join(starts, ", "), fmt::join(ends, ", "));
    std::vector<Range> out;
    std::vector<bool> seen(size_t(in.rank()), false);
    for (size_t i = 0; i < axes.size(); ++i) {
      int a = tensor_detail::normalize_axis(c, axes[i], in.rank(), "axes entry", in);
      c.check(!seen[size_t(a)], "axis {} is sliced twice (axes [{}])", a, fmt::join(axes, ", "));
      seen[size_t(a)] = true;
      int64_t d = in[a];
      if (d < 0) {
        out.push_back({a, -1, -1});
        continue;
      }
      auto clamp = [d](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + d : v, 0, d); };
      int64_t b = clamp(starts[i]), e = clamp(ends[i]);
      out.push_back({a, b, std::max(b, e)});
    }
    return out;
  }
  /// slice_grad(Input, Out@GRAD) -> Input@GRAD
  static std::vector<Operator> grad(const GradContext& g) {
    if (g.input_grad("Input")[0] == kEmptyVarName) return {};
    return {g.default_grad(false)};
  }
  static void eval_cpu(KernelContext&);       // kernels/cpu/slice.hpp
  static void eval_grad_cpu(KernelContext&);  // kernels/cpu/slice.hpp
};

}  // namespace oar::ops
