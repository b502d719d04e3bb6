// oar/ops/lod_reset.hpp: lod_reset, X's data under a new LoD taken from Y's LoD, from Y's values (offsets)
// or from the target_lod attribute. Kernels in kernels/cpu/lod_reset.hpp (every place).
#pragma once
#include "oar/ops/op.hpp"

namespace oar::ops {

/// out = x (a copy) with LoD: Y's LoD when Y is given and has one (all its levels); else one level of offsets
/// from Y's values (i32 or i64, [K] or [K, 1]) when Y is given; else [target_lod]. Offsets start at 0, never
/// decrease (repeats are empty sequences) and end at X's rows. Any dtype.
/// X [N, ...] (LoD dropped), (Y) -> Out [N, ...]. Grad: lod_reset_grad(X, Out@GRAD) -> X@GRAD = Out@GRAD with
/// X's LoD; Y gets none.
struct LoDReset {
  static constexpr std::string_view type = "lod_reset";
  /// Its kernels copy through the place and read Y's offsets on the host: they serve every place
  /// (runtime/kernel_registry.hpp).
  static constexpr bool any_place = true;
  static constexpr Slot x{"X"}, y{"Y"}, out{"Out"}, x_grad{"X@GRAD"}, out_grad{"Out@GRAD"};
  static constexpr Attr<std::vector<int32_t>> target_lod{"target_lod"};

  /// What the kernels read: the attribute as a one-level LoD (built once at prepare; empty when not given).
  struct Attrs {
    std::vector<std::vector<size_t>> target;  // a LoD (device/tensor.hpp, a layer above ops)
    explicit Attrs(const AttrReader& r) {
      std::vector<int32_t> t = r(LoDReset::target_lod);
      if (t.empty()) return;
      target.emplace_back();
      for (int32_t v : t) {
        if (v < 0) throw Error(fmt::format("{}: target_lod has a negative offset {}", r.op().type(), v), r.op().origin());
        target[0].push_back(size_t(v));
      }
    }
  };

  static OpDef def() {
    return OpDef(type, "X with a new LoD from Y's LoD, Y's values or target_lod")
        .in(x).in(y, dispensable, "gives the LoD: its own LoD, or (without one) its values as level-0 offsets")
        .out(out)
        .attr(target_lod, std::vector<int32_t>{}, "level-0 offsets, used when Y is not given");
  }
  static void infer_shape(InferShapeContext& c) {
    const Shape& xs = c.shape(x);
    c.check(xs.rank() >= 1, "X must have rank >= 1 (rows first), got {}", xs.str());
    int level = 1;
    if (c.has_input(y) && c.num_inputs(y) > 0) {
      const int ly = c.lod_level(y);
      if (ly > 0) level = ly;
      else c.check(c.dtype(y) == DType::i32 || c.dtype(y) == DType::i64, "Y without LoD gives offsets and must be i32 or i64, got {}", name(c.dtype(y)));
    } else {
      c.check(!c.attr(target_lod).empty(), "needs Y or a target_lod");
    }
    c.set_output(out, xs, c.dtype(x), level);
  }
  /// lod_reset_grad(X, Out@GRAD) -> X@GRAD
  static std::vector<Operator> grad(const GradContext& g) {
    if (!g.wants_grad(x)) return {};
    return {g.grad_op({.inputs = {x}, .output_grads = {out}, .input_grads = {x}}, GradContext::without_attrs)};
  }
  static void eval_cpu(KernelContext&, const Attrs&);       // kernels/cpu/lod_reset.hpp
  static void eval_grad_cpu(KernelContext&, const Attrs&);  // kernels/cpu/lod_reset.hpp
};

}  // namespace oar::ops
