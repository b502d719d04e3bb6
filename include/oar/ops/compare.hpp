// oar/ops/compare.hpp: the comparison ops (less_than .. not_equal: bool Out from two numeric tensors, Y broadcast
// over X as the element-wise binary ops do) and the logical ops over bool tensors (logical_and, _or, _xor, _not).
// None has a gradient. Kernels in kernels/cpu/compare.hpp.
#pragma once
#include "oar/ops/elementwise_binary.hpp"
#include "oar/ops/op.hpp"

// X(op type, op struct, std:: comparison functor the CPU kernel applies)
#define OAR_COMPARE_OPS(X)                         \
  X(less_than, LessThan, std::less<>)              \
  X(less_equal, LessEqual, std::less_equal<>)      \
  X(greater_than, GreaterThan, std::greater<>)     \
  X(greater_equal, GreaterEqual, std::greater_equal<>) \
  X(equal, Equal, std::equal_to<>)                 \
  X(not_equal, NotEqual, std::not_equal_to<>)

// X(op type, op struct, std:: functor on two bools)
#define OAR_LOGICAL_BINARY_OPS(X)                \
  X(logical_and, LogicalAnd, std::logical_and<>) \
  X(logical_or, LogicalOr, std::logical_or<>)    \
  X(logical_xor, LogicalXor, std::not_equal_to<>)

namespace oar::ops {

/// What every comparison op has: out[i] = cmp(x[i], y[j]) with Y broadcast over X's dims from `axis` on
/// (broadcast_dims in elementwise_binary.hpp). X, Y of one dtype (i32, i64, f32, f64) -> Out bool [X's shape],
/// X's LoD. No gradient.
struct CompareOp {
  static constexpr Slot x{"X"}, y{"Y"}, out{"Out"};
  static constexpr Attr<int32_t> axis{"axis"};
  struct Attrs {
    int32_t axis;
    explicit Attrs(const AttrReader& r) : axis(r(CompareOp::axis)) {}
  };
  static OpDef make_def(std::string_view type) {
    return OpDef(type, "Out = compare(X, Y) element-wise as bool, Y broadcast over X's dims from `axis` on")
        .in(x).in(y).out(out)
        .attr(axis, -1, "the first dim of X that Y's dims line up with; -1: the last rank(Y) dims")
        .check<int32_t>([](int v) { return v >= -1; }, "must be >= -1");
  }
  static void infer_shape(InferShapeContext& c) {
    const DType t = c.dtype(x);
    c.check(t == c.dtype(y), "X is {} but Y is {}", name(t), name(c.dtype(y)));
    c.check(t == DType::i32 || t == DType::i64 || t == DType::f32 || t == DType::f64, "compares i32, i64, f32 or f64 tensors, got {}", name(t));
    BroadcastDims b;
    const std::string why = broadcast_dims(c.shape(x), c.shape(y), c.attr(axis), b);
    c.check(why.empty(), "{}", why);
    c.set_output(out, c.shape(x), DType::boolean);
    c.share_lod(x, out);
  }
};

/// One struct per line of OAR_COMPARE_OPS, e.g. `LessThan` for less_than: out = x < y.
#define OAR_DECLARE_COMPARE_OP(op_type, Op, Functor)                         \
  struct Op : CompareOp {                                                    \
    static constexpr std::string_view type = #op_type;                       \
    static OpDef def() { return make_def(type); }                            \
    static void eval_cpu(KernelContext&, const Attrs&); /* kernels/cpu/compare.hpp */ \
    static void eval_cuda(KernelContext&, const Attrs&); /* kernels/cuda/logic.hpp */ \
  };
OAR_COMPARE_OPS(OAR_DECLARE_COMPARE_OP)
#undef OAR_DECLARE_COMPARE_OP

/// What every two-input logical op has: out = f(x, y) element-wise. X, Y bool of one shape -> Out bool, X's LoD.
struct LogicalBinaryOp {
  static constexpr Slot x{"X"}, y{"Y"}, out{"Out"};
  static OpDef make_def(std::string_view type) { return OpDef(type, "Out = f(X, Y) element-wise over bool tensors of one shape").in(x).in(y).out(out); }
  static void infer_shape(InferShapeContext& c) {
    c.check(c.dtype(x) == DType::boolean && c.dtype(y) == DType::boolean, "X and Y must be bool, got {} and {}", name(c.dtype(x)), name(c.dtype(y)));
    const Shape& xs = c.shape(x);
    const Shape& ys = c.shape(y);
    bool ok = xs.rank() == ys.rank();
    for (int d = 0; ok && d < xs.rank(); ++d) ok = dims_compatible(xs[d], ys[d]);
    c.check(ok, "X {} and Y {} must have the same shape", xs.str(), ys.str());
    c.set_output(out, xs, DType::boolean);
    c.share_lod(x, out);
  }
};

/// One struct per line of OAR_LOGICAL_BINARY_OPS, e.g. `LogicalAnd` for logical_and: out = x && y.
#define OAR_DECLARE_LOGICAL_OP(op_type, Op, Functor)                         \
  struct Op : LogicalBinaryOp {                                              \
    static constexpr std::string_view type = #op_type;                       \
    static OpDef def() { return make_def(type); }                            \
    static void eval_cpu(KernelContext&, const NoAttrs&); /* kernels/cpu/compare.hpp */ \
    static void eval_cuda(KernelContext&, const NoAttrs&); /* kernels/cuda/logic.hpp */ \
  };
OAR_LOGICAL_BINARY_OPS(OAR_DECLARE_LOGICAL_OP)
#undef OAR_DECLARE_LOGICAL_OP

/// out = !x. X bool [any] -> Out bool [same], X's LoD. No gradient.
struct LogicalNot {
  static constexpr std::string_view type = "logical_not";
  static constexpr Slot x{"X"}, out{"Out"};
  static OpDef def() { return OpDef(type, "Out = !X element-wise over a bool tensor").in(x).out(out); }
  static void infer_shape(InferShapeContext& c) {
    c.check(c.dtype(x) == DType::boolean, "X must be bool, got {}", name(c.dtype(x)));
    c.set_output(out, c.shape(x), DType::boolean);
    c.share_lod(x, out);
  }
  static void eval_cpu(KernelContext&, const NoAttrs&);  // kernels/cpu/compare.hpp
  static void eval_cuda(KernelContext&, const NoAttrs&);  // kernels/cuda/amp.hpp (mixed precision's condition)
};

}  // namespace oar::ops
