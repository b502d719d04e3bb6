// kernels/cpu/optimizers.hpp: CPU kernels of the parameter update ops (ops/optimizers.hpp). Every output may be
// the very tensor of its input (ParamOut = Param, MomentOut = Moment, ...): each element is read before it is
// written, and an aliased output is never resized.
#pragma once
#include <cmath>
#include <vector>

#include "kernels/common/optimizers.hpp"
#include "kernels/cpu/scratch.hpp"
#include "kernels/update_rules.hpp"
#include "oar/ops/optimizers.hpp"
#include "oar/device/kernel_context.hpp"
#include "oar/device/thread_pool.hpp"

namespace oar::cpu_kernels::param_update {

inline constexpr int64_t kGrain = 1 << 14;

/// The value of a one-element input (LearningRate, Beta1Pow, ...), whatever its float dtype.
inline double scalar(const KernelContext& c, Slot slot) {
  const LoDTensor& t = c.in(slot);
  c.check(t.numel() == 1, "{} must hold one value, got shape {}", slot.name, t.shape());
  c.check(t.dtype() == DType::f32 || t.dtype() == DType::f64, "{} must be float32 or float64, got {}", slot.name, name(t.dtype()));
  return t.get(0);
}

using namespace kernels::param_update;

/// Output `slot` shaped like `in`; left untouched when it is `in` itself (in place).
inline LoDTensor& out_like(const KernelContext& c, Slot slot, const LoDTensor& in) {
  LoDTensor& o = c.out(slot);
  if (&o != &in) {
    o.resize(in.shape(), in.dtype());
    o.set_lod(in.lod());
  }
  return o;
}

/// Writes `in * factor` to the optional scalar output `out_slot` (Beta1PowOut = Beta1Pow * beta1), if asked for.
inline void advance_pow(const KernelContext& c, Slot in_slot, Slot out_slot, double factor) {
  if (!c.has_out(out_slot)) return;
  const LoDTensor& in = c.in(in_slot);
  double v = scalar(c, in_slot) * factor;
  LoDTensor& o = out_like(c, out_slot, in);
  if (o.dtype() == DType::f64) o.data<double>()[0] = v;
  else o.data<float>()[0] = float(v);
}

/// Whether the op's SkipUpdate holds true. Then every output of `Op` the step would write has its input's
/// value (copied when the program updates out of place) and the kernel has nothing left to do.
template <class Op>
bool skipped(const KernelContext& c) {
  const LoDTensor* s = skip_flag(c);
  if (!s || !s->data<bool>()[0]) return false;
  out_copy(c, Op::param_out, c.in(Op::param));
  for (const ops::param_update::Accumulator& a : Op::accumulators) {
    if (!a.only_if.name.empty() && !c.op().attr_or(a.only_if, false)) continue;  // one the op neither reads nor writes now
    if (c.has_in(a.in) && c.has_out(a.out)) out_copy(c, a.out, c.in(a.in));
  }
  return true;
}

/// Runs `f(lo, hi)` over [0, n) in parallel chunks.
template <class F>
void for_range(int64_t n, F&& f) {
  parallel_for(0, n, kGrain, std::forward<F>(f));
}

/// The rows of a SelectedRows gradient with repeated rows summed: `rows[k]` is a row of Param, `sums`
/// [rows.size() * width] their summed gradients, `slot[r]` the k of Param row r (-1: not listed). The vectors
/// are per-thread and keep their capacity, so that a run with sizes seen before allocates nothing.
template <class T>
struct MergedRows {
  std::vector<int64_t> rows, slot;
  std::vector<T> sums;
};

template <class T>
MergedRows<T>& merge_rows(const SelectedRows& g, int64_t width, int64_t height) {
  thread_local MergedRows<T> m;
  m.rows.clear();
  m.sums.clear();
  m.slot.assign(size_t(height), -1);
  const T* v = g.value.data<T>();
  for (size_t i = 0; i < g.rows.size(); ++i) {
    int64_t r = g.rows[i];
    if (m.slot[size_t(r)] < 0) {
      m.slot[size_t(r)] = int64_t(m.rows.size());
      m.rows.push_back(r);
      m.sums.resize(m.sums.size() + size_t(width), T(0));
    }
    T* dst = m.sums.data() + m.slot[size_t(r)] * width;
    for (int64_t j = 0; j < width; ++j) dst[j] += v[int64_t(i) * width + j];
  }
  return m;
}

/// The shared adam / adamw kernel (`Op`'s slots); `coeff` is adamw's decoupled decay coefficient (0 for adam).
template <class Op>
void adam_like(KernelContext& c, const typename Op::Attrs& a, double coeff) {
  if (skipped<Op>(c)) return;
  const LoDTensor& p = c.in(Op::param);
  const LoDTensor& m1 = like_param(c, Op::moment1, p);
  const LoDTensor& m2 = like_param(c, Op::moment2, p);
  const double lr = scalar(c, Op::learning_rate), b1p = scalar(c, Op::beta1_pow), b2p = scalar(c, Op::beta2_pow);
  const double beta1 = a.beta1, beta2 = a.beta2, eps = a.epsilon;
  const bool lazy = a.lazy_mode;
  Value* gv = c.in_value(Op::grad);
  const bool sparse = gv && gv->is_selected_rows();
  c.dispatch(type_list<float, double>{}, p.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T b1 = T(beta1), b2 = T(beta2), e = T(eps), lr_t = T(lr * std::sqrt(1 - b2p) / (1 - b1p)), wd = T(lr * coeff);
    // One element: reads p, m1, m2 at i, writes the outputs at i (the outputs may alias the inputs).
    auto step = [&](const T* pp, const T* pm1, const T* pm2, T* po, T* pm1o, T* pm2o, int64_t i, T g) {
      T pv = pp[i], a = pm1[i], b = pm2[i];
      fn::adam_step(pv, a, b, g, lr_t, wd, coeff != 0, b1, b2, e);
      pm1o[i] = a;
      pm2o[i] = b;
      po[i] = pv;
    };
    if (!sparse) {
      const LoDTensor& g = dense_grad(c, Op::grad, p);
      LoDTensor& po = out_like(c, Op::param_out, p);
      LoDTensor& m1o = out_like(c, Op::moment1_out, m1);
      LoDTensor& m2o = out_like(c, Op::moment2_out, m2);
      const T *pp = p.data<T>(), *pg = g.data<T>(), *pm1 = m1.data<T>(), *pm2 = m2.data<T>();
      T *ppo = po.data<T>(), *pm1o = m1o.data<T>(), *pm2o = m2o.data<T>();
      for_range(p.numel(), [&](int64_t lo, int64_t hi) {
        for (int64_t i = lo; i < hi; ++i) step(pp, pm1, pm2, ppo, pm1o, pm2o, i, pg[i]);
      });
      return;
    }
    const SelectedRows& g = gv->selected_rows();
    const int64_t width = check_sparse(c, g, p), height = p.dim(0);
    const MergedRows<T>& merged = merge_rows<T>(g, width, height);
    const std::vector<int64_t>& rows = merged.rows;
    const std::vector<T>& sums = merged.sums;
    if (lazy) {  // the unlisted rows keep their values: start from copies
      LoDTensor& po = out_copy(c, Op::param_out, p);
      LoDTensor& m1o = out_copy(c, Op::moment1_out, m1);
      LoDTensor& m2o = out_copy(c, Op::moment2_out, m2);
      T *ppo = po.data<T>(), *pm1o = m1o.data<T>(), *pm2o = m2o.data<T>();
      for (size_t k = 0; k < rows.size(); ++k)
        for (int64_t j = 0; j < width; ++j) step(ppo, pm1o, pm2o, ppo, pm1o, pm2o, rows[k] * width + j, sums[k * size_t(width) + size_t(j)]);
    } else {  // every row, with g = 0 where none is listed
      const std::vector<int64_t>& slot = merged.slot;
      LoDTensor& po = out_like(c, Op::param_out, p);
      LoDTensor& m1o = out_like(c, Op::moment1_out, m1);
      LoDTensor& m2o = out_like(c, Op::moment2_out, m2);
      const T *pp = p.data<T>(), *pm1 = m1.data<T>(), *pm2 = m2.data<T>();
      T *ppo = po.data<T>(), *pm1o = m1o.data<T>(), *pm2o = m2o.data<T>();
      for_range(height, [&](int64_t lo, int64_t hi) {
        for (int64_t r = lo; r < hi; ++r) {
          const T* gr = slot[size_t(r)] >= 0 ? sums.data() + slot[size_t(r)] * width : nullptr;
          for (int64_t j = 0; j < width; ++j) step(pp, pm1, pm2, ppo, pm1o, pm2o, r * width + j, gr ? gr[j] : T(0));
        }
      });
    }
  });
  advance_pow(c, Op::beta1_pow, Op::beta1_pow_out, beta1);
  advance_pow(c, Op::beta2_pow, Op::beta2_pow_out, beta2);
}

/// adagrad (decay < 0: m' = m + g^2) and decayed_adagrad (m' = decay * m + (1 - decay) * g^2), `Op`'s slots.
template <class Op>
void adagrad_like(KernelContext& c, double eps, double decay) {
  if (skipped<Op>(c)) return;
  const LoDTensor& p = c.in(Op::param);
  const LoDTensor& g = dense_grad(c, Op::grad, p);
  const LoDTensor& m = like_param(c, Op::moment, p);
  const double lr = scalar(c, Op::learning_rate);
  c.dispatch(type_list<float, double>{}, p.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T l = T(lr), e = T(eps), d = T(decay);
    const bool plain = decay < 0;
    LoDTensor& po = out_like(c, Op::param_out, p);
    LoDTensor& mo = out_like(c, Op::moment_out, m);
    const T *pp = p.data<T>(), *pg = g.data<T>(), *pm = m.data<T>();
    T *ppo = po.data<T>(), *pmo = mo.data<T>();
    for_range(p.numel(), [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) {
        T gi = pg[i];
        T pv = pp[i], mn = pm[i];
        fn::adagrad_step(pv, mn, gi, l, e, d, plain);
        pmo[i] = mn;
        ppo[i] = pv;
      }
    });
  });
}

}  // namespace oar::cpu_kernels::param_update

namespace oar::ops {

inline void Sgd::eval_cpu(KernelContext& c, const NoAttrs&) {
  using namespace cpu_kernels::param_update;
  if (skipped<Sgd>(c)) return;
  const LoDTensor& p = c.in(param);
  const double lr = scalar(c, learning_rate);
  Value* gv = c.in_value(grad);
  c.dispatch(type_list<float, double>{}, p.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T l = T(lr);
    if (gv && gv->is_selected_rows()) {
      const SelectedRows& g = gv->selected_rows();
      const int64_t width = check_sparse(c, g, p);
      LoDTensor& po = out_copy(c, param_out, p);
      T* ppo = po.data<T>();
      const T* v = g.value.data<T>();
      for (size_t i = 0; i < g.rows.size(); ++i) {  // sequential: repeated rows add up
        T* dst = ppo + g.rows[i] * width;
        const T* src = v + int64_t(i) * width;
        for (int64_t j = 0; j < width; ++j) dst[j] -= l * src[j];
      }
      return;
    }
    const LoDTensor& g = dense_grad(c, grad, p);
    LoDTensor& po = out_like(c, param_out, p);
    const T *pp = p.data<T>(), *pg = g.data<T>();
    T* ppo = po.data<T>();
    for_range(p.numel(), [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) ppo[i] = pp[i] - l * pg[i];
    });
  });
}

inline void Momentum::eval_cpu(KernelContext& c, const Attrs& a) {
  using namespace cpu_kernels::param_update;
  if (skipped<Momentum>(c)) return;
  const LoDTensor& p = c.in(param);
  const LoDTensor& g = dense_grad(c, grad, p);
  const LoDTensor& v = like_param(c, velocity, p);
  const double lr = scalar(c, learning_rate), mu_ = a.mu;
  const bool nesterov = a.use_nesterov;
  c.dispatch(type_list<float, double>{}, p.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T l = T(lr), m = T(mu_);
    LoDTensor& po = out_like(c, param_out, p);
    LoDTensor& vo = out_like(c, velocity_out, v);
    const T *pp = p.data<T>(), *pg = g.data<T>(), *pv = v.data<T>();
    T *ppo = po.data<T>(), *pvo = vo.data<T>();
    for_range(p.numel(), [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) {
        T pi = pp[i], vn = pv[i];
        fn::momentum_step(pi, vn, pg[i], l, m, nesterov);
        pvo[i] = vn;
        ppo[i] = pi;
      }
    });
  });
}

inline void Adagrad::eval_cpu(KernelContext& c, const Attrs& a) { cpu_kernels::param_update::adagrad_like<Adagrad>(c, a.epsilon, -1.0); }
inline void DecayedAdagrad::eval_cpu(KernelContext& c, const Attrs& a) {
  cpu_kernels::param_update::adagrad_like<DecayedAdagrad>(c, a.epsilon, a.decay);
}

inline void Adam::eval_cpu(KernelContext& c, const Attrs& a) { cpu_kernels::param_update::adam_like<Adam>(c, a, 0.0); }
inline void AdamW::eval_cpu(KernelContext& c, const Attrs& a) {
  cpu_kernels::param_update::adam_like<AdamW>(c, a, a.with_decay ? double(a.coeff) : 0.0);
}

inline void Adamax::eval_cpu(KernelContext& c, const Attrs& a) {
  using namespace cpu_kernels::param_update;
  if (skipped<Adamax>(c)) return;
  const LoDTensor& p = c.in(param);
  const LoDTensor& g = dense_grad(c, grad, p);
  const LoDTensor& m = like_param(c, moment, p);
  const LoDTensor& u = like_param(c, inf_norm, p);
  const double lr = scalar(c, learning_rate), b1p = scalar(c, beta1_pow);
  const double beta1_ = a.beta1, beta2_ = a.beta2, eps = a.epsilon;
  c.dispatch(type_list<float, double>{}, p.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T b1 = T(beta1_), b2 = T(beta2_), e = T(eps), lr_t = T(lr / (1 - b1p));
    LoDTensor& po = out_like(c, param_out, p);
    LoDTensor& mo = out_like(c, moment_out, m);
    LoDTensor& uo = out_like(c, inf_norm_out, u);
    const T *pp = p.data<T>(), *pg = g.data<T>(), *pm = m.data<T>(), *pu = u.data<T>();
    T *ppo = po.data<T>(), *pmo = mo.data<T>(), *puo = uo.data<T>();
    for_range(p.numel(), [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) {
        T pv = pp[i], mn = pm[i], un = pu[i];
        fn::adamax_step(pv, mn, un, pg[i], lr_t, b1, b2, e);
        pmo[i] = mn;
        puo[i] = un;
        ppo[i] = pv;
      }
    });
  });
  advance_pow(c, beta1_pow, beta1_pow_out, beta1_);
}

inline void Rmsprop::eval_cpu(KernelContext& c, const Attrs& a) {
  using namespace cpu_kernels::param_update;
  if (skipped<Rmsprop>(c)) return;
  const LoDTensor& p = c.in(param);
  const LoDTensor& g = dense_grad(c, grad, p);
  const LoDTensor& ms = like_param(c, mean_square, p);
  const LoDTensor& mom = like_param(c, moment, p);
  const bool centered_ = a.centered;
  c.check(!centered_ || (c.has_in(mean_grad) && c.has_out(mean_grad_out)), "centered = true needs MeanGrad and MeanGradOut");
  const LoDTensor* mg = centered_ ? &like_param(c, mean_grad, p) : nullptr;
  const double lr = scalar(c, learning_rate), eps = a.epsilon, decay_ = a.decay, momentum_ = a.momentum;
  c.dispatch(type_list<float, double>{}, p.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T l = T(lr), e = T(eps), rho = T(decay_), mu = T(momentum_);
    LoDTensor& po = out_like(c, param_out, p);
    LoDTensor& mso = out_like(c, mean_square_out, ms);
    LoDTensor& momo = out_like(c, moment_out, mom);
    const T *pp = p.data<T>(), *pg = g.data<T>(), *pms = ms.data<T>(), *pmom = mom.data<T>();
    T *ppo = po.data<T>(), *pmso = mso.data<T>(), *pmomo = momo.data<T>();
    const T* pmg = nullptr;
    T* pmgo = nullptr;
    if (centered_) {
      pmg = mg->data<T>();
      pmgo = out_like(c, mean_grad_out, *mg).data<T>();
    }
    for_range(p.numel(), [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) {
        T pv = pp[i], msn = pms[i], momn = pmom[i], mgn = centered_ ? pmg[i] : T(0);
        fn::rmsprop_step(pv, msn, centered_ ? &mgn : nullptr, momn, pg[i], l, e, rho, mu);
        if (centered_) pmgo[i] = mgn;
        pmso[i] = msn;
        pmomo[i] = momn;
        ppo[i] = pv;
      }
    });
  });
}

inline void Adadelta::eval_cpu(KernelContext& c, const Attrs& a) {
  using namespace cpu_kernels::param_update;
  if (skipped<Adadelta>(c)) return;
  const LoDTensor& p = c.in(param);
  const LoDTensor& g = dense_grad(c, grad, p);
  const LoDTensor& eg = like_param(c, avg_squared_grad, p);
  const LoDTensor& edx = like_param(c, avg_squared_update, p);
  const double rho_ = a.rho, eps = a.epsilon;
  c.dispatch(type_list<float, double>{}, p.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T r = T(rho_), e = T(eps);
    LoDTensor& po = out_like(c, param_out, p);
    LoDTensor& ego = out_like(c, avg_squared_grad_out, eg);
    LoDTensor& edxo = out_like(c, avg_squared_update_out, edx);
    const T *pp = p.data<T>(), *pg = g.data<T>(), *peg = eg.data<T>(), *pedx = edx.data<T>();
    T *ppo = po.data<T>(), *pego = ego.data<T>(), *pedxo = edxo.data<T>();
    for_range(p.numel(), [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) {
        T pv = pp[i], egn = peg[i], edxn = pedx[i];
        fn::adadelta_step(pv, egn, edxn, pg[i], r, e);
        pego[i] = egn;
        pedxo[i] = edxn;
        ppo[i] = pv;
      }
    });
  });
}

inline void Lamb::eval_cpu(KernelContext& c, const Attrs& a) {
  using namespace cpu_kernels::param_update;
  if (skipped<Lamb>(c)) return;
  const LoDTensor& p = c.in(param);
  const LoDTensor& g = dense_grad(c, grad, p);
  const LoDTensor& m1 = like_param(c, moment1, p);
  const LoDTensor& m2 = like_param(c, moment2, p);
  const double lr = scalar(c, learning_rate), b1p = scalar(c, beta1_pow), b2p = scalar(c, beta2_pow);
  const double beta1_ = a.beta1, beta2_ = a.beta2, eps = a.epsilon, wd_ = a.weight_decay;
  c.dispatch(type_list<float, double>{}, p.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T b1 = T(beta1_), b2 = T(beta2_), e = T(eps), wd = T(wd_), c1 = T(1 - b1p), c2 = T(1 - b2p);
    const int64_t n = p.numel();
    // The direction r, in a per-thread buffer that outlives the call (a repeated step allocates nothing).
    T* r = cpu_kernels::thread_scratch<T, 40>(size_t(n));
    LoDTensor& m1o = out_like(c, moment1_out, m1);
    LoDTensor& m2o = out_like(c, moment2_out, m2);
    const T *pp = p.data<T>(), *pg = g.data<T>(), *pm1 = m1.data<T>(), *pm2 = m2.data<T>();
    T *pm1o = m1o.data<T>(), *pm2o = m2o.data<T>();
    for_range(n, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) {
        T am = pm1[i], bm = pm2[i];
        r[i] = fn::lamb_direction(pp[i], am, bm, pg[i], b1, b2, c1, c2, e, wd);
        pm1o[i] = am;
        pm2o[i] = bm;
      }
    });
    double pn = 0, rn = 0;  // norms in double, in index order (deterministic)
    for (int64_t i = 0; i < n; ++i) {
      pn += double(pp[i]) * double(pp[i]);
      rn += double(r[i]) * double(r[i]);
    }
    pn = std::sqrt(pn);
    rn = std::sqrt(rn);
    const T step = T(lr * (pn > 0 && rn > 0 ? pn / rn : 1.0));
    LoDTensor& po = out_like(c, param_out, p);  // after the norms: ParamOut may be Param
    T* ppo = po.data<T>();
    for_range(n, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) ppo[i] = pp[i] - step * r[i];
    });
  });
  advance_pow(c, beta1_pow, beta1_pow_out, beta1_);
  advance_pow(c, beta2_pow, beta2_pow_out, beta2_);
}

}  // namespace oar::ops
