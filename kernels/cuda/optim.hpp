// kernels/cuda/optim.hpp: eval_cuda of sgd, momentum, adam, adamw and lr_schedule (kernels/cuda/optim.cu). Each output
// starts as its input (the same variable in a training program, or a device copy) and is updated in place;
// the learning rate and Adam's powers stay on the device.
#pragma once
#include "kernels/cpu/optimizers.hpp"  // param_update::like_param, dense_grad
#include "kernels/cuda/host.hpp"
#include "oar/ops/lr_schedule.hpp"
#include "oar/ops/optimizers.hpp"

namespace oar::cuda_kernels::update {

using cpu_kernels::param_update::dense_grad;  // shape and dtype checks only: they serve every place
using cpu_kernels::param_update::like_param;

/// A one-value device scalar of Param's dtype (the kernels read it as that type).
inline const LoDTensor& scalar(const KernelContext& c, Slot slot, const LoDTensor& p) {
  const LoDTensor& t = c.in(slot);
  c.check(t.numel() == 1, "{} must hold one value, got shape {}", slot.name, t.shape());
  c.check(t.dtype() == p.dtype(), "{} is {} but Param is {}: on CUDA they must match", slot.name, name(t.dtype()), name(p.dtype()));
  return t;
}
/// The output in `slot`, holding `in`'s values: `in` itself when the program updates in place, else a copy.
inline LoDTensor& out_from(const KernelContext& c, Slot slot, const LoDTensor& in) {
  LoDTensor& o = c.out(slot);
  if (&o != &in) {
    o.copy_from(in);
    o.set_lod(in.lod());
  }
  return o;
}

}  // namespace oar::cuda_kernels::update

namespace oar::ops {

inline void Sgd::eval_cuda(KernelContext& c, const NoAttrs&) {
  using namespace cuda_kernels::update;
  const LoDTensor& p = c.in(param);
  const LoDTensor& g = dense_grad(c, grad, p);
  const LoDTensor& lr = scalar(c, learning_rate, p);
  const cuda_kernels::Elem t = cuda_kernels::elem(c, p.dtype());
  LoDTensor& po = out_from(c, param_out, p);
  cuda_kernels::check(c, cuda_kernels::sgd(t, po.raw(), g.raw(), lr.raw(), p.numel(), cuda_kernels::stream(c)));
}

inline void Momentum::eval_cuda(KernelContext& c, const Attrs& a) {
  using namespace cuda_kernels::update;
  const LoDTensor& p = c.in(param);
  const LoDTensor& g = dense_grad(c, grad, p);
  const LoDTensor& v = like_param(c, velocity, p);
  const LoDTensor& lr = scalar(c, learning_rate, p);
  const cuda_kernels::Elem t = cuda_kernels::elem(c, p.dtype());
  LoDTensor& po = out_from(c, param_out, p);
  LoDTensor& vo = out_from(c, velocity_out, v);
  cuda_kernels::check(c, cuda_kernels::momentum(t, po.raw(), vo.raw(), g.raw(), lr.raw(), a.mu, a.use_nesterov, p.numel(), cuda_kernels::stream(c)));
}

}  // namespace oar::ops

namespace oar::cuda_kernels::update {

template <class Op>
void adam_like(KernelContext& c, const typename Op::Attrs& a, float coeff) {
  const LoDTensor& p = c.in(Op::param);
  const LoDTensor& g = dense_grad(c, Op::grad, p);
  const LoDTensor& m1 = like_param(c, Op::moment1, p);
  const LoDTensor& m2 = like_param(c, Op::moment2, p);
  const LoDTensor& lr = scalar(c, Op::learning_rate, p);
  const LoDTensor& b1p = scalar(c, Op::beta1_pow, p);
  const LoDTensor& b2p = scalar(c, Op::beta2_pow, p);
  const Elem t = elem(c, p.dtype());
  LoDTensor& po = out_from(c, Op::param_out, p);
  LoDTensor& m1o = out_from(c, Op::moment1_out, m1);
  LoDTensor& m2o = out_from(c, Op::moment2_out, m2);
  // The powers are read by this launch before the ones below advance them (one stream).
  check(c, adam(t, po.raw(), m1o.raw(), m2o.raw(), g.raw(), lr.raw(), b1p.raw(), b2p.raw(), a.beta1, a.beta2, a.epsilon, coeff, p.numel(), stream(c)));
  for (auto [in, out, beta] : {std::tuple{Op::beta1_pow, Op::beta1_pow_out, a.beta1}, std::tuple{Op::beta2_pow, Op::beta2_pow_out, a.beta2}}) {
    if (!c.has_out(out)) continue;
    const LoDTensor& pin = c.in(in);
    LoDTensor& pout = c.out(out);
    if (&pout != &pin) pout.resize(pin.shape(), pin.dtype());
    check(c, scale_scalar(t, pin.raw(), pout.raw(), beta, stream(c)));
  }
}

}  // namespace oar::cuda_kernels::update

namespace oar::ops {

inline void Adam::eval_cuda(KernelContext& c, const Attrs& a) { cuda_kernels::update::adam_like<Adam>(c, a, 0.0f); }
inline void AdamW::eval_cuda(KernelContext& c, const Attrs& a) { cuda_kernels::update::adam_like<AdamW>(c, a, a.with_decay ? a.coeff : 0.0f); }

inline void LrSchedule::eval_cuda(KernelContext& c, const Attrs& a) {
  const LoDTensor& st = c.in(step);
  c.check(st.numel() == 1, "Step must have one element, got {}", st.shape());
  if (a.kind == Kind::piecewise) {
    c.check(!a.values.empty() && a.values.size() == a.boundaries.size() + 1,
            "piecewise needs one more value than boundaries, got {} values and {} boundaries", a.values.size(), a.boundaries.size());
    c.check(a.boundaries.size() <= size_t(cuda_kernels::lr_max_pieces), "piecewise on CUDA takes at most {} boundaries, got {}",
            cuda_kernels::lr_max_pieces, a.boundaries.size());
  }
  LoDTensor& out = c.out(learning_rate);
  out.resize(Shape{1}, DType::f32);
  cuda_kernels::check(c, cuda_kernels::lr_schedule(formula(a), cuda_kernels::elem(c, st.dtype(), true), st.raw(), out.data<float>(),
                                                   cuda_kernels::stream(c)));
}

}  // namespace oar::ops
