// oar/ops/concat.hpp: joining and splitting along an axis: concat (X[] -> Out), split (X -> Out[]) and
// stack (X[] -> Y, along a new axis).
#pragma once
#include <algorithm>

#include "oar/ops/shape_ops.hpp"

namespace oar::ops {

/// out = [x0 | x1 | ...] along `axis` (negative counts from the back); the other dims must agree.
/// X [[2, 3], [2, 5]], {axis=1} -> Out [2, 8]. Any dtype. Grad: concat_grad(X, Out@GRAD) -> X@GRAD[] (the pieces).
struct Concat {
  static constexpr std::string_view type = "concat";
  /// Its kernels make views or copy through the place: they serve every place (runtime/kernel_registry.hpp).
  static constexpr bool any_place = true;
  static constexpr Slot x{"X"}, out{"Out"};
  static constexpr Slot x_grad{"X@GRAD"}, out_grad{"Out@GRAD"};
  static constexpr Attr<int32_t> axis{"axis"};
  struct Attrs {
    int32_t axis;
    explicit Attrs(const AttrReader& r) : axis(r(Concat::axis)) {}
  };
  static OpDef def() { return OpDef(type, "the inputs joined along axis").in(x, duplicable).out(out).attr(axis, 0); }
  static void infer_shape(InferShapeContext& c) {
    size_t n = c.num_inputs(x);
    const Shape& x0 = c.shape(x, 0);
    int ax = tensor_detail::normalize_axis(c, c.attr(axis), x0.rank(), axis, x0);
    Shape os = x0;
    for (size_t i = 1; i < n; ++i) {
      const Shape& xi = c.shape(x, i);
      c.check(c.dtype(x, i) == c.dtype(x, 0), "X[{}] is {} but X[0] is {}", i, name(c.dtype(x, i)), name(c.dtype(x, 0)));
      c.check(xi.rank() == x0.rank(), "X[{}] {} has rank {} but X[0] {} has rank {}", i, xi.str(), xi.rank(), x0.str(), x0.rank());
      for (int d = 0; d < x0.rank(); ++d) {
        if (d == ax) {
          os[d] = os[d] < 0 || xi[d] < 0 ? -1 : os[d] + xi[d];
        } else {
          c.check(dims_compatible(os[d], xi[d]), "X[{}] {} differs from X[0] {} in dim {} (only axis {} may differ)", i, xi.str(), x0.str(), d, ax);
          if (os[d] < 0) os[d] = xi[d];
        }
      }
    }
    c.set_output(out, os, c.dtype(x, 0));
    if (ax != 0) c.share_lod(x, out);
  }
  static std::vector<Operator> grad(const GradContext& g) { return {g.default_grad(false)}; }
  static void eval_cpu(KernelContext&, const Attrs&);       // kernels/cpu/concat.hpp
  static void eval_grad_cpu(KernelContext&, const Attrs&);  // kernels/cpu/concat.hpp
};

/// out[i] = the i-th piece of x along `axis`: `num` equal pieces, or pieces of `sections` sizes (one may be
/// -1: the rest). With neither, as many equal pieces as there are outputs.
/// X [2, 8], {sections=[3, 5], axis=1} -> Out [[2, 3], [2, 5]]. Any dtype. Grad: X@GRAD = concat(Out@GRAD[]).
struct Split {
  static constexpr std::string_view type = "split";
  /// Its kernels make views or copy through the place: they serve every place (runtime/kernel_registry.hpp).
  static constexpr bool any_place = true;
  static constexpr Slot x{"X"}, out{"Out"};
  static constexpr Attr<int32_t> num{"num"}, axis{"axis"};
  static constexpr Attr<std::vector<int32_t>> sections{"sections"};
  struct Attrs {
    int32_t num;
    std::vector<int32_t> sections;
    int32_t axis;
    explicit Attrs(const AttrReader& r) : num(r(Split::num)), sections(r(Split::sections)), axis(r(Split::axis)) {}
  };
  static OpDef def() {
    return OpDef(type, "X cut into pieces along axis")
        .in(x).out(out, duplicable)
        .attr(num, 0).check<int32_t>([](int v) { return v >= 0; }, "must be >= 0")
        .attr(sections, std::vector<int32_t>{})
        .attr(axis, 0);
  }
  static void infer_shape(InferShapeContext& c) {
    const Shape& xs = c.shape(x);
    int ax = tensor_detail::normalize_axis(c, c.attr(axis), xs.rank(), axis, xs);
    std::vector<int64_t> sizes(c.num_outputs(out));
    section_sizes(c, xs[ax], sizes.size(), c.attr(num), c.attr(sections), sizes.data());
    for (size_t i = 0; i < sizes.size(); ++i) {
      Shape o = xs;
      o[ax] = sizes[i];
      c.set_output(out, o, c.dtype(x), ax == 0 ? -1 : c.lod_level(x), i);
    }
  }
  /// Writes the size of each of the `n_out` pieces along the axis to `sizes` (dim may be -1 at build time:
  /// then the sizes it decides are -1).
  template <class Ctx>
  static void section_sizes(const Ctx& c, int64_t dim, size_t n_out, int num, const std::vector<int32_t>& sec, int64_t* sizes) {
    c.check(num == 0 || sec.empty(), "give num ({}) or sections ([{}]), not both", num, fmt::join(sec, ", "));
    if (sec.empty()) {
      if (num == 0) num = int(n_out);
      c.check(size_t(num) == n_out, "num = {} but Out has {} variables", num, n_out);
      c.check(dim < 0 || dim % num == 0, "the split dim {} is not a multiple of num = {}", dim, num);
      std::fill_n(sizes, n_out, dim < 0 ? -1 : dim / num);
      return;
    }
    c.check(sec.size() == n_out, "sections [{}] has {} entries but Out has {} variables", fmt::join(sec, ", "), sec.size(), n_out);
    int infer = -1;
    int64_t sum = 0;
    for (size_t i = 0; i < n_out; ++i) {
      sizes[i] = sec[i];
      if (sizes[i] == -1) {
        c.check(infer < 0, "sections [{}] has more than one -1", fmt::join(sec, ", "));
        infer = int(i);
      } else {
        c.check(sizes[i] >= 0, "sections [{}] has a negative entry {}", fmt::join(sec, ", "), sizes[i]);
        sum += sizes[i];
      }
    }
    if (infer >= 0) {
      c.check(dim < 0 || sum <= dim, "sections [{}] add up to {}, more than the split dim {}", fmt::join(sec, ", "), sum, dim);
      sizes[size_t(infer)] = dim < 0 ? -1 : dim - sum;
    } else {
      c.check(dim < 0 || sum == dim, "sections [{}] add up to {} but the split dim is {}", fmt::join(sec, ", "), sum, dim);
    }
  }
  /// concat(X = Out@GRAD[], axis) -> X@GRAD, as Fluid's split grad maker.
  static std::vector<Operator> grad(const GradContext& g) {
    auto dx = g.input_grad(x);
    if (!g.wants_grad(x)) return {};
    Operator op = g.new_op(Concat::type);
    op.set_input(Concat::x, g.output_grad(out)).set_output(Concat::out, dx).set_attr(Concat::axis, g.fwd().attr(axis));
    return {op};
  }
  static void eval_cpu(KernelContext&, const Attrs&);  // kernels/cpu/concat.hpp
};

/// y = the inputs stacked along a new dim `axis` in [-(rank+1), rank]; all inputs have one shape.
/// X [[2, 3] x 4], {axis=1} -> Y [2, 4, 3]. Any dtype. Grad: stack_grad(Y@GRAD) -> X@GRAD[] (the slices).
struct Stack {
  static constexpr std::string_view type = "stack";
  /// Its kernels make views or copy through the place: they serve every place (runtime/kernel_registry.hpp).
  static constexpr bool any_place = true;
  static constexpr Slot x{"X"}, y{"Y"};
  static constexpr Slot x_grad{"X@GRAD"}, y_grad{"Y@GRAD"};
  static constexpr Attr<int32_t> axis{"axis"};
  struct Attrs {
    int32_t axis;
    explicit Attrs(const AttrReader& r) : axis(r(Stack::axis)) {}
  };
  static OpDef def() { return OpDef(type, "the inputs stacked along a new axis").in(x, duplicable).out(y).attr(axis, 0); }
  static void infer_shape(InferShapeContext& c) {
    size_t n = c.num_inputs(x);
    Shape xs = c.shape(x, 0);
    for (size_t i = 1; i < n; ++i) {
      const Shape& xi = c.shape(x, i);
      c.check(c.dtype(x, i) == c.dtype(x, 0), "X[{}] is {} but X[0] is {}", i, name(c.dtype(x, i)), name(c.dtype(x, 0)));
      bool ok = xi.rank() == xs.rank();
      for (int d = 0; ok && d < xs.rank(); ++d) ok = dims_compatible(xs[d], xi[d]);
      c.check(ok, "X[{}] {} differs from X[0] {}; stacked inputs need one shape", i, xi.str(), c.shape(x, 0).str());
      for (int d = 0; d < xs.rank(); ++d)
        if (xs[d] < 0) xs[d] = xi[d];
    }
    c.set_output(y, x_with_axis(c, xs, int64_t(n), c.attr(axis)), c.dtype(x, 0));
  }
  /// `x` with a dim of `n` inserted at `ax` (checked against x's rank).
  template <class Ctx>
  static Shape x_with_axis(const Ctx& c, Shape xs, int64_t n, int ax) {
    int r = xs.rank();
    c.check(ax >= -(r + 1) && ax <= r, "axis = {} is out of range [{}, {}] for inputs of rank {} ({})", ax, -(r + 1), r, r, xs.str());
    xs.insert(ax < 0 ? ax + r + 1 : ax, n);
    return xs;
  }
  /// stack_grad(Y@GRAD) -> X@GRAD[]
  static std::vector<Operator> grad(const GradContext& g) {
    Operator op = g.grad_op(GradContext::without_attrs);
    op.set_input(y_grad, g.output_grad(y)).set_output(x_grad, g.input_grad(x)).set_attr(axis, g.fwd().attr(axis));
    return {op};
  }
  static void eval_cpu(KernelContext&, const Attrs&);       // kernels/cpu/concat.hpp
  static void eval_grad_cpu(KernelContext&, const Attrs&);  // kernels/cpu/concat.hpp
};

}  // namespace oar::ops
