// kernels/cpu/optimizers.hpp: CPU kernels of the parameter update ops (ops/optimizers.hpp). Every output may be
// the very tensor of its input (ParamOut = Param, MomentOut = Moment, ...): each element is read before it is
// written, and an aliased output is never resized.
#pragma once
#include <cmath>
#include <vector>

#include "oar/ops/optimizers.hpp"
#include "oar/runtime/kernel_context.hpp"
#include "oar/runtime/thread_pool.hpp"

namespace oar::cpu_kernels::param_update {

inline constexpr int64_t kGrain = 1 << 14;

/// The value of a one-element input (LearningRate, Beta1Pow, ...), whatever its float dtype.
inline double scalar(const KernelContext& c, std::string_view slot) {
  const LoDTensor& t = c.in(slot);
  c.check(t.numel() == 1, "{} must hold one value, got shape {}", slot, t.shape());
  c.check(t.dtype() == DType::f32 || t.dtype() == DType::f64, "{} must be float32 or float64, got {}", slot, name(t.dtype()));
  return t.get(0);
}

/// Input `slot`, checked to have Param's shape and dtype.
inline const LoDTensor& like_param(const KernelContext& c, std::string_view slot, const LoDTensor& p) {
  const LoDTensor& t = c.in(slot);
  c.check(t.shape() == p.shape(), "{} {} must have Param's shape {}", slot, t.shape(), p.shape());
  c.check(t.dtype() == p.dtype(), "{} is {} but Param is {}", slot, name(t.dtype()), name(p.dtype()));
  return t;
}

/// The dense Grad; an error naming the op when it is SelectedRows (this op takes dense gradients only).
inline const LoDTensor& dense_grad(const KernelContext& c, const LoDTensor& p) {
  Value* v = c.in_value("Grad");
  c.check(!(v && v->is_selected_rows()), "Grad is SelectedRows, but {} takes dense gradients only", c.op().type());
  return like_param(c, "Grad", p);
}

/// Output `slot` shaped like `in`; left untouched when it is `in` itself (in place).
inline LoDTensor& out_like(const KernelContext& c, std::string_view slot, const LoDTensor& in) {
  LoDTensor& o = c.out(slot);
  if (&o != &in) {
    o.resize(in.shape(), in.dtype());
    o.set_lod(in.lod());
  }
  return o;
}

/// Output `slot` holding a copy of `in` (nothing to do when it is `in` itself): for sparse updates that
/// leave the rows they do not touch as they were.
inline LoDTensor& out_copy(const KernelContext& c, std::string_view slot, const LoDTensor& in) {
  LoDTensor& o = c.out(slot);
  if (&o != &in) {
    o.copy_from(in);
    o.set_lod(in.lod());
  }
  return o;
}

/// Writes `in * factor` to the optional scalar output `slot` (Beta1PowOut = Beta1Pow * beta1), if asked for.
inline void advance_pow(const KernelContext& c, std::string_view in_slot, std::string_view out_slot, double factor) {
  if (!c.has_out(out_slot)) return;
  const LoDTensor& in = c.in(in_slot);
  double v = scalar(c, in_slot) * factor;
  LoDTensor& o = out_like(c, out_slot, in);
  if (o.dtype() == DType::f64) o.data<double>()[0] = v;
  else o.data<float>()[0] = float(v);
}

/// Runs `f(lo, hi)` over [0, n) in parallel chunks.
template <class F>
void for_range(int64_t n, F&& f) {
  parallel_for(0, n, kGrain, std::forward<F>(f));
}

/// A SelectedRows gradient checked against Param [height, w...]: rows in range, value [rows, w...], dtype.
/// Returns the row width w.
inline int64_t check_sparse(const KernelContext& c, const SelectedRows& g, const LoDTensor& p) {
  c.check(p.rank() >= 1, "Param {} must have rank >= 1 for a SelectedRows Grad", p.shape());
  int64_t height = p.dim(0), width = p.shape().numel(1, p.rank());
  c.check(g.height == 0 || g.height == height, "SelectedRows Grad has height {} but Param {} has {} rows", g.height, p.shape(), height);
  c.check(g.value.initialized(), "SelectedRows Grad has no value");
  c.check(g.value.dtype() == p.dtype(), "Grad is {} but Param is {}", name(g.value.dtype()), name(p.dtype()));
  c.check(g.value.numel() == int64_t(g.rows.size()) * width, "SelectedRows Grad value {} does not hold {} rows of width {} (Param {})",
          g.value.shape(), g.rows.size(), width, p.shape());
  for (int64_t r : g.rows) c.check(r >= 0 && r < height, "SelectedRows Grad row {} is out of range for Param {}", r, p.shape());
  return width;
}

/// Sums repeated rows: `merged[k]` is the row of Param, `sums` [merged.size() * width] their summed gradients.
template <class T>
void merge_rows(const SelectedRows& g, int64_t width, int64_t height, std::vector<int64_t>& merged, std::vector<T>& sums) {
  std::vector<int64_t> slot(size_t(height), -1);
  const T* v = g.value.data<T>();
  for (size_t i = 0; i < g.rows.size(); ++i) {
    int64_t r = g.rows[i];
    if (slot[size_t(r)] < 0) {
      slot[size_t(r)] = int64_t(merged.size());
      merged.push_back(r);
      sums.resize(sums.size() + size_t(width), T(0));
    }
    T* dst = sums.data() + slot[size_t(r)] * width;
    for (int64_t j = 0; j < width; ++j) dst[j] += v[int64_t(i) * width + j];
  }
}

/// The shared adam / adamw kernel; `decay` is adamw's lr * coeff (0 for adam).
inline void adam_like(KernelContext& c, bool decoupled) {
  const LoDTensor& p = c.in("Param");
  const LoDTensor& m1 = like_param(c, "Moment1", p);
  const LoDTensor& m2 = like_param(c, "Moment2", p);
  const double lr = scalar(c, "LearningRate"), b1p = scalar(c, "Beta1Pow"), b2p = scalar(c, "Beta2Pow");
  const double beta1 = c.attr<float>("beta1"), beta2 = c.attr<float>("beta2"), eps = c.attr<float>("epsilon");
  const bool lazy = c.attr<bool>("lazy_mode");
  const double coeff = decoupled && c.attr<bool>("with_decay") ? double(c.attr<float>("coeff")) : 0.0;
  Value* gv = c.in_value("Grad");
  const bool sparse = gv && gv->is_selected_rows();
  c.dispatch(type_list<float, double>{}, p.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T b1 = T(beta1), b2 = T(beta2), e = T(eps), lr_t = T(lr * std::sqrt(1 - b2p) / (1 - b1p)), wd = T(lr * coeff);
    const T one = T(1);
    // One element: reads p, m1, m2 at i, writes the outputs at i (the outputs may alias the inputs).
    auto step = [&](const T* pp, const T* pm1, const T* pm2, T* po, T* pm1o, T* pm2o, int64_t i, T g) {
      T pv = pp[i];
      if (coeff != 0) pv -= wd * pv;
      T a = b1 * pm1[i] + (one - b1) * g;
      T b = b2 * pm2[i] + (one - b2) * g * g;
      pm1o[i] = a;
      pm2o[i] = b;
      po[i] = pv - lr_t * a / (std::sqrt(b) + e);
    };
    if (!sparse) {
      const LoDTensor& g = dense_grad(c, p);
      LoDTensor& po = out_like(c, "ParamOut", p);
      LoDTensor& m1o = out_like(c, "Moment1Out", m1);
      LoDTensor& m2o = out_like(c, "Moment2Out", m2);
      const T *pp = p.data<T>(), *pg = g.data<T>(), *pm1 = m1.data<T>(), *pm2 = m2.data<T>();
      T *ppo = po.data<T>(), *pm1o = m1o.data<T>(), *pm2o = m2o.data<T>();
      for_range(p.numel(), [&](int64_t lo, int64_t hi) {
        for (int64_t i = lo; i < hi; ++i) step(pp, pm1, pm2, ppo, pm1o, pm2o, i, pg[i]);
      });
      return;
    }
    const SelectedRows& g = gv->selected_rows();
    const int64_t width = check_sparse(c, g, p), height = p.dim(0);
    std::vector<int64_t> rows;
    std::vector<T> sums;
    merge_rows<T>(g, width, height, rows, sums);
    if (lazy) {  // the unlisted rows keep their values: start from copies
      LoDTensor& po = out_copy(c, "ParamOut", p);
      LoDTensor& m1o = out_copy(c, "Moment1Out", m1);
      LoDTensor& m2o = out_copy(c, "Moment2Out", m2);
      T *ppo = po.data<T>(), *pm1o = m1o.data<T>(), *pm2o = m2o.data<T>();
      for (size_t k = 0; k < rows.size(); ++k)
        for (int64_t j = 0; j < width; ++j) step(ppo, pm1o, pm2o, ppo, pm1o, pm2o, rows[k] * width + j, sums[k * size_t(width) + size_t(j)]);
    } else {  // every row, with g = 0 where none is listed
      std::vector<int64_t> slot(size_t(height), -1);
      for (size_t k = 0; k < rows.size(); ++k) slot[size_t(rows[k])] = int64_t(k);
      LoDTensor& po = out_like(c, "ParamOut", p);
      LoDTensor& m1o = out_like(c, "Moment1Out", m1);
      LoDTensor& m2o = out_like(c, "Moment2Out", m2);
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
  advance_pow(c, "Beta1Pow", "Beta1PowOut", beta1);
  advance_pow(c, "Beta2Pow", "Beta2PowOut", beta2);
}

}  // namespace oar::cpu_kernels::param_update

namespace oar::ops {

inline void Sgd::eval_cpu(KernelContext& c) {
  using namespace cpu_kernels::param_update;
  const LoDTensor& p = c.in("Param");
  const double lr = scalar(c, "LearningRate");
  Value* gv = c.in_value("Grad");
  c.dispatch(type_list<float, double>{}, p.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T l = T(lr);
    if (gv && gv->is_selected_rows()) {
      const SelectedRows& g = gv->selected_rows();
      const int64_t width = check_sparse(c, g, p);
      LoDTensor& po = out_copy(c, "ParamOut", p);
      T* ppo = po.data<T>();
      const T* v = g.value.data<T>();
      for (size_t i = 0; i < g.rows.size(); ++i) {  // sequential: repeated rows add up
        T* dst = ppo + g.rows[i] * width;
        const T* src = v + int64_t(i) * width;
        for (int64_t j = 0; j < width; ++j) dst[j] -= l * src[j];
      }
      return;
    }
    const LoDTensor& g = dense_grad(c, p);
    LoDTensor& po = out_like(c, "ParamOut", p);
    const T *pp = p.data<T>(), *pg = g.data<T>();
    T* ppo = po.data<T>();
    for_range(p.numel(), [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) ppo[i] = pp[i] - l * pg[i];
    });
  });
}

inline void Momentum::eval_cpu(KernelContext& c) {
  using namespace cpu_kernels::param_update;
  const LoDTensor& p = c.in("Param");
  const LoDTensor& g = dense_grad(c, p);
  const LoDTensor& v = like_param(c, "Velocity", p);
  const double lr = scalar(c, "LearningRate"), mu = c.attr<float>("mu");
  const bool nesterov = c.attr<bool>("use_nesterov");
  c.dispatch(type_list<float, double>{}, p.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T l = T(lr), m = T(mu);
    LoDTensor& po = out_like(c, "ParamOut", p);
    LoDTensor& vo = out_like(c, "VelocityOut", v);
    const T *pp = p.data<T>(), *pg = g.data<T>(), *pv = v.data<T>();
    T *ppo = po.data<T>(), *pvo = vo.data<T>();
    for_range(p.numel(), [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) {
        T gi = pg[i], vn = m * pv[i] + gi;
        pvo[i] = vn;
        ppo[i] = nesterov ? pp[i] - (gi + m * vn) * l : pp[i] - l * vn;
      }
    });
  });
}

namespace param_update {
/// adagrad (decay < 0: m' = m + g^2) and decayed_adagrad (m' = decay * m + (1 - decay) * g^2).
inline void adagrad_like(KernelContext& c, double decay) {
  using namespace cpu_kernels::param_update;
  const LoDTensor& p = c.in("Param");
  const LoDTensor& g = dense_grad(c, p);
  const LoDTensor& m = like_param(c, "Moment", p);
  const double lr = scalar(c, "LearningRate"), eps = c.attr<float>("epsilon");
  c.dispatch(type_list<float, double>{}, p.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T l = T(lr), e = T(eps), d = T(decay);
    const bool plain = decay < 0;
    LoDTensor& po = out_like(c, "ParamOut", p);
    LoDTensor& mo = out_like(c, "MomentOut", m);
    const T *pp = p.data<T>(), *pg = g.data<T>(), *pm = m.data<T>();
    T *ppo = po.data<T>(), *pmo = mo.data<T>();
    for_range(p.numel(), [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) {
        T gi = pg[i];
        T mn = plain ? pm[i] + gi * gi : d * pm[i] + (T(1) - d) * gi * gi;
        pmo[i] = mn;
        ppo[i] = pp[i] - l * gi / (std::sqrt(mn) + e);
      }
    });
  });
}
}  // namespace param_update

inline void Adagrad::eval_cpu(KernelContext& c) { param_update::adagrad_like(c, -1.0); }
inline void DecayedAdagrad::eval_cpu(KernelContext& c) { param_update::adagrad_like(c, c.attr<float>("decay")); }

inline void Adam::eval_cpu(KernelContext& c) { cpu_kernels::param_update::adam_like(c, false); }
inline void AdamW::eval_cpu(KernelContext& c) { cpu_kernels::param_update::adam_like(c, true); }

inline void Adamax::eval_cpu(KernelContext& c) {
  using namespace cpu_kernels::param_update;
  const LoDTensor& p = c.in("Param");
  const LoDTensor& g = dense_grad(c, p);
  const LoDTensor& m = like_param(c, "Moment", p);
  const LoDTensor& u = like_param(c, "InfNorm", p);
  const double lr = scalar(c, "LearningRate"), b1p = scalar(c, "Beta1Pow");
  const double beta1 = c.attr<float>("beta1"), beta2 = c.attr<float>("beta2"), eps = c.attr<float>("epsilon");
  c.dispatch(type_list<float, double>{}, p.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T b1 = T(beta1), b2 = T(beta2), e = T(eps), lr_t = T(lr / (1 - b1p));
    LoDTensor& po = out_like(c, "ParamOut", p);
    LoDTensor& mo = out_like(c, "MomentOut", m);
    LoDTensor& uo = out_like(c, "InfNormOut", u);
    const T *pp = p.data<T>(), *pg = g.data<T>(), *pm = m.data<T>(), *pu = u.data<T>();
    T *ppo = po.data<T>(), *pmo = mo.data<T>(), *puo = uo.data<T>();
    for_range(p.numel(), [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) {
        T gi = pg[i];
        T mn = b1 * pm[i] + (T(1) - b1) * gi;
        T un = std::max(b2 * pu[i] + e, std::abs(gi));
        pmo[i] = mn;
        puo[i] = un;
        ppo[i] = pp[i] - lr_t * mn / un;
      }
    });
  });
  advance_pow(c, "Beta1Pow", "Beta1PowOut", beta1);
}

inline void Rmsprop::eval_cpu(KernelContext& c) {
  using namespace cpu_kernels::param_update;
  const LoDTensor& p = c.in("Param");
  const LoDTensor& g = dense_grad(c, p);
  const LoDTensor& ms = like_param(c, "MeanSquare", p);
  const LoDTensor& mom = like_param(c, "Moment", p);
  const bool centered = c.attr<bool>("centered");
  c.check(!centered || (c.has_in("MeanGrad") && c.has_out("MeanGradOut")), "centered = true needs MeanGrad and MeanGradOut");
  const LoDTensor* mg = centered ? &like_param(c, "MeanGrad", p) : nullptr;
  const double lr = scalar(c, "LearningRate"), eps = c.attr<float>("epsilon"), decay = c.attr<float>("decay"), momentum = c.attr<float>("momentum");
  c.dispatch(type_list<float, double>{}, p.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T l = T(lr), e = T(eps), rho = T(decay), mu = T(momentum);
    LoDTensor& po = out_like(c, "ParamOut", p);
    LoDTensor& mso = out_like(c, "MeanSquareOut", ms);
    LoDTensor& momo = out_like(c, "MomentOut", mom);
    const T *pp = p.data<T>(), *pg = g.data<T>(), *pms = ms.data<T>(), *pmom = mom.data<T>();
    T *ppo = po.data<T>(), *pmso = mso.data<T>(), *pmomo = momo.data<T>();
    const T* pmg = nullptr;
    T* pmgo = nullptr;
    if (centered) {
      pmg = mg->data<T>();
      pmgo = out_like(c, "MeanGradOut", *mg).data<T>();
    }
    for_range(p.numel(), [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) {
        T gi = pg[i];
        T msn = rho * pms[i] + (T(1) - rho) * gi * gi;
        T denom = msn + e;
        if (centered) {
          T mgn = rho * pmg[i] + (T(1) - rho) * gi;
          pmgo[i] = mgn;
          denom = msn - mgn * mgn + e;
        }
        T momn = mu * pmom[i] + l * gi / std::sqrt(denom);
        pmso[i] = msn;
        pmomo[i] = momn;
        ppo[i] = pp[i] - momn;
      }
    });
  });
}

inline void Adadelta::eval_cpu(KernelContext& c) {
  using namespace cpu_kernels::param_update;
  const LoDTensor& p = c.in("Param");
  const LoDTensor& g = dense_grad(c, p);
  const LoDTensor& eg = like_param(c, "AvgSquaredGrad", p);
  const LoDTensor& edx = like_param(c, "AvgSquaredUpdate", p);
  const double rho_ = c.attr<float>("rho"), eps = c.attr<float>("epsilon");
  c.dispatch(type_list<float, double>{}, p.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T rho = T(rho_), e = T(eps);
    LoDTensor& po = out_like(c, "ParamOut", p);
    LoDTensor& ego = out_like(c, "AvgSquaredGradOut", eg);
    LoDTensor& edxo = out_like(c, "AvgSquaredUpdateOut", edx);
    const T *pp = p.data<T>(), *pg = g.data<T>(), *peg = eg.data<T>(), *pedx = edx.data<T>();
    T *ppo = po.data<T>(), *pego = ego.data<T>(), *pedxo = edxo.data<T>();
    for_range(p.numel(), [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) {
        T gi = pg[i];
        T egn = rho * peg[i] + (T(1) - rho) * gi * gi;
        T d = -std::sqrt((pedx[i] + e) / (egn + e)) * gi;
        pego[i] = egn;
        pedxo[i] = rho * pedx[i] + (T(1) - rho) * d * d;
        ppo[i] = pp[i] + d;
      }
    });
  });
}

inline void Lamb::eval_cpu(KernelContext& c) {
  using namespace cpu_kernels::param_update;
  const LoDTensor& p = c.in("Param");
  const LoDTensor& g = dense_grad(c, p);
  const LoDTensor& m1 = like_param(c, "Moment1", p);
  const LoDTensor& m2 = like_param(c, "Moment2", p);
  const double lr = scalar(c, "LearningRate"), b1p = scalar(c, "Beta1Pow"), b2p = scalar(c, "Beta2Pow");
  const double beta1 = c.attr<float>("beta1"), beta2 = c.attr<float>("beta2"), eps = c.attr<float>("epsilon"), wd_ = c.attr<float>("weight_decay");
  c.dispatch(type_list<float, double>{}, p.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T b1 = T(beta1), b2 = T(beta2), e = T(eps), wd = T(wd_), c1 = T(1 - b1p), c2 = T(1 - b2p);
    const int64_t n = p.numel();
    std::vector<T> r(static_cast<size_t>(n));
    LoDTensor& m1o = out_like(c, "Moment1Out", m1);
    LoDTensor& m2o = out_like(c, "Moment2Out", m2);
    const T *pp = p.data<T>(), *pg = g.data<T>(), *pm1 = m1.data<T>(), *pm2 = m2.data<T>();
    T *pm1o = m1o.data<T>(), *pm2o = m2o.data<T>();
    for_range(n, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) {
        T gi = pg[i];
        T a = b1 * pm1[i] + (T(1) - b1) * gi;
        T b = b2 * pm2[i] + (T(1) - b2) * gi * gi;
        pm1o[i] = a;
        pm2o[i] = b;
        r[size_t(i)] = (a / c1) / (std::sqrt(b / c2) + e) + wd * pp[i];
      }
    });
    double pn = 0, rn = 0;  // norms in double, in index order (deterministic)
    for (int64_t i = 0; i < n; ++i) {
      pn += double(pp[i]) * double(pp[i]);
      rn += double(r[size_t(i)]) * double(r[size_t(i)]);
    }
    pn = std::sqrt(pn);
    rn = std::sqrt(rn);
    const T step = T(lr * (pn > 0 && rn > 0 ? pn / rn : 1.0));
    LoDTensor& po = out_like(c, "ParamOut", p);  // after the norms: ParamOut may be Param
    T* ppo = po.data<T>();
    for_range(n, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) ppo[i] = pp[i] - step * r[size_t(i)];
    });
  });
  advance_pow(c, "Beta1Pow", "Beta1PowOut", beta1);
  advance_pow(c, "Beta2Pow", "Beta2PowOut", beta2);
}

}  // namespace oar::ops
