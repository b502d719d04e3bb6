// oar/ops/batch_norm.hpp: batch normalization over N and the spatial dims of an NCHW tensor, with running
// statistics updated in place (MeanOut is Mean, VarianceOut is Variance). Kernels in kernels/cpu/batch_norm.hpp.
#pragma once
#include "oar/ops/op.hpp"

namespace oar::ops {

/// training: mean_c, var_c over (N, H, W) (biased); y = (x - mean_c) / sqrt(var_c + eps) * scale_c + bias_c;
///   MeanOut = Mean * momentum + mean * (1 - momentum), VarianceOut = Variance * momentum + var * (1 - momentum)
///   (the biased batch variance, as Fluid's CPU kernel does); SavedMean = mean, SavedVariance = 1 / sqrt(var + eps).
/// is_test or use_global_stats: the same with Mean / Variance in place of the batch statistics; MeanOut and
///   VarianceOut keep Mean / Variance; SavedMean / SavedVariance hold them (inverse std) for the grad.
/// x: [N, C] or [N, C, H, W] (rank 2..5, NCHW), scale, bias, mean, variance: [C] -> y: x's shape, the rest [C].
struct BatchNorm {
  static OpDef def() {
    return OpDef("batch_norm", "batch normalization with running statistics (NCHW)")
        .in("X").in("Scale").in("Bias").in("Mean").in("Variance")
        .out("Y").out("MeanOut").out("VarianceOut").out("SavedMean", intermediate).out("SavedVariance", intermediate)
        .attr("momentum", 0.9f, "running = running * momentum + batch * (1 - momentum)")
        .attr("epsilon", 1e-5f, "added to the variance").check<float>([](float e) { return e >= 0; }, "must be >= 0")
        .attr("is_test", false, "use the running statistics")
        .attr("data_layout", std::string("NCHW")).check<std::string>([](const std::string& s) { return s == "NCHW"; }, "only NCHW is supported (NHWC is not implemented)")
        .attr("use_global_stats", false, "normalize with the running statistics in training too");
  }
  static void infer_shape(InferShapeContext& c) {
    const Shape& x = c.shape("X");
    c.check(is_float(c.dtype("X")), "X must be a floating-point tensor, got {}", name(c.dtype("X")));
    c.check(x.rank() >= 2 && x.rank() <= 5, "X must have rank 2 to 5 ([N, C] or [N, C, H, W]), got {}", x.str());
    int64_t ch = x[1];
    for (const char* s : {"Scale", "Bias", "Mean", "Variance"}) {
      const Shape& p = c.shape(s);
      c.check(p.rank() == 1 && dims_compatible(p[0], ch), "{} must be [C] = [{}] for X {} (NCHW), got {}", s, ch < 0 ? std::string("?") : std::to_string(ch), x.str(), p.str());
      c.check(c.dtype(s) == c.dtype("X"), "{} must have X's dtype {}, got {}", s, name(c.dtype("X")), name(c.dtype(s)));
    }
    Shape cs{ch};
    c.set_output("Y", x, c.dtype("X"));
    c.share_lod("X", "Y");
    for (const char* s : {"MeanOut", "VarianceOut", "SavedMean", "SavedVariance"}) c.set_output(s, cs, c.dtype("X"));
  }
  /// batch_norm_grad(X, Scale, SavedMean, SavedVariance, Y@GRAD) -> X@GRAD, Scale@GRAD, Bias@GRAD
  /// training: dx = scale * istd / m * (m * dy - sum(dy) - xhat * sum(dy * xhat)) with m = N*H*W;
  /// global stats: dx = scale * istd * dy. dscale = sum(dy * xhat), dbias = sum(dy).
  static std::vector<Operator> grad(const GradContext& g) {
    Operator op("batch_norm_grad");
    op.set_input("X", g.input("X")).set_input("Scale", g.input("Scale"));
    op.set_input("SavedMean", g.output("SavedMean")).set_input("SavedVariance", g.output("SavedVariance"));
    op.set_input("Y@GRAD", g.output_grad("Y"));
    op.set_output("X@GRAD", g.input_grad("X")).set_output("Scale@GRAD", g.input_grad("Scale")).set_output("Bias@GRAD", g.input_grad("Bias"));
    for (auto& [k, v] : g.fwd().attrs()) op.set_attr(k, v);
    op.set_origin(g.fwd().origin());
    return {op};
  }
  static void eval_cpu(KernelContext&);       // kernels/cpu/batch_norm.hpp
  static void eval_grad_cpu(KernelContext&);  // kernels/cpu/batch_norm.hpp
};

}  // namespace oar::ops
