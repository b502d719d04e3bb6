// oar/ops/shape_ops.hpp: the ops that only change a tensor's shape: reshape, flatten, squeeze, unsqueeze.
// Their outputs share X's storage (no copy; safe because Tensor::resize never writes into shared storage),
// and their gradients share Out@GRAD's storage the same way.
#pragma once
#include "oar/ops/op.hpp"

namespace oar::ops {

namespace tensor_detail {

/// `axis` in [-rank, rank) -> [0, rank); anything else is an error through `c` naming `what`.
template <class Ctx>
int normalize_axis(const Ctx& c, int64_t axis, int rank, std::string_view what, const Shape& s) {
  c.check(axis >= -rank && axis < rank, "{} = {} is out of range for a tensor of rank {} ({})", what, axis, rank, s.str());
  return int(axis < 0 ? axis + rank : axis);
}

/// Fluid's reshape rule: 0 copies X's dim at that position, one -1 is inferred from the element count.
/// `in` may hold -1 (unknown) dims at build time; the result then holds -1 where it cannot be known.
template <class Ctx>
Shape reshape_shape(const Ctx& c, const Shape& in, const std::vector<int64_t>& want) {
  Shape out;
  int infer = -1;
  for (size_t i = 0; i < want.size(); ++i) {
    int64_t d = want[i];
    if (d == -1) {
      c.check(infer < 0, "shape [{}] has more than one -1", fmt::join(want, ", "));
      infer = int(i);
      out.push_back(-1);
    } else if (d == 0) {
      c.check(int(i) < in.rank(), "shape [{}] copies dim {} (0) but X {} has rank {}", fmt::join(want, ", "), i, in.str(), in.rank());
      out.push_back(in[int(i)]);
    } else {
      c.check(d > 0, "shape [{}] has dim {} = {}; dims must be > 0, 0 (copy) or -1 (infer)", fmt::join(want, ", "), i, d);
      out.push_back(d);
    }
  }
  // Compare X without the copied dims (0 entries) against the explicit dims: that works even when a copied
  // dim is unknown (the batch at build time), so [?, 3, 4] -> [0, -1] infers [?, 12].
  bool copied[Shape::kMaxRank] = {};  // a 0 entry is at a position < in.rank() (checked above)
  int64_t explicit_n = 1;
  for (size_t i = 0; i < want.size(); ++i) {
    if (want[i] == 0) copied[i] = true;
    else if (want[i] > 0) explicit_n *= want[i];
  }
  int64_t rest_n = 1;  // X's elements outside the copied dims; -1 when unknown
  for (int i = 0; i < in.rank(); ++i)
    if (!copied[i]) rest_n = in[i] < 0 || rest_n < 0 ? -1 : rest_n * in[i];
  if (infer >= 0) {
    if (rest_n >= 0) {
      c.check(explicit_n > 0 && rest_n % explicit_n == 0, "cannot reshape X {} to [{}]: {} elements outside the copied dims are not a multiple of {}",
              in.str(), fmt::join(want, ", "), rest_n, explicit_n);
      out[infer] = rest_n / explicit_n;
    }
  } else if (rest_n >= 0) {
    c.check(rest_n == explicit_n, "cannot reshape X {} to [{}]: {} elements outside the copied dims, {} in the new dims", in.str(),
            fmt::join(want, ", "), rest_n, explicit_n);
  }
  return out;
}

/// Flatten at `axis`: [prod(d[:axis]), prod(d[axis:])] (-1 when a factor is unknown).
template <class Ctx>
Shape flatten_shape(const Ctx& c, const Shape& in, int axis) {
  c.check(axis >= 0 && axis <= in.rank(), "axis = {} is out of range [0, {}] for X {}", axis, in.rank(), in.str());
  return Shape{in.numel(0, axis), in.numel(axis, in.rank())};
}

/// Drops dims `axes` (each must be 1); with no axes, every dim that is 1.
template <class Ctx>
Shape squeeze_shape(const Ctx& c, const Shape& in, const std::vector<int32_t>& axes) {
  bool drop[Shape::kMaxRank] = {};
  if (axes.empty()) {
    for (int i = 0; i < in.rank(); ++i) drop[i] = in[i] == 1;
  } else {
    for (int32_t a : axes) {
      int ax = normalize_axis(c, a, in.rank(), "axes entry", in);
      c.check(in[ax] == 1 || in[ax] < 0, "cannot squeeze dim {} of X {}: it is {}, not 1", ax, in.str(), in[ax]);
      drop[ax] = true;
    }
  }
  Shape out;
  for (int i = 0; i < in.rank(); ++i)
    if (!drop[i]) out.push_back(in[i]);
  return out;
}

/// Inserts a dim of 1 at each of `axes` in turn (a negative axis counts from the back of the shape so far).
template <class Ctx>
Shape unsqueeze_shape(const Ctx& c, const Shape& in, const std::vector<int32_t>& axes) {
  c.check(!axes.empty(), "axes must not be empty");
  Shape out = in;
  for (int32_t a : axes) {
    int r = out.rank();
    c.check(a >= -(r + 1) && a <= r, "axes entry {} is out of range [{}, {}] for a shape of rank {} ({})", a, -(r + 1), r, r, out.str());
    out.insert(a < 0 ? a + r + 1 : a, 1);
  }
  return out;
}

/// The slots every shape op has (its grad op reads X and Out@GRAD, writes X@GRAD).
struct ShapeOpNames {
  static constexpr Slot x{"X"}, out{"Out"};
  static constexpr Slot x_grad{"X@GRAD"}, out_grad{"Out@GRAD"};
};

/// The grad op of a shape op: <op>_grad(X, Out@GRAD) -> X@GRAD (X gives only the shape).
inline std::vector<Operator> shape_op_grad(const GradContext& g) {
  auto dx = g.input_grad(ShapeOpNames::x);
  if (!g.wants_grad(ShapeOpNames::x)) return {};
  return {g.default_grad(false)};
}

}  // namespace tensor_detail

/// out = x seen with shape `shape` (0 copies X's dim, one -1 is inferred).
/// X [2, 3, 4], {shape=[0, -1]} -> Out [2, 12]. Out shares X's storage. Grad: X@GRAD = Out@GRAD reshaped.
struct Reshape : tensor_detail::ShapeOpNames {
  static constexpr std::string_view type = "reshape";
  /// Its kernels make views or copy through the place: they serve every place (runtime/kernel_registry.hpp).
  static constexpr bool any_place = true;
  static constexpr Attr<std::vector<int32_t>> shape{"shape"};
  static constexpr Attr<bool> inplace{"inplace"};
  /// `shape` widened to int64 once, as reshape_shape reads it.
  struct Attrs {
    std::vector<int64_t> shape;
    explicit Attrs(const AttrReader& r) {
      auto s = r(Reshape::shape);
      shape.assign(s.begin(), s.end());
    }
  };
  static OpDef def() {
    return OpDef(type, "X with another shape of the same element count")
        .in(x).out(out)
        .required_attr(shape, "new dims: 0 copies X's dim, one -1 is inferred")
        .attr(inplace, false, "Fluid compatibility; Out always shares X's storage");
  }
  static void infer_shape(InferShapeContext& c) {
    const Shape& xs = c.shape(x);
    auto s = c.attr(shape);
    Shape os = tensor_detail::reshape_shape(c, xs, {s.begin(), s.end()});
    c.set_output(out, os, c.dtype(x));
    if (xs.rank() > 0 && os.rank() > 0 && xs[0] == os[0]) c.share_lod(x, out);
  }
  static std::vector<Operator> grad(const GradContext& g) { return tensor_detail::shape_op_grad(g); }
  static void eval_cpu(KernelContext&, const Attrs&);       // kernels/cpu/shape_ops.hpp
  static void eval_grad_cpu(KernelContext&, const Attrs&);  // kernels/cpu/shape_ops.hpp
};

/// out = x as a matrix: [prod(d[:axis]), prod(d[axis:])], 0 <= axis <= rank.
/// X [2, 3, 4], {axis=1} -> Out [2, 12]. Out shares X's storage. Grad: Out@GRAD reshaped to X.
struct Flatten : tensor_detail::ShapeOpNames {
  static constexpr std::string_view type = "flatten";
  /// Its kernels make views or copy through the place: they serve every place (runtime/kernel_registry.hpp).
  static constexpr bool any_place = true;
  static constexpr Attr<int32_t> axis{"axis"};
  struct Attrs {
    int32_t axis;
    explicit Attrs(const AttrReader& r) : axis(r(Flatten::axis)) {}
  };
  static OpDef def() { return OpDef(type, "X as a 2-D matrix split at axis").in(x).out(out).attr(axis, 1); }
  static void infer_shape(InferShapeContext& c) {
    c.set_output(out, tensor_detail::flatten_shape(c, c.shape(x), c.attr(axis)), c.dtype(x));
  }
  static std::vector<Operator> grad(const GradContext& g) { return tensor_detail::shape_op_grad(g); }
  static void eval_cpu(KernelContext&, const Attrs&);       // kernels/cpu/shape_ops.hpp
  static void eval_grad_cpu(KernelContext&, const Attrs&);  // kernels/cpu/shape_ops.hpp
};

/// out = x without the dims `axes` (each must be 1); no axes: without every dim of 1.
/// X [3, 1, 4, 1], {axes=[1]} -> Out [3, 4, 1]. Out shares X's storage. Grad: Out@GRAD reshaped to X.
/// NOTE: with no axes, a dim unknown at build time (-1) is kept at build time but dropped at run time if it
/// turns out to be 1, as in Fluid; name the axes to avoid that.
struct Squeeze : tensor_detail::ShapeOpNames {
  static constexpr std::string_view type = "squeeze";
  /// Its kernels make views or copy through the place: they serve every place (runtime/kernel_registry.hpp).
  static constexpr bool any_place = true;
  static constexpr Attr<std::vector<int32_t>> axes{"axes"};
  struct Attrs {
    std::vector<int32_t> axes;
    explicit Attrs(const AttrReader& r) : axes(r(Squeeze::axes)) {}
  };
  static OpDef def() { return OpDef(type, "X without dims of size 1").in(x).out(out).attr(axes, std::vector<int32_t>{}); }
  static void infer_shape(InferShapeContext& c) {
    c.set_output(out, tensor_detail::squeeze_shape(c, c.shape(x), c.attr(axes)), c.dtype(x));
  }
  static std::vector<Operator> grad(const GradContext& g) { return tensor_detail::shape_op_grad(g); }
  static void eval_cpu(KernelContext&, const Attrs&);       // kernels/cpu/shape_ops.hpp
  static void eval_grad_cpu(KernelContext&, const Attrs&);  // kernels/cpu/shape_ops.hpp
};

/// out = x with a dim of 1 inserted at each of `axes`, in order.
/// X [3, 4], {axes=[0, -1]} -> Out [1, 3, 4, 1]. Out shares X's storage. Grad: Out@GRAD reshaped to X.
struct Unsqueeze : tensor_detail::ShapeOpNames {
  static constexpr std::string_view type = "unsqueeze";
  /// Its kernels make views or copy through the place: they serve every place (runtime/kernel_registry.hpp).
  static constexpr bool any_place = true;
  static constexpr Attr<std::vector<int32_t>> axes{"axes"};
  struct Attrs {
    std::vector<int32_t> axes;
    explicit Attrs(const AttrReader& r) : axes(r(Unsqueeze::axes)) {}
  };
  static OpDef def() { return OpDef(type, "X with dims of size 1 inserted").in(x).out(out).required_attr(axes); }
  static void infer_shape(InferShapeContext& c) {
    const Shape& xs = c.shape(x);
    Shape os = tensor_detail::unsqueeze_shape(c, xs, c.attr(axes));
    c.set_output(out, os, c.dtype(x));
    if (xs.rank() > 0 && os[0] == xs[0]) c.share_lod(x, out);
  }
  static std::vector<Operator> grad(const GradContext& g) { return tensor_detail::shape_op_grad(g); }
  static void eval_cpu(KernelContext&, const Attrs&);       // kernels/cpu/shape_ops.hpp
  static void eval_grad_cpu(KernelContext&, const Attrs&);  // kernels/cpu/shape_ops.hpp
};

}  // namespace oar::ops
