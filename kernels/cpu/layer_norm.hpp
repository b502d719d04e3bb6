// kernels/cpu/layer_norm.hpp: layer_norm and layer_norm_grad on the CPU: rows split over the thread pool
// (statistics in double), Scale/Bias gradients reduced over rows by column blocks.
#pragma once
#include <cmath>
#include <vector>

#include "oar/ops/layer_norm.hpp"
#include "oar/runtime/kernel_context.hpp"
#include "oar/runtime/thread_pool.hpp"

namespace oar::ops {

/// requires: X [M, K] when flattened at begin_norm_axis; Scale, Bias (optional) [K]. Y may be X.
inline void LayerNorm::eval_cpu(KernelContext& c) {
  const LoDTensor& x = c.in("X");
  const int b = c.attr<int32_t>("begin_norm_axis");
  const double eps = c.attr<float>("epsilon");
  c.check(b < x.rank(), "begin_norm_axis = {} needs X of rank > {}, X is {}", b, b, x.shape());
  const int64_t rows = x.shape().numel(0, b), k = x.shape().numel(b, x.rank());
  const LoDTensor* scale = c.has_in("Scale") ? &c.in("Scale") : nullptr;
  const LoDTensor* bias = c.has_in("Bias") ? &c.in("Bias") : nullptr;
  for (auto* p : {scale, bias})
    if (p) c.check(p->numel() == k, "Scale and Bias must have {} elements (X {} from dim {} on), got {}", k, x.shape(), b, p->shape());
  c.dispatch_float([&](auto tag) {
    using T = typename decltype(tag)::type;
    LoDTensor& y = c.out("Y");
    LoDTensor& mean = c.out("Mean");
    LoDTensor& var = c.out("Variance");
    if (&y != &x) y.resize(x.shape(), x.dtype());
    mean.resize(Shape{rows}, x.dtype());
    var.resize(Shape{rows}, x.dtype());
    const T* px = x.data<T>();
    const T* ps = scale ? scale->data<T>() : nullptr;
    const T* pb = bias ? bias->data<T>() : nullptr;
    T *py = y.data<T>(), *pm = mean.data<T>(), *pv = var.data<T>();
    parallel_for(0, rows, std::max<int64_t>(1, (int64_t(1) << 14) / std::max<int64_t>(k, 1)), [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) {
        const T* xr = px + i * k;
        T* yr = py + i * k;
        double s = 0, q = 0;
        for (int64_t j = 0; j < k; ++j) s += double(xr[j]);
        const double mu = k ? s / double(k) : 0;
        for (int64_t j = 0; j < k; ++j) q += (double(xr[j]) - mu) * (double(xr[j]) - mu);
        const double v = k ? q / double(k) : 0;
        pm[i] = T(mu);
        pv[i] = T(v);
        const T is = T(1.0 / std::sqrt(v + eps)), mt = T(mu);
        if (ps && pb) for (int64_t j = 0; j < k; ++j) yr[j] = (xr[j] - mt) * is * ps[j] + pb[j];
        else if (ps) for (int64_t j = 0; j < k; ++j) yr[j] = (xr[j] - mt) * is * ps[j];
        else if (pb) for (int64_t j = 0; j < k; ++j) yr[j] = (xr[j] - mt) * is + pb[j];
        else for (int64_t j = 0; j < k; ++j) yr[j] = (xr[j] - mt) * is;
      }
    });
    if (&y != &x) y.set_lod(x.lod());
  });
}

inline void LayerNorm::eval_grad_cpu(KernelContext& c) {
  const LoDTensor& x = c.in("X");
  const LoDTensor& mean = c.in("Mean");
  const LoDTensor& var = c.in("Variance");
  const LoDTensor& dy = c.in("Y@GRAD");
  c.check(dy.shape() == x.shape(), "Y@GRAD {} does not match X {}", dy.shape(), x.shape());
  const int b = c.attr<int32_t>("begin_norm_axis");
  const double eps = c.attr<float>("epsilon");
  const int64_t rows = x.shape().numel(0, b), k = x.shape().numel(b, x.rank());
  const LoDTensor* scale = c.has_in("Scale") ? &c.in("Scale") : nullptr;
  c.dispatch_float([&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *px = x.data<T>(), *pm = mean.data<T>(), *pv = var.data<T>(), *pdy = dy.data<T>();
    const T* ps = scale ? scale->data<T>() : nullptr;
    std::vector<T> istd(static_cast<size_t>(rows));
    for (int64_t i = 0; i < rows; ++i) istd[size_t(i)] = T(1.0 / std::sqrt(double(pv[i]) + eps));
    if (c.has_out("X@GRAD")) {
      LoDTensor& dx = c.out("X@GRAD");
      dx.resize(x.shape(), x.dtype());
      T* pdx = dx.data<T>();
      parallel_for(0, rows, std::max<int64_t>(1, (int64_t(1) << 14) / std::max<int64_t>(k, 1)), [&](int64_t lo, int64_t hi) {
        for (int64_t i = lo; i < hi; ++i) {
          const T *xr = px + i * k, *gr = pdy + i * k;
          T* dr = pdx + i * k;
          const T mu = pm[i], is = istd[size_t(i)];
          double sg = 0, sgx = 0;  // sum(g), sum(g * xhat) with g = dy * scale
          for (int64_t j = 0; j < k; ++j) {
            T g = ps ? gr[j] * ps[j] : gr[j];
            sg += double(g);
            sgx += double(g) * double((xr[j] - mu) * is);
          }
          const T mg = T(sg / double(k)), mgx = T(sgx / double(k));
          for (int64_t j = 0; j < k; ++j) {
            T g = ps ? gr[j] * ps[j] : gr[j];
            dr[j] = is * (g - mg - (xr[j] - mu) * is * mgx);
          }
        }
      });
      dx.set_lod(x.lod());
    }
    const bool want_s = c.has_out("Scale@GRAD"), want_b = c.has_out("Bias@GRAD");
    if (!want_s && !want_b) return;
    std::vector<double> ds(static_cast<size_t>(k)), db(static_cast<size_t>(k));
    parallel_for(0, k, 256, [&](int64_t lo, int64_t hi) {  // column blocks: each thread owns its columns
      for (int64_t i = 0; i < rows; ++i) {
        const T *xr = px + i * k, *gr = pdy + i * k;
        const double mu = double(pm[i]), is = double(istd[size_t(i)]);
        for (int64_t j = lo; j < hi; ++j) {
          ds[size_t(j)] += double(gr[j]) * (double(xr[j]) - mu) * is;
          db[size_t(j)] += double(gr[j]);
        }
      }
    });
    auto write = [&](const char* slot, const std::vector<double>& v) {
      LoDTensor& o = c.out(slot);
      o.resize(Shape{k}, x.dtype());
      for (int64_t j = 0; j < k; ++j) o.data<T>()[j] = T(v[size_t(j)]);
    };
    if (want_s) write("Scale@GRAD", ds);
    if (want_b) write("Bias@GRAD", db);
  });
}

}  // namespace oar::ops
