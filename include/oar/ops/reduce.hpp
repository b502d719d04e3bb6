// oar/ops/reduce.hpp: reduce_sum, reduce_mean, reduce_max, reduce_min over the dims in `dim` (negative counts
// from the back), or over everything with reduce_all; keep_dim leaves the reduced dims as 1.
#pragma once
#include <algorithm>

#include "oar/ops/op.hpp"

// X(op type, op struct, reducer in kernels/cpu/reduce.hpp, grad needs Out)
#define OAR_REDUCE_OPS(X)                        \
  X(reduce_sum, ReduceSum, SumReducer, false)    \
  X(reduce_mean, ReduceMean, MeanReducer, false) \
  X(reduce_max, ReduceMax, MaxReducer, true)     \
  X(reduce_min, ReduceMin, MinReducer, true)

namespace oar::ops {

/// The reduced dims of a rank-`rank` X, normalized to [0, rank) and sorted; "" or why `dim` is invalid in `why`.
inline std::vector<int> reduce_axes(const Shape& x, const std::vector<int32_t>& dim, bool reduce_all, std::string& why) {
  std::vector<int> axes;
  if (reduce_all) {
    for (int i = 0; i < x.rank(); ++i) axes.push_back(i);
    return axes;
  }
  if (dim.empty()) why = "dim is empty (set reduce_all to reduce every dim)";
  for (int32_t d : dim) {
    int a = d < 0 ? d + x.rank() : d;
    if (a < 0 || a >= x.rank()) {
      why = fmt::format("dim {} is out of range for X {} of rank {}", d, x.str(), x.rank());
      return {};
    }
    if (std::find(axes.begin(), axes.end(), a) != axes.end()) {
      why = fmt::format("dim {} is listed twice in dim [{}] for X {}", d, fmt::join(dim, ", "), x.str());
      return {};
    }
    axes.push_back(a);
  }
  std::sort(axes.begin(), axes.end());
  return axes;
}

/// X's shape with the reduced dims removed (or 1 with keep_dim); [1] when nothing is left (Fluid).
/// x: [2, 3, 4], axes {1} -> [2, 4] ([2, 1, 4] with keep_dim).
inline Shape reduce_shape(const Shape& x, const std::vector<int>& axes, bool keep_dim) {
  Shape out;
  for (int i = 0; i < x.rank(); ++i) {
    bool r = std::find(axes.begin(), axes.end(), i) != axes.end();
    if (!r) out.push_back(x[i]);
    else if (keep_dim) out.push_back(1);
  }
  if (out.empty()) out.push_back(1);
  return out;
}

/// The names every reduce op has, and what its kernels read.
struct ReduceOp {
  static constexpr Slot x{"X"}, out{"Out"};
  static constexpr Slot x_grad{"X@GRAD"}, out_grad{"Out@GRAD"};
  static constexpr Attr<std::vector<int32_t>> dim{"dim"};
  static constexpr Attr<bool> keep_dim{"keep_dim"}, reduce_all{"reduce_all"};
  struct Attrs {
    std::vector<int32_t> dim;
    bool keep_dim, reduce_all;
    explicit Attrs(const AttrReader& r) : dim(r(ReduceOp::dim)), keep_dim(r(ReduceOp::keep_dim)), reduce_all(r(ReduceOp::reduce_all)) {}
  };
  static OpDef make_def(std::string_view type) {
    return OpDef(type, "reduces X over the dims in `dim` (all dims with reduce_all)")
        .in(x).out(out)
        .attr(dim, std::vector<int32_t>{0}, "dims to reduce; negative counts from the back")
        .attr(keep_dim, false, "keep the reduced dims as size 1")
        .attr(reduce_all, false, "reduce every dim to a [1] (or all-ones with keep_dim) output");
  }
  static void infer_shape(InferShapeContext& c) {
    const Shape& xs = c.shape(x);
    std::string why;
    auto axes = reduce_axes(xs, c.attr(dim), c.attr(reduce_all), why);
    c.check(why.empty(), "{}", why);
    c.set_output(out, reduce_shape(xs, axes, c.attr(keep_dim)), c.dtype(x));
  }
};

/// reduce_sum: out = sum over the reduced dims; grad: dOut broadcast back.
/// reduce_mean: out = sum / count; grad: dOut / count broadcast back.
/// reduce_max / reduce_min: out = max / min; grad: dOut to every element equal to the extreme (ties: all of
/// them, as Fluid does: dx = dout * (x == out)).
/// x: [2, 3, 4], dim {1, -1} -> [2] (keep_dim: [2, 1, 1]).
#define OAR_DECLARE_REDUCE_OP(op_type, Op, Reducer, with_out)                                               \
  struct Op : ReduceOp {                                                                                    \
    static constexpr std::string_view type = #op_type;                                                      \
    static OpDef def() { return make_def(type); }                                                           \
    /* <type>_grad(X, [Out,] Out@GRAD) -> X@GRAD */                                                         \
    static std::vector<Operator> grad(const GradContext& g) { return {g.default_grad(with_out)}; }          \
    static void eval_cpu(KernelContext&, const Attrs&);      /* kernels/cpu/reduce.hpp */                   \
    static void eval_grad_cpu(KernelContext&, const Attrs&); /* kernels/cpu/reduce.hpp */                   \
    static void eval_cuda(KernelContext&, const Attrs&);     /* kernels/cuda/reduce.hpp */                  \
    static void eval_grad_cuda(KernelContext&, const Attrs&); /* kernels/cuda/reduce.hpp */                 \
  };
OAR_REDUCE_OPS(OAR_DECLARE_REDUCE_OP)
#undef OAR_DECLARE_REDUCE_OP

}  // namespace oar::ops

namespace oar {
#define OAR_REDUCE_OP_TYPE(type, Op, Reducer, with_out) ops::Op,
using ReduceOps = op_list<OAR_REDUCE_OPS(OAR_REDUCE_OP_TYPE) void>;
#undef OAR_REDUCE_OP_TYPE
}  // namespace oar
