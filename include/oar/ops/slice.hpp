// oar/ops/slice.hpp: slice, a box [starts, ends) of a tensor along some axes (Fluid's index rules).
#pragma once
#include "oar/ops/shape_ops.hpp"

namespace oar::ops {

/// out = input[starts[0]:ends[0], ...] along `axes`; other dims are kept whole. A negative start or end
/// counts from the back (dim + v); both are then clamped to [0, dim], and an empty range gives a 0 dim.
/// Input [4, 5], {axes=[1], starts=[1], ends=[-1]} -> Out [4, 3]. Any dtype. Grad: zeros with Out@GRAD in the box.
struct Slice {
  static constexpr std::string_view type = "slice";
  /// Its kernels make views or copy through the place: they serve every place (runtime/kernel_registry.hpp).
  static constexpr bool any_place = true;
  static constexpr Slot input{"Input"}, out{"Out"};
  static constexpr Slot input_grad{"Input@GRAD"}, out_grad{"Out@GRAD"};
  static constexpr Attr<std::vector<int32_t>> axes{"axes"}, starts{"starts"}, ends{"ends"};
  struct Attrs {
    std::vector<int32_t> axes, starts, ends;
    explicit Attrs(const AttrReader& r) : axes(r(Slice::axes)), starts(r(Slice::starts)), ends(r(Slice::ends)) {}
  };
  static OpDef def() {
    return OpDef(type, "a box of Input along axes")
        .in(input).out(out)
        .required_attr(axes).required_attr(starts).required_attr(ends);
  }
  static void infer_shape(InferShapeContext& c) {
    const Shape& in = c.shape(input);
    Shape os = in;
    for_each_range(c, in, c.attr(axes), c.attr(starts), c.attr(ends), [&](int axis, int64_t b, int64_t e) { os[axis] = in[axis] < 0 ? -1 : e - b; });
    c.set_output(out, os, c.dtype(input));
    c.share_lod(input, out);
  }
  /// Calls `f(axis, begin, end)` with the checked, clamped range of each sliced axis (begin = end = -1 where
  /// the dim is unknown), after checking the axes before it.
  template <class Ctx, class F>
  static void for_each_range(const Ctx& c, const Shape& in, const std::vector<int32_t>& ax, const std::vector<int32_t>& st,
                             const std::vector<int32_t>& en, F&& f) {
    c.check(ax.size() == st.size() && ax.size() == en.size(), "axes [{}], starts [{}] and ends [{}] must have one length",
            fmt::join(ax, ", "), fmt::join(st, ", "), fmt::join(en, ", "));
    bool seen[Shape::kMaxRank] = {};
    for (size_t i = 0; i < ax.size(); ++i) {
      int a = tensor_detail::normalize_axis(c, ax[i], in.rank(), "axes entry", in);
      c.check(!seen[a], "axis {} is sliced twice (axes [{}])", a, fmt::join(ax, ", "));
      seen[a] = true;
      int64_t d = in[a];
      if (d < 0) {
        f(a, int64_t(-1), int64_t(-1));
        continue;
      }
      auto clamp = [d](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + d : v, 0, d); };
      int64_t b = clamp(st[i]), e = clamp(en[i]);
      f(a, b, std::max(b, e));
    }
  }
  /// slice_grad(Input, Out@GRAD) -> Input@GRAD
  static std::vector<Operator> grad(const GradContext& g) {
    if (!g.wants_grad(input)) return {};
    return {g.default_grad(false)};
  }
  static void eval_cpu(KernelContext&, const Attrs&);       // kernels/cpu/slice.hpp
  static void eval_grad_cpu(KernelContext&, const Attrs&);  // kernels/cpu/slice.hpp
};

}  // namespace oar::ops
