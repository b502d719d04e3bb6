// kernels/cpu/batch_norm.hpp: batch_norm and batch_norm_grad on the CPU (NCHW): per-channel statistics in
// double, channels split over the thread pool; Y as one fused multiply-add per element.
#pragma once
#include <cmath>
#include <vector>

#include "oar/ops/batch_norm.hpp"
#include "oar/runtime/kernel_context.hpp"
#include "oar/runtime/thread_pool.hpp"

namespace oar::cpu_kernels {

/// [N, C, S] view of an NCHW tensor (S = H*W..., 1 for [N, C]).
struct NcsDims {
  int64_t n, c, s;
};
inline NcsDims ncs(const Shape& x) { return {x[0], x[1], x.numel(2, x.rank())}; }

/// A copy of a [C] tensor as doubles (read before any output is written: MeanOut may be Mean).
template <class T>
std::vector<double> channel_values(const LoDTensor& t) {
  const T* p = t.data<T>();
  return std::vector<double>(p, p + t.numel());
}

}  // namespace oar::cpu_kernels

namespace oar::ops {

/// requires: X [N, C, ...] NCHW; Scale, Bias, Mean, Variance [C]. MeanOut may be the same tensor as Mean and
/// VarianceOut as Variance (in-place running statistics); Y may be X.
inline void BatchNorm::eval_cpu(KernelContext& c) {
  const LoDTensor& x = c.in("X");
  const LoDTensor& scale = c.in("Scale");
  const LoDTensor& bias = c.in("Bias");
  const LoDTensor& mean_in = c.in("Mean");
  const LoDTensor& var_in = c.in("Variance");
  c.check(c.attr<std::string>("data_layout") == "NCHW", "data_layout {} is not supported (only NCHW)", c.attr<std::string>("data_layout"));
  c.check(x.rank() >= 2 && x.rank() <= 5, "X must have rank 2 to 5 ([N, C] or [N, C, H, W]), got {}", x.shape());
  const cpu_kernels::NcsDims dm = cpu_kernels::ncs(x.shape());
  for (auto* p : {&scale, &bias, &mean_in, &var_in})
    c.check(p->rank() == 1 && p->dim(0) == dm.c, "Scale, Bias, Mean and Variance must be [{}] for X {}, got {}", dm.c, x.shape(), p->shape());
  const float momentum = c.attr<float>("momentum");
  const double eps = c.attr<float>("epsilon");
  const bool global = c.attr<bool>("is_test") || c.attr<bool>("use_global_stats");
  const int64_t m = dm.n * dm.s;
  c.dispatch_float([&](auto tag) {
    using T = typename decltype(tag)::type;
    std::vector<double> run_mean = cpu_kernels::channel_values<T>(mean_in), run_var = cpu_kernels::channel_values<T>(var_in);
    std::vector<double> mean(static_cast<size_t>(dm.c)), var(static_cast<size_t>(dm.c));
    const T* px = x.data<T>();
    if (global) {
      mean = run_mean;
      var = run_var;
    } else if (m > 0) {
      parallel_for(0, dm.c, 1, [&](int64_t lo, int64_t hi) {
        for (int64_t ch = lo; ch < hi; ++ch) {
          double s = 0;
          for (int64_t i = 0; i < dm.n; ++i) {
            const T* p = px + (i * dm.c + ch) * dm.s;
            for (int64_t j = 0; j < dm.s; ++j) s += double(p[j]);
          }
          const double mu = s / double(m);
          double q = 0;  // two passes: no cancellation for large means
          for (int64_t i = 0; i < dm.n; ++i) {
            const T* p = px + (i * dm.c + ch) * dm.s;
            for (int64_t j = 0; j < dm.s; ++j) q += (double(p[j]) - mu) * (double(p[j]) - mu);
          }
          mean[size_t(ch)] = mu;
          var[size_t(ch)] = q / double(m);
        }
      });
    }
    // NOTE: an empty training batch has no statistics: it normalizes nothing and leaves the running ones alone.
    std::vector<T> a(static_cast<size_t>(dm.c)), b(static_cast<size_t>(dm.c));
    std::vector<double> istd(static_cast<size_t>(dm.c));
    const T *ps = scale.data<T>(), *pb = bias.data<T>();
    for (int64_t ch = 0; ch < dm.c; ++ch) {
      istd[size_t(ch)] = 1.0 / std::sqrt(var[size_t(ch)] + eps);
      a[size_t(ch)] = T(double(ps[ch]) * istd[size_t(ch)]);
      b[size_t(ch)] = T(double(pb[ch]) - mean[size_t(ch)] * double(ps[ch]) * istd[size_t(ch)]);
    }
    LoDTensor& y = c.out("Y");
    if (&y != &x) y.resize(x.shape(), x.dtype());
    T* py = y.data<T>();
    parallel_for(0, dm.n * dm.c, std::max<int64_t>(1, (int64_t(1) << 14) / std::max<int64_t>(dm.s, 1)), [&](int64_t lo, int64_t hi) {
      for (int64_t pl = lo; pl < hi; ++pl) {
        const T ac = a[size_t(pl % dm.c)], bc = b[size_t(pl % dm.c)];
        const T* xp = px + pl * dm.s;
        T* yp = py + pl * dm.s;
        for (int64_t j = 0; j < dm.s; ++j) yp[j] = xp[j] * ac + bc;
      }
    });
    if (&y != &x) y.set_lod(x.lod());
    const bool update = !global && m > 0;
    auto write = [&](const char* slot, auto&& value) {
      LoDTensor& o = c.out(slot);
      o.resize(Shape{dm.c}, x.dtype());
      T* p = o.data<T>();
      for (int64_t ch = 0; ch < dm.c; ++ch) p[ch] = T(value(size_t(ch)));
    };
    write("MeanOut", [&](size_t ch) { return update ? run_mean[ch] * momentum + mean[ch] * (1.0 - momentum) : run_mean[ch]; });
    write("VarianceOut", [&](size_t ch) { return update ? run_var[ch] * momentum + var[ch] * (1.0 - momentum) : run_var[ch]; });
    if (c.has_out("SavedMean")) write("SavedMean", [&](size_t ch) { return mean[ch]; });
    if (c.has_out("SavedVariance")) write("SavedVariance", [&](size_t ch) { return istd[ch]; });
  });
}

inline void BatchNorm::eval_grad_cpu(KernelContext& c) {
  const LoDTensor& x = c.in("X");
  const LoDTensor& scale = c.in("Scale");
  const LoDTensor& smean = c.in("SavedMean");
  const LoDTensor& sistd = c.in("SavedVariance");
  const LoDTensor& dy = c.in("Y@GRAD");
  c.check(dy.shape() == x.shape(), "Y@GRAD {} does not match X {}", dy.shape(), x.shape());
  const cpu_kernels::NcsDims dm = cpu_kernels::ncs(x.shape());
  const bool global = c.attr<bool>("is_test") || c.attr<bool>("use_global_stats");
  const int64_t m = dm.n * dm.s;
  c.dispatch_float([&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *px = x.data<T>(), *pdy = dy.data<T>(), *ps = scale.data<T>(), *pm = smean.data<T>(), *pi = sistd.data<T>();
    T* pdx = nullptr;
    if (c.has_out("X@GRAD")) {
      LoDTensor& dx = c.out("X@GRAD");
      dx.resize(x.shape(), x.dtype());
      dx.set_lod(x.lod());
      pdx = dx.data<T>();
    }
    std::vector<double> sum_dy(static_cast<size_t>(dm.c)), sum_dy_xhat(static_cast<size_t>(dm.c));
    parallel_for(0, dm.c, 1, [&](int64_t lo, int64_t hi) {
      for (int64_t ch = lo; ch < hi; ++ch) {
        const double mu = double(pm[ch]), is = double(pi[ch]);
        double sd = 0, sdx = 0;
        for (int64_t i = 0; i < dm.n; ++i) {
          const T *xp = px + (i * dm.c + ch) * dm.s, *gp = pdy + (i * dm.c + ch) * dm.s;
          for (int64_t j = 0; j < dm.s; ++j) {
            sd += double(gp[j]);
            sdx += double(gp[j]) * (double(xp[j]) - mu) * is;
          }
        }
        sum_dy[size_t(ch)] = sd;
        sum_dy_xhat[size_t(ch)] = sdx;
        if (!pdx) continue;
        const double k = double(ps[ch]) * is;
        const double md = m ? sd / double(m) : 0, mdx = m ? sdx / double(m) : 0;
        for (int64_t i = 0; i < dm.n; ++i) {
          const T *xp = px + (i * dm.c + ch) * dm.s, *gp = pdy + (i * dm.c + ch) * dm.s;
          T* dp = pdx + (i * dm.c + ch) * dm.s;
          if (global) {
            for (int64_t j = 0; j < dm.s; ++j) dp[j] = T(k * double(gp[j]));
          } else {
            for (int64_t j = 0; j < dm.s; ++j) dp[j] = T(k * (double(gp[j]) - md - (double(xp[j]) - mu) * is * mdx));
          }
        }
      }
    });
    if (c.has_out("Scale@GRAD")) {
      LoDTensor& d = c.out("Scale@GRAD");
      d.resize(Shape{dm.c}, x.dtype());
      for (int64_t ch = 0; ch < dm.c; ++ch) d.data<T>()[ch] = T(sum_dy_xhat[size_t(ch)]);
    }
    if (c.has_out("Bias@GRAD")) {
      LoDTensor& d = c.out("Bias@GRAD");
      d.resize(Shape{dm.c}, x.dtype());
      for (int64_t ch = 0; ch < dm.c; ++ch) d.data<T>()[ch] = T(sum_dy[size_t(ch)]);
    }
  });
}

}  // namespace oar::ops
