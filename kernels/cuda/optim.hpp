// kernels/cuda/optim.hpp: eval_cuda of the update ops (sgd, momentum, adagrad, decayed_adagrad, adam, adamw, adamax,
// rmsprop, adadelta, lamb; sgd, adam and adamw also with a SelectedRows Grad) and lr_schedule (kernels/cuda/optim.cu).
// Each output starts as its input (the same variable in a training program, or a device copy) and is updated in
// place; the learning rate, the running powers and SkipUpdate stay on the device.
#pragma once
#include <algorithm>
#include <span>
#include <vector>

#include "kernels/common/optimizers.hpp"  // param_update::like_param, dense_grad, check_sparse
#include "kernels/common/place_io.hpp"
#include "kernels/cuda/host.hpp"
#include "kernels/cuda/optim_launch.hpp"
#include "oar/ops/lr_schedule.hpp"
#include "oar/ops/optimizers.hpp"

namespace oar::cuda_kernels::update {

using kernels::param_update::check_sparse;  // shape, dtype and row checks only: they serve every place
using kernels::param_update::dense_grad;
using kernels::param_update::like_param;
using kernels::param_update::out_copy;

/// The op's SkipUpdate as a device pointer, read by the kernels (null without the input).
inline const bool* skip_ptr(const KernelContext& c) {
  const LoDTensor* s = kernels::param_update::skip_flag(c);
  return s ? static_cast<const bool*>(s->raw()) : nullptr;
}

/// A one-value device scalar of Param's dtype (the kernels read it as that type).
inline const LoDTensor& scalar(const KernelContext& c, Slot slot, const LoDTensor& p) {
  const LoDTensor& t = c.in(slot);
  c.check(t.numel() == 1, "{} must hold one value, got shape {}", slot.name, t.shape());
  c.check(t.dtype() == p.dtype(), "{} is {} but Param is {}: on CUDA they must match", slot.name, name(t.dtype()), name(p.dtype()));
  return t;
}
/// pow_out = pow * beta (Beta1PowOut = Beta1Pow * beta1; pow itself when the op is skipped) when the op asks for
/// it, queued after the update that read pow (one stream).
inline void advance_pow(const KernelContext& c, Slot in, Slot out, float beta, Elem t) {
  if (!c.has_out(out)) return;
  const LoDTensor& pin = c.in(in);
  LoDTensor& pout = c.out(out);
  if (&pout != &pin) pout.resize(pin.shape(), pin.dtype());
  check(c, scale_scalar(t, pin.raw(), pout.raw(), beta, skip_ptr(c), stream(c)));
}

/// The grad in `slot` when it is SelectedRows, else null.
inline const SelectedRows* sparse_grad(const KernelContext& c, Slot slot) {
  Value* v = c.in_value(slot);
  return v && v->is_selected_rows() ? &v->selected_rows() : nullptr;
}

/// A SelectedRows Grad checked as the CPU kernels check it, with its rows grouped by Param row (optim_launch.hpp's
/// plan: rows | start | src) on the device.
struct SparsePlan {
  int64_t width = 0, k = 0;  ///< Param's row width; the distinct rows
  Tensor plan;
  const int64_t* data() const { return plan.data<int64_t>(); }
};
inline SparsePlan sparse_plan(const KernelContext& c, const SelectedRows& g, const LoDTensor& p) {
  SparsePlan sp;
  sp.width = check_sparse(c, g, p);
  c.check(g.value.place() == c.place(), "SelectedRows Grad's value is on {}, but the kernel runs on {}", g.value.place().str(), c.place().str());
  // The rows live on the host: grouped there (merge_rows's order, by first appearance), in per-thread buffers that
  // keep their capacity.
  thread_local std::vector<int64_t> slot, count, buf;
  const int64_t n = int64_t(g.rows.size());
  slot.assign(size_t(p.dim(0)), -1);
  count.clear();
  buf.clear();
  for (int64_t r : g.rows) {
    if (slot[size_t(r)] < 0) {
      slot[size_t(r)] = int64_t(buf.size());
      buf.push_back(r);
      count.push_back(0);
    }
    ++count[size_t(slot[size_t(r)])];
  }
  sp.k = int64_t(buf.size());
  buf.resize(size_t(2 * sp.k + 1 + n));
  int64_t* start = buf.data() + sp.k;
  int64_t* src = start + sp.k + 1;
  start[0] = 0;
  for (int64_t i = 0; i < sp.k; ++i) {
    start[i + 1] = start[i] + count[size_t(i)];
    count[size_t(i)] = start[i];  // now: where group i's next value row goes
  }
  for (int64_t e = 0; e < n; ++e) src[count[size_t(slot[size_t(g.rows[size_t(e)])])]++] = e;
  // Queued before the kernels that read it. A CUDA graph would replay a stale plan: upload refuses a capture,
  // and the executor then runs the block op by op.
  sp.plan = kernels::place_io::upload(c, buf);
  return sp;
}

/// One update op's tensors for update_group, after the checks its one-op kernel makes (the outputs start as
/// the inputs, copied where the program does not update in place). `grad`: the gradient's device array when it is
/// not the op's dense Grad (a SelectedRows one merged into a dense buffer).
template <class Op>
UpdateTensor group_member(KernelContext& c, const void* grad = nullptr) {
  const LoDTensor& p = c.in(Op::param);
  UpdateTensor u;
  u.g = grad ? grad : dense_grad(c, Op::grad, p).raw();
  u.skip = skip_ptr(c);
  if constexpr (requires { Op::learning_rate; }) u.lr = scalar(c, Op::learning_rate, p).raw();
  u.p = out_copy(c, Op::param_out, p).raw();
  u.n = p.numel();
  auto state = [&](Slot in, Slot out) { return out_copy(c, out, like_param(c, in, p)).raw(); };
  auto pow = [&](Slot in, Slot out, const void*& pow_in, void*& pow_out) {
    pow_in = scalar(c, in, p).raw();
    if (!c.has_out(out)) return;  // not advanced
    LoDTensor& o = c.out(out);
    if (&o != &c.in(in)) o.resize(c.in(in).shape(), c.in(in).dtype());
    pow_out = o.raw();
  };
  if constexpr (std::is_same_v<Op, ops::Momentum>) {
    u.m = state(Op::velocity, Op::velocity_out);
  } else if constexpr (std::is_same_v<Op, ops::Adam> || std::is_same_v<Op, ops::AdamW> || std::is_same_v<Op, ops::Lamb>) {
    u.m = state(Op::moment1, Op::moment1_out);
    u.v = state(Op::moment2, Op::moment2_out);
    pow(Op::beta1_pow, Op::beta1_pow_out, u.beta1_pow, u.beta1_pow_out);
    pow(Op::beta2_pow, Op::beta2_pow_out, u.beta2_pow, u.beta2_pow_out);
  } else if constexpr (std::is_same_v<Op, ops::Adagrad> || std::is_same_v<Op, ops::DecayedAdagrad>) {
    u.m = state(Op::moment, Op::moment_out);
  } else if constexpr (std::is_same_v<Op, ops::Adamax>) {
    u.m = state(Op::moment, Op::moment_out);
    u.v = state(Op::inf_norm, Op::inf_norm_out);
    pow(Op::beta1_pow, Op::beta1_pow_out, u.beta1_pow, u.beta1_pow_out);
  } else if constexpr (std::is_same_v<Op, ops::Rmsprop>) {
    const bool centered = c.attrs<typename Op::Attrs>().centered;
    c.check(!centered || (c.has_in(Op::mean_grad) && c.has_out(Op::mean_grad_out)), "centered = true needs MeanGrad and MeanGradOut");
    u.m = state(Op::mean_square, Op::mean_square_out);
    u.v = state(Op::moment, Op::moment_out);
    if (centered) u.w = state(Op::mean_grad, Op::mean_grad_out);
  } else if constexpr (std::is_same_v<Op, ops::Adadelta>) {
    u.m = state(Op::avg_squared_grad, Op::avg_squared_grad_out);
    u.v = state(Op::avg_squared_update, Op::avg_squared_update_out);
  }
  return u;
}

/// update_group on `count` tensors of type `t`, with the device scratch the rule needs (lamb's).
inline void launch_group(const KernelContext& c, Elem t, const UpdateArgs& args, const UpdateTensor* tensors, int count) {
  const Tensor scratch = workspace(c, update_group_scratch_bytes(t, args, tensors, count));
  check(c, update_group(t, args, tensors, count, scratch.raw(), stream(c)));
}

/// One update op with a dense Grad: a group of one.
template <class Op>
void run_one(KernelContext& c, const UpdateArgs& args) {
  const UpdateTensor u = group_member<Op>(c);
  launch_group(c, elem(c, c.in(Op::param).dtype()), args, &u, 1);
}

/// adam / adamw (`args`: the rule's) with a SelectedRows Grad, as the CPU: repeated rows summed first (in their
/// order, from 0); lazy_mode updates the listed rows alone, otherwise every row is, with g = 0 where none is
/// listed (the merged rows in a zeroed dense gradient, then the dense step).
template <class Op>
void sparse_adam_like(KernelContext& c, const SelectedRows& sg, const typename Op::Attrs& a, const UpdateArgs& args) {
  const LoDTensor& p = c.in(Op::param);
  const Elem t = elem(c, p.dtype());
  const SparsePlan sp = sparse_plan(c, sg, p);
  if (!a.lazy_mode) {
    Tensor dense = workspace(c, p.bytes());
    detail::cuda_zero(c.cuda(), dense.raw(), dense.bytes());
    check(c, sparse_merge(t, sg.value.raw(), sp.data(), sp.k, sp.width, false, dense.raw(), stream(c)));
    const UpdateTensor u = group_member<Op>(c, dense.raw());
    launch_group(c, t, args, &u, 1);
    return;
  }
  const LoDTensor& m1 = like_param(c, Op::moment1, p);
  const LoDTensor& m2 = like_param(c, Op::moment2, p);
  const LoDTensor& lr = scalar(c, Op::learning_rate, p);
  const LoDTensor& b1p = scalar(c, Op::beta1_pow, p);
  const LoDTensor& b2p = scalar(c, Op::beta2_pow, p);
  LoDTensor& po = out_copy(c, Op::param_out, p);
  LoDTensor& m1o = out_copy(c, Op::moment1_out, m1);
  LoDTensor& m2o = out_copy(c, Op::moment2_out, m2);
  Tensor merged = workspace(c, size_t(sp.k * sp.width) * size_of(p.dtype()));
  check(c, sparse_merge(t, sg.value.raw(), sp.data(), sp.k, sp.width, true, merged.raw(), stream(c)));
  check(c, sparse_adam(t, po.raw(), m1o.raw(), m2o.raw(), merged.raw(), sp.data(), sp.k, sp.width, lr.raw(), b1p.raw(), b2p.raw(), a.beta1, a.beta2,
                       a.epsilon, args.coeff, skip_ptr(c), stream(c)));
  // The powers were read by the launch above before these advance them (one stream).
  advance_pow(c, Op::beta1_pow, Op::beta1_pow_out, a.beta1, t);
  advance_pow(c, Op::beta2_pow, Op::beta2_pow_out, a.beta2, t);
}

/// Consecutive update ops of one rule and attributes (Executor groups them): every parameter in one launch
/// per dtype and per max_update_tensors parameters, not one (adam: three) per parameter.
/// A member whose Grad is SelectedRows runs alone through the op's own kernel.
template <class Op, class A>
void run_group(std::span<KernelContext* const> cs, const A& attrs, const UpdateArgs& args) {
  std::vector<UpdateTensor> by_type[2];  // f32, f64
  std::vector<KernelContext*> owner[2];
  for (KernelContext* c : cs) {
    if (sparse_grad(*c, Op::grad)) {
      Op::eval_cuda(*c, attrs);
      continue;
    }
    const LoDTensor& p = c->in(Op::param);
    const int k = elem(*c, p.dtype()) == Elem::f64;
    by_type[k].push_back(group_member<Op>(*c));
    owner[k].push_back(c);
  }
  for (int k = 0; k < 2; ++k)
    for (size_t i = 0; i < by_type[k].size(); i += max_update_tensors) {
      const int n = int(std::min<size_t>(max_update_tensors, by_type[k].size() - i));
      launch_group(*owner[k][i], k ? Elem::f64 : Elem::f32, args, by_type[k].data() + i, n);
    }
}

}  // namespace oar::cuda_kernels::update

namespace oar::ops {

// Every rule runs through update_group, one op as a group of one or consecutive ops together: one kernel per
// rule (lamb: three), however many parameters (kernels/cuda/optim.cu). These are its arguments per rule.
namespace update_args {
inline cuda_kernels::UpdateArgs sgd() { return {.rule = cuda_kernels::UpdateRule::sgd}; }
inline cuda_kernels::UpdateArgs momentum(const Momentum::Attrs& a) {
  return {.rule = cuda_kernels::UpdateRule::momentum, .mu = a.mu, .nesterov = a.use_nesterov};
}
inline cuda_kernels::UpdateArgs adam(const Adam::Attrs& a) {
  return {.rule = cuda_kernels::UpdateRule::adam, .beta1 = a.beta1, .beta2 = a.beta2, .epsilon = a.epsilon};
}
inline cuda_kernels::UpdateArgs adam(const AdamW::Attrs& a) {
  return {.rule = cuda_kernels::UpdateRule::adam, .beta1 = a.beta1, .beta2 = a.beta2, .epsilon = a.epsilon, .coeff = a.with_decay ? a.coeff : 0.0f};
}
inline cuda_kernels::UpdateArgs adagrad(float epsilon, float decay) { return {.rule = cuda_kernels::UpdateRule::adagrad, .epsilon = epsilon, .decay = decay}; }
inline cuda_kernels::UpdateArgs adamax(const Adamax::Attrs& a) {
  return {.rule = cuda_kernels::UpdateRule::adamax, .beta1 = a.beta1, .beta2 = a.beta2, .epsilon = a.epsilon};
}
inline cuda_kernels::UpdateArgs rmsprop(const Rmsprop::Attrs& a) {
  return {.rule = cuda_kernels::UpdateRule::rmsprop, .mu = a.momentum, .epsilon = a.epsilon, .decay = a.decay};
}
inline cuda_kernels::UpdateArgs adadelta(const Adadelta::Attrs& a) { return {.rule = cuda_kernels::UpdateRule::adadelta, .epsilon = a.epsilon, .decay = a.rho}; }
// lamb's trust ratios come from norms summed on the device (per chunk in double, then per tensor in a fixed
// order), so the step never waits for the host; a group of lamb ops is three launches.
inline cuda_kernels::UpdateArgs lamb(const Lamb::Attrs& a) {
  return {.rule = cuda_kernels::UpdateRule::lamb, .beta1 = a.beta1, .beta2 = a.beta2, .epsilon = a.epsilon, .coeff = a.weight_decay};
}
}  // namespace update_args

inline void Sgd::eval_cuda(KernelContext& c, const NoAttrs&) {
  using namespace cuda_kernels::update;
  if (const SelectedRows* sg = sparse_grad(c, grad)) {  // only the listed rows change; repeated rows add up in order
    const LoDTensor& p = c.in(param);
    const LoDTensor& lr = scalar(c, learning_rate, p);
    const SparsePlan sp = sparse_plan(c, *sg, p);
    LoDTensor& po = out_copy(c, param_out, p);
    cuda_kernels::check(c, cuda_kernels::sparse_sgd(cuda_kernels::elem(c, p.dtype()), po.raw(), sg->value.raw(), sp.data(), sp.k, sp.width, lr.raw(),
                                                    skip_ptr(c), cuda_kernels::stream(c)));
    return;
  }
  run_one<Sgd>(c, update_args::sgd());
}
inline void Momentum::eval_cuda(KernelContext& c, const Attrs& a) {
  cuda_kernels::update::run_one<Momentum>(c, update_args::momentum(a));
}
inline void Adam::eval_cuda(KernelContext& c, const Attrs& a) {
  if (const SelectedRows* sg = cuda_kernels::update::sparse_grad(c, grad)) cuda_kernels::update::sparse_adam_like<Adam>(c, *sg, a, update_args::adam(a));
  else cuda_kernels::update::run_one<Adam>(c, update_args::adam(a));
}
inline void AdamW::eval_cuda(KernelContext& c, const Attrs& a) {
  if (const SelectedRows* sg = cuda_kernels::update::sparse_grad(c, grad)) cuda_kernels::update::sparse_adam_like<AdamW>(c, *sg, a, update_args::adam(a));
  else cuda_kernels::update::run_one<AdamW>(c, update_args::adam(a));
}

inline void Sgd::eval_cuda_group(std::span<KernelContext* const> cs, const NoAttrs& a) {
  cuda_kernels::update::run_group<Sgd>(cs, a, update_args::sgd());
}
inline void Momentum::eval_cuda_group(std::span<KernelContext* const> cs, const Attrs& a) {
  cuda_kernels::update::run_group<Momentum>(cs, a, update_args::momentum(a));
}
inline void Adam::eval_cuda_group(std::span<KernelContext* const> cs, const Attrs& a) { cuda_kernels::update::run_group<Adam>(cs, a, update_args::adam(a)); }
inline void AdamW::eval_cuda_group(std::span<KernelContext* const> cs, const Attrs& a) { cuda_kernels::update::run_group<AdamW>(cs, a, update_args::adam(a)); }

inline void Adagrad::eval_cuda(KernelContext& c, const Attrs& a) { cuda_kernels::update::run_one<Adagrad>(c, update_args::adagrad(a.epsilon, -1.0f)); }
inline void Adagrad::eval_cuda_group(std::span<KernelContext* const> cs, const Attrs& a) {
  cuda_kernels::update::run_group<Adagrad>(cs, a, update_args::adagrad(a.epsilon, -1.0f));
}
inline void DecayedAdagrad::eval_cuda(KernelContext& c, const Attrs& a) {
  cuda_kernels::update::run_one<DecayedAdagrad>(c, update_args::adagrad(a.epsilon, a.decay));
}
inline void DecayedAdagrad::eval_cuda_group(std::span<KernelContext* const> cs, const Attrs& a) {
  cuda_kernels::update::run_group<DecayedAdagrad>(cs, a, update_args::adagrad(a.epsilon, a.decay));
}
inline void Adamax::eval_cuda(KernelContext& c, const Attrs& a) { cuda_kernels::update::run_one<Adamax>(c, update_args::adamax(a)); }
inline void Adamax::eval_cuda_group(std::span<KernelContext* const> cs, const Attrs& a) {
  cuda_kernels::update::run_group<Adamax>(cs, a, update_args::adamax(a));
}
inline void Rmsprop::eval_cuda(KernelContext& c, const Attrs& a) { cuda_kernels::update::run_one<Rmsprop>(c, update_args::rmsprop(a)); }
inline void Rmsprop::eval_cuda_group(std::span<KernelContext* const> cs, const Attrs& a) {
  cuda_kernels::update::run_group<Rmsprop>(cs, a, update_args::rmsprop(a));
}
inline void Adadelta::eval_cuda(KernelContext& c, const Attrs& a) { cuda_kernels::update::run_one<Adadelta>(c, update_args::adadelta(a)); }
inline void Adadelta::eval_cuda_group(std::span<KernelContext* const> cs, const Attrs& a) {
  cuda_kernels::update::run_group<Adadelta>(cs, a, update_args::adadelta(a));
}

inline void Lamb::eval_cuda(KernelContext& c, const Attrs& a) { cuda_kernels::update::run_one<Lamb>(c, update_args::lamb(a)); }
inline void Lamb::eval_cuda_group(std::span<KernelContext* const> cs, const Attrs& a) { cuda_kernels::update::run_group<Lamb>(cs, a, update_args::lamb(a)); }

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
