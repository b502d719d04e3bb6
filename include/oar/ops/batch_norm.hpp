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
/// MeanOut and VarianceOut are dispensable: a test program (is_test), which evaluators run from many threads at
///   once, never writes the running statistics: it leaves MeanOut / VarianceOut out (the Evaluator drops them),
///   and where they are still there and are Mean / Variance themselves (in place) the kernel leaves them alone.
/// x: [N, C] or [N, C, H, W] (rank 2..5, NCHW), scale, bias, mean, variance: [C] -> y: x's shape, the rest [C].
/// What batch_norm and sync_batch_norm share: slots, attributes, shapes and the grad op's form.
struct BatchNormBase {
  static constexpr Slot x{"X"}, scale{"Scale"}, bias{"Bias"}, mean{"Mean"}, variance{"Variance"};
  static constexpr Slot y{"Y"}, mean_out{"MeanOut"}, variance_out{"VarianceOut"}, saved_mean{"SavedMean"}, saved_variance{"SavedVariance"};
  static constexpr Slot x_grad{"X@GRAD"}, scale_grad{"Scale@GRAD"}, bias_grad{"Bias@GRAD"}, y_grad{"Y@GRAD"};
  static constexpr Attr<float> momentum{"momentum"}, epsilon{"epsilon"};
  static constexpr Attr<bool> is_test = common::is_test, use_global_stats{"use_global_stats"};
  static constexpr Attr<std::string> data_layout{"data_layout"};

  /// What the kernels read, decoded once when a program is prepared (data_layout is checked here: NCHW only).
  struct Attrs {
    float momentum, epsilon;
    bool is_test, use_global_stats;
    explicit Attrs(const AttrReader& r)
        : momentum(r(BatchNormBase::momentum)), epsilon(r(BatchNormBase::epsilon)), is_test(r(BatchNormBase::is_test)),
          use_global_stats(r(BatchNormBase::use_global_stats)) {
      const std::string layout = r(BatchNormBase::data_layout);
      if (layout != "NCHW") throw Error(fmt::format("{}: data_layout {} is not supported (only NCHW)", r.op().type(), layout), r.op().origin());
    }
  };

  static OpDef def_as(std::string_view type, std::string doc) {
    return OpDef(std::string(type), std::move(doc))
        .in(x).in(scale).in(bias).in(mean).in(variance)
        .out(y).out(mean_out, dispensable).out(variance_out, dispensable).out(saved_mean, intermediate).out(saved_variance, intermediate)
        .attr(momentum, 0.9f, "running = running * momentum + batch * (1 - momentum)")
        .attr(epsilon, 1e-5f, "added to the variance").check<float>([](float e) { return e >= 0; }, "must be >= 0")
        .attr(is_test, false, "use the running statistics")
        .attr(data_layout, std::string("NCHW")).check<std::string>([](const std::string& s) { return s == "NCHW"; }, "only NCHW is supported (NHWC is not implemented)")
        .attr(use_global_stats, false, "normalize with the running statistics in training too");
  }
  static void infer_shape(InferShapeContext& c) {
    const Shape& xs = c.shape(x);
    c.check(is_float(c.dtype(x)), "X must be a floating-point tensor, got {}", name(c.dtype(x)));
    c.check(xs.rank() >= 2 && xs.rank() <= 5, "X must have rank 2 to 5 ([N, C] or [N, C, H, W]), got {}", xs.str());
    int64_t ch = xs[1];
    for (Slot s : {scale, bias, mean, variance}) {
      const Shape& p = c.shape(s);
      c.check(p.rank() == 1 && dims_compatible(p[0], ch), "{} must be [C] = [{}] for X {} (NCHW), got {}", s.name, ch < 0 ? std::string("?") : std::to_string(ch), xs.str(), p.str());
      c.check(c.dtype(s) == c.dtype(x), "{} must have X's dtype {}, got {}", s.name, name(c.dtype(x)), name(c.dtype(s)));
    }
    Shape cs{ch};
    c.set_output(y, xs, c.dtype(x));
    c.share_lod(x, y);
    for (Slot s : {mean_out, variance_out, saved_mean, saved_variance}) c.set_output(s, cs, c.dtype(x));
  }
  /// batch_norm_grad(X, Scale, SavedMean, SavedVariance, Y@GRAD) -> X@GRAD, Scale@GRAD, Bias@GRAD
  /// training: dx = scale * istd / m * (m * dy - sum(dy) - xhat * sum(dy * xhat)) with m = N*H*W;
  /// global stats: dx = scale * istd * dy. dscale = sum(dy * xhat), dbias = sum(dy).
  static std::vector<Operator> grad_as(const GradContext& g, std::string_view type) {
    Operator op = g.grad_op();
    op.set_input(x, g.input(x)).set_input(scale, g.input(scale));
    op.set_input(saved_mean, g.output(saved_mean)).set_input(saved_variance, g.output(saved_variance));
    op.set_input(y_grad, g.output_grad(y));
    op.set_output(x_grad, g.input_grad(x)).set_output(scale_grad, g.input_grad(scale)).set_output(bias_grad, g.input_grad(bias));
    return {op};
  }
};

struct BatchNorm : BatchNormBase {
  static constexpr std::string_view type = "batch_norm";
  static OpDef def() { return def_as(type, "batch normalization with running statistics (NCHW)"); }
  static std::vector<Operator> grad(const GradContext& g) { return grad_as(g, type); }
  static void eval_cpu(KernelContext&, const Attrs&);       // kernels/cpu/batch_norm.hpp
  static void eval_cuda(KernelContext&, const Attrs&);      // kernels/cuda/conv.hpp
  static void eval_grad_cpu(KernelContext&, const Attrs&);  // kernels/cpu/batch_norm.hpp
  static void eval_grad_cuda(KernelContext&, const Attrs&);  // kernels/cuda/conv.hpp
};

/// batch_norm whose statistics are taken over the whole global batch of data-parallel training (Fluid's
/// sync_batch_norm): in training each channel's sum over every rank's mini-batch (communicator of ring_id), then
/// the sum of squared deviations from that mean, so every rank normalizes alike and keeps the same running
/// statistics; the grad sums sum(dy) and sum(dy * xhat) over the ranks for X@GRAD, while Scale@GRAD and
/// Bias@GRAD stay this rank's (the gradient all-reduce sums them). In inference (is_test) it is batch_norm.
/// optim::append_collective turns batch_norm into it when asked (DataParallel::collective.sync_batch_norm).
struct SyncBatchNorm : BatchNormBase {
  static constexpr std::string_view type = "sync_batch_norm";
  static constexpr Attr<int32_t> ring_id{"ring_id"};
  struct Attrs : BatchNormBase::Attrs {
    int32_t ring_id;
    explicit Attrs(const AttrReader& r) : BatchNormBase::Attrs(r), ring_id(r(SyncBatchNorm::ring_id)) {}
  };
  static OpDef def() { return def_as(type, "batch normalization over the global batch of all ranks (NCHW)").attr(ring_id, 0); }
  static std::vector<Operator> grad(const GradContext& g) { return grad_as(g, type); }
  static void eval_cpu(KernelContext&, const Attrs&);       // kernels/cpu/batch_norm.hpp
  static void eval_grad_cpu(KernelContext&, const Attrs&);  // kernels/cpu/batch_norm.hpp
};

}  // namespace oar::ops
