// oar/ops/concat.hpp: joining and splitting along an axis: concat (X[] -> Out), split (X -> Out[]) and
// stack (X[] -> Y, along a new axis).
#pragma once
#include "oar/ops/shape_ops.hpp"

namespace oar::ops {

/// out = [x0 | x1 | ...] along `axis` (negative counts from the back); the other dims must agree.
/// X [[2, 3], [2, 5]], {axis=1} -> Out [2, 8]. Any dtype. Grad: concat_grad(X, Out@GRAD) -> X@GRAD[] (the pieces).
struct Concat {
  static OpDef def() { return OpDef("concat", "the inputs joined along axis").in("X", duplicable).out("Out").attr("axis", 0); }
  static void infer_shape(InferShapeContext& c) {
    size_t n = c.num_inputs("X");
    const Shape& x0 = c.shape("X", 0);
    int axis = tensor_detail::normalize_axis(c, c.attr<int32_t>("axis"), x0.rank(), "axis", x0);
    Shape out = x0;
    for (size_t i = 1; i < n; ++i) {
      const Shape& xi = c.shape("X", i);
      c.check(c.dtype("X", i) == c.dtype("X", 0), "X[{}] is {} but X[0] is {}", i, name(c.dtype("X", i)), name(c.dtype("X", 0)));
      c.check(xi.rank() == x0.rank(), "X[{}] {} has rank {} but X[0] {} has rank {}", i, xi.str(), xi.rank(), x0.str(), x0.rank());
      for (int d = 0; d < x0.rank(); ++d) {
        if (d == axis) {
          out[d] = out[d] < 0 || xi[d] < 0 ? -1 : out[d] + xi[d];
        } else {
          c.check(dims_compatible(out[d], xi[d]), "X[{}] {} differs from X[0] {} in dim {} (only axis {} may differ)", i, xi.str(), x0.str(), d, axis);
          if (out[d] < 0) out[d] = xi[d];
        }
      }
    }
    c.set_output("Out", out, c.dtype("X", 0));
    if (axis != 0) c.share_lod("X", "Out");
  }
  static std::vector<Operator> grad(const GradContext& g) { return {g.default_grad(false)}; }
  static void eval_cpu(KernelContext&);       // kernels/cpu/concat.hpp
  static void eval_grad_cpu(KernelContext&);  // kernels/cpu/concat.hpp
};

/// out[i] = the i-th piece of x along `axis`: `num` equal pieces, or pieces of `sections` sizes (one may be
/// -1: the rest). With neither, as many equal pieces as there are outputs.
/// X [2, 8], {sections=[3, 5], axis=1} -> Out [[2, 3], [2, 5]]. Any dtype. Grad: X@GRAD = concat(Out@GRAD[]).
struct Split {
  static OpDef def() {
    return OpDef("split", "X cut into pieces along axis")
        .in("X").out("Out", duplicable)
        .attr("num", 0).check<int32_t>([](int v) { return v >= 0; }, "must be >= 0")
        .attr("sections", std::vector<int32_t>{})
        .attr("axis", 0);
  }
  static void infer_shape(InferShapeContext& c) {
    const Shape& x = c.shape("X");
    int axis = tensor_detail::normalize_axis(c, c.attr<int32_t>("axis"), x.rank(), "axis", x);
    auto sizes = sections(c, x[axis], c.num_outputs("Out"));
    for (size_t i = 0; i < sizes.size(); ++i) {
      Shape o = x;
      o[axis] = sizes[i];
      c.set_output("Out", o, c.dtype("X"), axis == 0 ? -1 : c.lod_level("X"), i);
    }
  }
  /// The size of each piece along the axis (dim may be -1 at build time: then the sizes it decides are -1).
  template <class Ctx>
  static std::vector<int64_t> sections(const Ctx& c, int64_t dim, size_t n_out) {
    int num = c.template attr<int32_t>("num");
    auto sec = c.template attr<std::vector<int32_t>>("sections");
    c.check(num == 0 || sec.empty(), "give num ({}) or sections ([{}]), not both", num, fmt::join(sec, ", "));
    if (sec.empty()) {
      if (num == 0) num = int(n_out);
      c.check(size_t(num) == n_out, "num = {} but Out has {} variables", num, n_out);
      c.check(dim < 0 || dim % num == 0, "the split dim {} is not a multiple of num = {}", dim, num);
      return std::vector<int64_t>(n_out, dim < 0 ? -1 : dim / num);
    }
    c.check(sec.size() == n_out, "sections [{}] has {} entries but Out has {} variables", fmt::join(sec, ", "), sec.size(), n_out);
    std::vector<int64_t> out(sec.begin(), sec.end());
    int infer = -1;
    int64_t sum = 0;
    for (size_t i = 0; i < out.size(); ++i) {
      if (out[i] == -1) {
        c.check(infer < 0, "sections [{}] has more than one -1", fmt::join(sec, ", "));
        infer = int(i);
      } else {
        c.check(out[i] >= 0, "sections [{}] has a negative entry {}", fmt::join(sec, ", "), out[i]);
        sum += out[i];
      }
    }
    if (infer >= 0) {
      c.check(dim < 0 || sum <= dim, "sections [{}] add up to {}, more than the split dim {}", fmt::join(sec, ", "), sum, dim);
      out[size_t(infer)] = dim < 0 ? -1 : dim - sum;
    } else {
      c.check(dim < 0 || sum == dim, "sections [{}] add up to {} but the split dim is {}", fmt::join(sec, ", "), sum, dim);
    }
    return out;
  }
  /// concat(X = Out@GRAD[], axis) -> X@GRAD, as Fluid's split grad maker.
  static std::vector<Operator> grad(const GradContext& g) {
    auto dx = g.input_grad("X");
    if (dx[0] == kEmptyVarName) return {};
    Operator op("concat");
    op.set_input("X", g.output_grad("Out")).set_output("Out", dx).set_attr("axis", g.fwd().attr<int32_t>("axis"));
    op.set_origin(g.fwd().origin());
    return {op};
  }
  static void eval_cpu(KernelContext&);  // kernels/cpu/concat.hpp
};

/// y = the inputs stacked along a new dim `axis` in [-(rank+1), rank]; all inputs have one shape.
/// X [[2, 3] x 4], {axis=1} -> Y [2, 4, 3]. Any dtype. Grad: stack_grad(Y@GRAD) -> X@GRAD[] (the slices).
struct Stack {
  static OpDef def() { return OpDef("stack", "the inputs stacked along a new axis").in("X", duplicable).out("Y").attr("axis", 0); }
  static void infer_shape(InferShapeContext& c) {
    size_t n = c.num_inputs("X");
    Shape x = c.shape("X", 0);
    for (size_t i = 1; i < n; ++i) {
      const Shape& xi = c.shape("X", i);
      c.check(c.dtype("X", i) == c.dtype("X", 0), "X[{}] is {} but X[0] is {}", i, name(c.dtype("X", i)), name(c.dtype("X", 0)));
      bool ok = xi.rank() == x.rank();
      for (int d = 0; ok && d < x.rank(); ++d) ok = dims_compatible(x[d], xi[d]);
      c.check(ok, "X[{}] {} differs from X[0] {}; stacked inputs need one shape", i, xi.str(), c.shape("X", 0).str());
      for (int d = 0; d < x.rank(); ++d)
        if (x[d] < 0) x[d] = xi[d];
    }
    c.set_output("Y", x_with_axis(c, x, int64_t(n)), c.dtype("X", 0));
  }
  template <class Ctx>
  static Shape x_with_axis(const Ctx& c, Shape x, int64_t n) {
    int axis = c.template attr<int32_t>("axis"), r = x.rank();
    c.check(axis >= -(r + 1) && axis <= r, "axis = {} is out of range [{}, {}] for inputs of rank {} ({})", axis, -(r + 1), r, r, x.str());
    x.insert(axis < 0 ? axis + r + 1 : axis, n);
    return x;
  }
  /// stack_grad(Y@GRAD) -> X@GRAD[]
  static std::vector<Operator> grad(const GradContext& g) {
    Operator op("stack_grad");
    op.set_input("Y@GRAD", g.output_grad("Y")).set_output("X@GRAD", g.input_grad("X")).set_attr("axis", g.fwd().attr<int32_t>("axis"));
    op.set_origin(g.fwd().origin());
    return {op};
  }
  static void eval_cpu(KernelContext&);       // kernels/cpu/concat.hpp
  static void eval_grad_cpu(KernelContext&);  // kernels/cpu/concat.hpp
};

}  // namespace oar::ops
