// oar/ops/sequence_pool.hpp: sequence_pool, one row per last-level sequence of a LoD tensor (average, sum,
// sum / sqrt(len), max, last or first row); the last LoD level is dropped. Kernels in kernels/cpu/sequence_pool.hpp.
#pragma once
#include "oar/ops/op.hpp"

namespace oar::ops {

/// out[i] = pool(x[lod[i] .. lod[i+1])) over the last LoD level, row by row of D = numel / rows elements:
/// AVERAGE sum / len, SUM sum, SQRT sum / sqrt(len), MAX max (MaxIndex[i, d] = the X row holding it), LAST,
/// FIRST. An empty sequence gives a row of zeros (MaxIndex -1) and no gradient.
/// X [N, ...] with LoD [..., [0, ..., N]] -> Out [S, ...] (S sequences) with the upper LoD levels; MaxIndex:
/// i32 of Out's shape for MAX, [0] otherwise. Grad: sequence_pool_grad(X, MaxIndex, Out@GRAD) -> X@GRAD.
struct SequencePool {
  static constexpr std::string_view type = "sequence_pool";
  static constexpr Slot x{"X"}, out{"Out"}, max_index{"MaxIndex"};
  static constexpr Slot x_grad{"X@GRAD"}, out_grad{"Out@GRAD"};
  static constexpr Attr<std::string> pooltype{"pooltype"};

  enum class PoolType { average, sum, sqrt, max, last, first };
  /// The pooltype string (Fluid's upper-case names) as a PoolType; false when it names none.
  static bool parse(std::string_view s, PoolType& t) {
    constexpr std::pair<std::string_view, PoolType> names[] = {{"AVERAGE", PoolType::average}, {"SUM", PoolType::sum}, {"SQRT", PoolType::sqrt},
                                                               {"MAX", PoolType::max},         {"LAST", PoolType::last}, {"FIRST", PoolType::first}};
    for (auto& [n, v] : names)
      if (n == s) return t = v, true;
    return false;
  }

  /// What the kernels read, decoded once when a program is prepared (a bad pooltype is an error here).
  struct Attrs {
    PoolType pooltype;
    explicit Attrs(const AttrReader& r) {
      const std::string s = r(SequencePool::pooltype);
      if (!parse(s, pooltype))
        throw Error(fmt::format("{}: pooltype '{}' must be one of AVERAGE, SUM, SQRT, MAX, LAST, FIRST", r.op().type(), s), r.op().origin());
    }
  };

  static OpDef def() {
    return OpDef(type, "one row per last-level sequence: average, sum, sqrt, max, last or first")
        .in(x).out(out).out(max_index, intermediate, "MAX: the X row of each maximum (i32), for the grad")
        .attr(pooltype, std::string("AVERAGE"), "AVERAGE, SUM, SQRT, MAX, LAST or FIRST")
        .check<std::string>([](const std::string& s) { PoolType t; return parse(s, t); }, "must be AVERAGE, SUM, SQRT, MAX, LAST or FIRST");
  }
  static void infer_shape(InferShapeContext& c) {
    const Shape& xs = c.shape(x);
    c.check(is_float(c.dtype(x)), "X must be a floating-point tensor, got {}", name(c.dtype(x)));
    c.check(xs.rank() >= 1, "X must have rank >= 1 (rows first), got {}", xs.str());
    Shape os = xs;
    os[0] = -1;  // the number of sequences is run-time data
    c.set_output(out, os, c.dtype(x), std::max(c.lod_level(x) - 1, 0));
    PoolType t = PoolType::average;
    parse(c.attr(pooltype), t);
    c.set_output(max_index, t == PoolType::max ? os : Shape{0}, DType::i32, 0);
  }
  /// sequence_pool_grad(X, MaxIndex, Out@GRAD) -> X@GRAD
  static std::vector<Operator> grad(const GradContext& g) {
    if (!g.wants_grad(x)) return {};
    return {g.grad_op({.inputs = {x}, .outputs = {max_index}, .output_grads = {out}, .input_grads = {x}})};
  }
  static void eval_cpu(KernelContext&, const Attrs&);       // kernels/cpu/sequence_pool.hpp
  static void eval_grad_cpu(KernelContext&, const Attrs&);  // kernels/cpu/sequence_pool.hpp
  static void eval_cuda(KernelContext&, const Attrs&);       // kernels/cuda/sequence.hpp
  static void eval_grad_cuda(KernelContext&, const Attrs&);  // kernels/cuda/sequence.hpp
};

}  // namespace oar::ops
