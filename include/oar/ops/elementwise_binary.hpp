// oar/ops/elementwise_binary.hpp: the binary element-wise ops (elementwise_add .. elementwise_pow) with Fluid's
// broadcast of Y over a contiguous slice of X's dims starting at `axis`. One X-macro line each; the math is one
// functor in kernels/functors_binary.hpp, the kernels come from one launcher in kernels/cpu/elementwise_binary.hpp.
#pragma once
#include "oar/ops/binary_list.hpp"
#include "oar/ops/op.hpp"


namespace oar::ops {

/// How Y broadcasts over X: X viewed as [pre, n, post], Y as [n]. Same shapes give pre = post = 1.
struct BroadcastDims {
  int64_t pre = 1, n = 1, post = 1;
  bool same = false;  ///< X and Y have the same shape
};

/// Fluid's rule: axis = -1 means rank(X) - rank(Y); Y's trailing dims of size 1 are dropped; the rest of Y's
/// dims must equal X's dims axis, axis+1, ...  Unknown dims (-1) are accepted where they may match; `pre`,
/// `n`, `post` are then -1 where unknown. Returns "" or why the shapes do not broadcast.
/// x: [2, 3, 4, 5], y: [3, 4], axis 1 -> pre 2, n 12, post 5.   y: [1], [1, 1] or [] -> a scalar: n = 1.
inline std::string broadcast_dims(const Shape& x, const Shape& y, int axis, BroadcastDims& b) {
  b = BroadcastDims{};
  if (x == y) {
    b.same = true;
    b.n = x.numel();
    return {};
  }
  if (y.rank() > x.rank())
    return fmt::format("Y {} has a higher rank than X {}", y.str(), x.str());
  int ax = axis == -1 ? x.rank() - y.rank() : axis;
  int ry = y.rank();
  while (ry > 0 && y[ry - 1] == 1) --ry;  // Fluid's trim_trailing_singular_dims
  if (ry == 0) {                           // Y holds one value ([1], [1, 1] or rank 0): a scalar
    b.pre = x.numel();
    return {};
  }
  if (ax < 0 || ax + ry > x.rank() || (ax >= x.rank() && x.rank() > 0))
    return fmt::format("axis = {} is out of range for X {} and Y {} (Y's dims must fit in X's from axis on; -1 means {})", axis, x.str(),
                       y.str(), x.rank() - y.rank());
  auto mul = [](int64_t a, int64_t d) { return a < 0 || d < 0 ? int64_t(-1) : a * d; };
  for (int i = 0; i < ax; ++i) b.pre = mul(b.pre, x[i]);
  for (int i = 0; i < ry; ++i) {
    if (!dims_compatible(x[ax + i], y[i]))
      return fmt::format("Y {} does not match X {} at axis = {}: Y dim {} is {} but X dim {} is {}", y.str(), x.str(), axis, i, y[i], ax + i,
                         x[ax + i]);
    b.n = mul(b.n, x[ax + i] >= 0 ? x[ax + i] : y[i]);
  }
  for (int i = ax + ry; i < x.rank(); ++i) b.post = mul(b.post, x[i]);
  return {};
}

/// The names every binary element-wise op has, and what its kernels read.
struct BinaryOp {
  static constexpr Slot x{"X"}, y{"Y"}, out{"Out"};
  static constexpr Slot x_grad{"X@GRAD"}, y_grad{"Y@GRAD"}, out_grad{"Out@GRAD"};
  static constexpr Attr<int32_t> axis{"axis"};
  struct Attrs {
    int32_t axis;
    explicit Attrs(const AttrReader& r) : axis(r(BinaryOp::axis)) {}
  };
  static OpDef make_def(std::string_view type) {
    return OpDef(type, "element-wise: Out = f(X, Y), Y broadcast over X's dims from `axis` on")
        .in(x).in(y).out(out)
        .attr(axis, -1, "the first dim of X that Y's dims line up with; -1: the last rank(Y) dims")
        .check<int32_t>([](int v) { return v >= -1; }, "must be >= -1");
  }
  static void infer_shape(InferShapeContext& c) {
    const Shape& xs = c.shape(x);
    const Shape& ys = c.shape(y);
    c.check(c.dtype(x) == c.dtype(y), "X is {} but Y is {}", name(c.dtype(x)), name(c.dtype(y)));
    BroadcastDims b;
    std::string why = broadcast_dims(xs, ys, c.attr(axis), b);
    c.check(why.empty(), "{}", why);
    c.set_output(out, xs, c.dtype(x));
    c.share_lod(x, out);
  }
};

/// One struct per line of OAR_BINARY_OPS, e.g. `ElementwiseAdd` for elementwise_add:
/// out[i, j, k] = f(x[i, j, k], y[j]) with X as [pre, n, post] (see broadcast_dims); Out has X's shape and LoD.
/// <type>_grad(X, Y, Out@GRAD) -> X@GRAD (X's shape), Y@GRAD (summed over the broadcast dims).
#define OAR_DECLARE_BINARY_OP(op_type, Op, Functor)                                                    \
  struct Op : BinaryOp {                                                                               \
    static constexpr std::string_view type = #op_type;                                                 \
    static OpDef def() { return make_def(type); }                                                      \
    static std::vector<Operator> grad(const GradContext& g) { return {g.default_grad(false)}; }        \
    static void eval_cpu(KernelContext&, const Attrs&);      /* kernels/cpu/elementwise_binary.hpp */  \
    static void eval_grad_cpu(KernelContext&, const Attrs&); /* kernels/cpu/elementwise_binary.hpp */  \
    static void eval_cuda(KernelContext&, const Attrs&);     /* kernels/cuda/elementwise.hpp */        \
    static void eval_grad_cuda(KernelContext&, const Attrs&); /* kernels/cuda/elementwise.hpp */       \
  };
OAR_BINARY_OPS(OAR_DECLARE_BINARY_OP)
#undef OAR_DECLARE_BINARY_OP

}  // namespace oar::ops

namespace oar {
#define OAR_BINARY_OP_TYPE(type, Op, Functor) ops::Op,
using BinaryOps = op_list<OAR_BINARY_OPS(OAR_BINARY_OP_TYPE) void>;
#undef OAR_BINARY_OP_TYPE
}  // namespace oar
