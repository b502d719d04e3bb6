// oar/ops/lstm_unit.hpp: lstm_unit, one LSTM step on a batch of rows whose gate inputs are already computed
// (Fluid's lstm_unit: the layer lstm_unit() projects [x, h_prev] with an fc first). Kernels in kernels/cpu/lstm_unit.hpp.
#pragma once
#include "oar/ops/rnn_common.hpp"

namespace oar::ops {

/// Gate order (Fluid's lstm_unit, unlike lstm): the 4D columns of X are [input i | forget f | output o | candidate g].
///   i = sigmoid(x_i), f = sigmoid(x_f + forget_bias), o = sigmoid(x_o), g = tanh(x_g)
///   C = f * C_prev + i * g,  H = o * tanh(C)
/// X [N, 4D], C_prev [N, D] -> C, H [N, D].
struct LstmUnit {
  static constexpr std::string_view type = "lstm_unit";
  static constexpr Slot x{"X"}, c_prev{"C_prev"}, c{"C"}, h{"H"};
  static constexpr Slot x_grad{"X@GRAD"}, c_prev_grad{"C_prev@GRAD"}, c_grad{"C@GRAD"}, h_grad{"H@GRAD"};
  static constexpr Attr<float> forget_bias{"forget_bias"};

  struct Attrs {
    float forget_bias;
    explicit Attrs(const AttrReader& r) : forget_bias(r(LstmUnit::forget_bias)) {}
  };

  static OpDef def() {
    return OpDef(type, "one LSTM step from precomputed gate inputs X [i, f, o, g] and the previous cell")
        .in(x, none, "[N, 4D]").in(c_prev, none, "[N, D]").out(c).out(h)
        .attr(forget_bias, 0.0f, "added to the forget gate's input");
  }
  static void infer_shape(InferShapeContext& ctx) {
    const Shape& xs = ctx.shape(x);
    const Shape& cs = ctx.shape(c_prev);
    ctx.check(is_float(ctx.dtype(x)), "X must be a floating-point tensor, got {}", name(ctx.dtype(x)));
    ctx.check(cs.rank() == 2 && cs[1] > 0, "C_prev must be [N, D] with a known D, got {}", cs.str());
    ctx.check(xs.rank() == 2 && dims_compatible(xs[0], cs[0]) && dims_compatible(xs[1], 4 * cs[1]), "X must be [N, 4D] = [{}, {}] (C_prev is {}), got {}",
              cs[0], 4 * cs[1], cs.str(), xs.str());
    ctx.set_output(c, cs, ctx.dtype(x));
    ctx.set_output(h, cs, ctx.dtype(x));
  }
  /// lstm_unit_grad(X, C_prev, C, C@GRAD, H@GRAD) -> X@GRAD, C_prev@GRAD
  static std::vector<Operator> grad(const GradContext& g) {
    return {g.grad_op({.inputs = {x, c_prev}, .outputs = {c}, .output_grads = {c, h}, .input_grads = {x, c_prev}})};
  }
  static void eval_cpu(KernelContext&, const Attrs&);       // kernels/cpu/lstm_unit.hpp
  static void eval_grad_cpu(KernelContext&, const Attrs&);  // kernels/cpu/lstm_unit.hpp
  static void eval_cuda(KernelContext&, const Attrs&);       // kernels/cuda/rnn.hpp
  static void eval_grad_cuda(KernelContext&, const Attrs&);  // kernels/cuda/rnn.hpp
};

}  // namespace oar::ops
