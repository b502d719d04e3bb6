// kernels/cpu/layer_norm.hpp: layer_norm and layer_norm_grad on the CPU: rows split over the thread pool
// (statistics in double), Scale/Bias gradients reduced over rows by column blocks.
#pragma once
#include <algorithm>
#include <cmath>

#include "kernels/common/layer_norm.hpp"
#include "kernels/cpu/scratch.hpp"
#include "kernels/layer_norm_math.hpp"
#include "oar/ops/layer_norm.hpp"
#include "oar/device/kernel_context.hpp"
#include "oar/device/thread_pool.hpp"

namespace oar::ops {

/// requires: X [M, K] when flattened at begin_norm_axis; Scale, Bias (optional) [K]. Y may be X.
inline void LayerNorm::eval_cpu(KernelContext& c, const Attrs& a) {
  const LoDTensor& xt = c.in(x);
  const double eps = a.epsilon;
  const kernels::LayerNormPlan p = kernels::layer_norm_plan(c, a);
  const int64_t rows = p.rows, k = p.k;
  const LoDTensor *scale_t = p.scale, *bias_t = p.bias;
  c.dispatch_float([&](auto tag) {
    using T = typename decltype(tag)::type;
    const kernels::LayerNormOut o = kernels::layer_norm_out(c, p);
    const T* px = xt.data<T>();
    const T* ps = scale_t ? scale_t->data<T>() : nullptr;
    const T* pb = bias_t ? bias_t->data<T>() : nullptr;
    T *py = o.y.data<T>(), *pm = o.mean.data<T>(), *pv = o.variance.data<T>();
    parallel_for(0, rows, std::max<int64_t>(1, (int64_t(1) << 14) / std::max<int64_t>(k, 1)), [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) {
        const T* xr = px + i * k;
        T* yr = py + i * k;
        double s = 0, q = 0;
        for (int64_t j = 0; j < k; ++j) s += double(xr[j]);
        const double mu = fn::layer_norm::row_mean(s, k);
        for (int64_t j = 0; j < k; ++j) q += (double(xr[j]) - mu) * (double(xr[j]) - mu);
        const double v = fn::layer_norm::row_mean(q, k);
        pm[i] = T(mu);
        pv[i] = T(v);
        const T is = fn::layer_norm::istd<T>(v, eps), mt = T(mu);
        using fn::layer_norm::xhat;
        if (ps && pb) for (int64_t j = 0; j < k; ++j) yr[j] = xhat(xr[j], mt, is) * ps[j] + pb[j];
        else if (ps) for (int64_t j = 0; j < k; ++j) yr[j] = xhat(xr[j], mt, is) * ps[j];
        else if (pb) for (int64_t j = 0; j < k; ++j) yr[j] = xhat(xr[j], mt, is) + pb[j];
        else for (int64_t j = 0; j < k; ++j) yr[j] = xhat(xr[j], mt, is);
      }
    });
    if (&o.y != &xt) o.y.set_lod(xt.lod());
  });
}

inline void LayerNorm::eval_grad_cpu(KernelContext& c, const Attrs& a) {
  const LoDTensor& xt = c.in(x);
  const LoDTensor& mean_t = c.in(mean);
  const LoDTensor& var_t = c.in(variance);
  const LoDTensor& dy = c.in(y_grad);
  const double eps = a.epsilon;
  const kernels::LayerNormPlan p = kernels::layer_norm_grad_plan(c, a);
  const int64_t rows = p.rows, k = p.k;
  const LoDTensor* scale_t = p.scale;
  c.dispatch_float([&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *px = xt.data<T>(), *pm = mean_t.data<T>(), *pv = var_t.data<T>(), *pdy = dy.data<T>();
    const T* ps = scale_t ? scale_t->data<T>() : nullptr;
    T* istd = cpu_kernels::thread_scratch<T, 10>(size_t(rows));
    for (int64_t i = 0; i < rows; ++i) istd[i] = fn::layer_norm::istd<T>(double(pv[i]), eps);
    if (c.has_out(x_grad)) {
      LoDTensor& dx = c.out(x_grad);
      dx.resize(xt.shape(), xt.dtype());
      T* pdx = dx.data<T>();
      parallel_for(0, rows, std::max<int64_t>(1, (int64_t(1) << 14) / std::max<int64_t>(k, 1)), [&](int64_t lo, int64_t hi) {
        for (int64_t i = lo; i < hi; ++i) {
          const T *xr = px + i * k, *gr = pdy + i * k;
          T* dr = pdx + i * k;
          const T mu = pm[i], is = istd[i];
          double sg = 0, sgx = 0;  // sum(g), sum(g * xhat) with g = dy * scale
          for (int64_t j = 0; j < k; ++j) {
            T g = ps ? gr[j] * ps[j] : gr[j];
            sg += double(g);
            sgx += double(g) * double(fn::layer_norm::xhat(xr[j], mu, is));
          }
          const T mg = T(sg / double(k)), mgx = T(sgx / double(k));
          for (int64_t j = 0; j < k; ++j) {
            T g = ps ? gr[j] * ps[j] : gr[j];
            dr[j] = fn::layer_norm::dx(g, xr[j], mu, is, mg, mgx);
          }
        }
      });
      dx.set_lod(xt.lod());
    }
    const bool want_s = c.has_out(scale_grad), want_b = c.has_out(bias_grad);
    if (!want_s && !want_b) return;
    double* ds = cpu_kernels::thread_scratch<double, 11>(size_t(k));
    double* db = cpu_kernels::thread_scratch<double, 12>(size_t(k));
    std::fill(ds, ds + k, 0.0);
    std::fill(db, db + k, 0.0);
    parallel_for(0, k, 256, [&](int64_t lo, int64_t hi) {  // column blocks: each thread owns its columns
      for (int64_t i = 0; i < rows; ++i) {
        const T *xr = px + i * k, *gr = pdy + i * k;
        const double mu = double(pm[i]), is = double(istd[i]);
        for (int64_t j = lo; j < hi; ++j) {
          ds[j] += double(gr[j]) * (double(xr[j]) - mu) * is;
          db[j] += double(gr[j]);
        }
      }
    });
    auto write = [&](Slot slot, const double* v) {
      LoDTensor& o = c.out(slot);
      o.resize(Shape{k}, xt.dtype());
      for (int64_t j = 0; j < k; ++j) o.data<T>()[j] = T(v[j]);
    };
    if (want_s) write(scale_grad, ds);
    if (want_b) write(bias_grad, db);
  });
}

}  // namespace oar::ops
