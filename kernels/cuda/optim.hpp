// kernels/cuda/optim.hpp: eval_cuda of sgd, momentum, adam, adamw and lr_schedule (kernels/cuda/optim.cu). Each output
// starts as its input (the same variable in a training program, or a device copy) and is updated in place;
// the learning rate and Adam's powers stay on the device.
#pragma once
#include <algorithm>
#include <span>
#include <vector>

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

/// One update op's tensors for update_group, after the checks its one-op kernel makes (the outputs start as
/// the inputs, copied where the program does not update in place).
template <class Op>
UpdateTensor group_member(KernelContext& c) {
  const LoDTensor& p = c.in(Op::param);
  UpdateTensor u;
  u.g = dense_grad(c, Op::grad, p).raw();
  u.lr = scalar(c, Op::learning_rate, p).raw();
  u.p = out_from(c, Op::param_out, p).raw();
  u.n = p.numel();
  if constexpr (requires { Op::velocity; }) u.m = out_from(c, Op::velocity_out, like_param(c, Op::velocity, p)).raw();
  if constexpr (requires { Op::beta1_pow; }) {
    u.m = out_from(c, Op::moment1_out, like_param(c, Op::moment1, p)).raw();
    u.v = out_from(c, Op::moment2_out, like_param(c, Op::moment2, p)).raw();
    u.beta1_pow = scalar(c, Op::beta1_pow, p).raw();
    u.beta2_pow = scalar(c, Op::beta2_pow, p).raw();
    auto advance = [&](Slot in, Slot out) -> void* {
      if (!c.has_out(out)) return nullptr;
      LoDTensor& o = c.out(out);
      if (&o != &c.in(in)) o.resize(c.in(in).shape(), c.in(in).dtype());
      return o.raw();
    };
    u.beta1_pow_out = advance(Op::beta1_pow, Op::beta1_pow_out);
    u.beta2_pow_out = advance(Op::beta2_pow, Op::beta2_pow_out);
  }
  return u;
}

/// Consecutive update ops of one rule and attributes (Executor groups them): every parameter in one launch
/// per dtype and per max_update_tensors parameters, not one (adam: three) per parameter.
template <class Op>
void run_group(std::span<KernelContext* const> cs, const UpdateArgs& args) {
  std::vector<UpdateTensor> by_type[2];  // f32, f64
  std::vector<KernelContext*> owner[2];
  for (KernelContext* c : cs) {
    const LoDTensor& p = c->in(Op::param);
    const int k = elem(*c, p.dtype()) == Elem::f64;
    by_type[k].push_back(group_member<Op>(*c));
    owner[k].push_back(c);
  }
  for (int k = 0; k < 2; ++k)
    for (size_t i = 0; i < by_type[k].size(); i += max_update_tensors) {
      const int n = int(std::min<size_t>(max_update_tensors, by_type[k].size() - i));
      check(*owner[k][i], update_group(k ? Elem::f64 : Elem::f32, args, by_type[k].data() + i, n, stream(*owner[k][i])));
    }
}

}  // namespace oar::cuda_kernels::update

namespace oar::ops {

inline void Sgd::eval_cuda_group(std::span<KernelContext* const> cs, const NoAttrs&) {
  cuda_kernels::update::run_group<Sgd>(cs, {.rule = cuda_kernels::UpdateRule::sgd});
}
inline void Momentum::eval_cuda_group(std::span<KernelContext* const> cs, const Attrs& a) {
  cuda_kernels::update::run_group<Momentum>(cs, {.rule = cuda_kernels::UpdateRule::momentum, .mu = a.mu, .nesterov = a.use_nesterov});
}
inline void Adam::eval_cuda_group(std::span<KernelContext* const> cs, const Attrs& a) {
  cuda_kernels::update::run_group<Adam>(cs, {.rule = cuda_kernels::UpdateRule::adam, .beta1 = a.beta1, .beta2 = a.beta2, .epsilon = a.epsilon});
}
inline void AdamW::eval_cuda_group(std::span<KernelContext* const> cs, const Attrs& a) {
  cuda_kernels::update::run_group<AdamW>(
      cs, {.rule = cuda_kernels::UpdateRule::adam, .beta1 = a.beta1, .beta2 = a.beta2, .epsilon = a.epsilon, .coeff = a.with_decay ? a.coeff : 0.0f});
}

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
