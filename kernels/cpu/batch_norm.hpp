// kernels/cpu/batch_norm.hpp: batch_norm and batch_norm_grad on the CPU (NCHW): per-channel statistics in
// double, channels split over the thread pool; Y as one fused multiply-add per element.
#pragma once
#include <algorithm>
#include <cmath>

#include "kernels/common/batch_norm.hpp"
#include "kernels/cpu/scratch.hpp"
#include "oar/ops/batch_norm.hpp"
#include "oar/device/communicator.hpp"
#include "oar/device/kernel_context.hpp"
#include "oar/device/thread_pool.hpp"

namespace oar::cpu_kernels {

/// The calling thread's scratch buffer #`I` of `n` doubles (slots 10.. so as not to share conv's buffers).
template <int I>
inline double* bn_scratch(int64_t n) { return thread_scratch<double, 10 + I>(size_t(n)); }

/// Sums f(a[j], b[j]) over j < n (b may be a itself) in 8 interleaved double lanes. NOTE: one chain of dependent
/// double adds retires one element per add latency (4 cycles), and GCC may not reorder it into vector lanes
/// by itself (no -ffast-math): ResNet-18's batch norms spent most of their time in such chains.
template <class T, class F>
inline double lane_sum(const T* a, const T* b, int64_t n, F f) {
  double acc[8] = {};
  int64_t j = 0;
  for (; j + 8 <= n; j += 8)
    for (int l = 0; l < 8; ++l) acc[l] += f(double(a[j + l]), double(b[j + l]));
  double s = 0;
  for (; j < n; ++j) s += f(double(a[j]), double(b[j]));
  return s + (((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7])));
}

/// A copy of a [C] tensor as doubles in `dst` (read before any output is written: MeanOut may be Mean).
template <class T>
void channel_values(const LoDTensor& t, double* dst) {
  const T* p = t.data<T>();
  std::copy(p, p + t.numel(), dst);
}

/// batch_norm's forward; `sum(v, n)` adds n doubles up over the ranks that share the batch (sync_batch_norm) or
/// leaves them (batch_norm). Every rank calls it as often (in training, twice), whatever its own batch holds.
/// requires: X [N, C, ...] NCHW; Scale, Bias, Mean, Variance [C]. MeanOut may be the same tensor as Mean and
/// VarianceOut as Variance (in-place running statistics); Y may be X. MeanOut / VarianceOut are written only when
/// present, and under is_test only when they are not Mean / Variance themselves: a test program, run by many
/// evaluator threads at once, must not write the shared running statistics (not even with their own values).
template <class Sum>
void batch_norm_forward(KernelContext& c, const ops::BatchNorm::Attrs& a, Sum&& sum) {
  using ops::BatchNorm;
  using B = ops::BatchNorm;
  const kernels::BnPlan plan = kernels::bn_plan(c, a);
  const LoDTensor& xt = plan.x;
  const kernels::NcsDims dm = plan.dm;
  const float mom = a.momentum;
  const double eps = a.epsilon;
  const bool global = a.is_test || a.use_global_stats;
  const int64_t m = dm.n * dm.s;
  const bool write_mean = plan.write_mean, write_var = plan.write_var;
  c.dispatch_float([&](auto tag) {
    using T = typename decltype(tag)::type;
    double* run_mean = cpu_kernels::bn_scratch<0>(dm.c);
    double* run_var = cpu_kernels::bn_scratch<1>(dm.c);
    cpu_kernels::channel_values<T>(plan.mean, run_mean);
    cpu_kernels::channel_values<T>(plan.variance, run_var);
    double* mean_v = run_mean;  // global: the running statistics
    double* var_v = run_var;
    const T* px = xt.data<T>();
    if (!global) {
      mean_v = cpu_kernels::bn_scratch<2>(dm.c);
      var_v = cpu_kernels::bn_scratch<3>(dm.c);
      std::fill(mean_v, mean_v + dm.c, 0.0);
      std::fill(var_v, var_v + dm.c, 0.0);
    }
    double count = double(m);  // over every rank that shares the batch
    if (!global) {
      // Two passes, each summed over the ranks: the mean first, then the squared deviations from it (no
      // cancellation for large means).
      double* sums = cpu_kernels::bn_scratch<5>(dm.c + 1);
      parallel_for(0, dm.c, 1, [&](int64_t lo, int64_t hi) {
        for (int64_t ch = lo; ch < hi; ++ch) {
          double s = 0;
          for (int64_t i = 0; i < dm.n; ++i) {
            const T* p = px + (i * dm.c + ch) * dm.s;
            s += cpu_kernels::lane_sum(p, p, dm.s, [](double v, double) { return v; });
          }
          sums[ch] = s;
        }
      });
      sums[dm.c] = count;
      sum(sums, dm.c + 1);
      count = sums[dm.c];
      if (count > 0) {
        for (int64_t ch = 0; ch < dm.c; ++ch) mean_v[ch] = sums[ch] / count;
        parallel_for(0, dm.c, 1, [&](int64_t lo, int64_t hi) {
          for (int64_t ch = lo; ch < hi; ++ch) {
            const double mu = mean_v[ch];
            double q = 0;
            for (int64_t i = 0; i < dm.n; ++i) {
              const T* p = px + (i * dm.c + ch) * dm.s;
              q += cpu_kernels::lane_sum(p, p, dm.s, [mu](double v, double) { return (v - mu) * (v - mu); });
            }
            var_v[ch] = q;
          }
        });
      }
      sum(var_v, dm.c);
      if (count > 0)
        for (int64_t ch = 0; ch < dm.c; ++ch) var_v[ch] /= count;
    }
    // NOTE: an empty training batch has no statistics: it normalizes nothing and leaves the running ones alone.
    T* ka = cpu_kernels::thread_scratch<T, 15>(size_t(dm.c));
    T* kb = cpu_kernels::thread_scratch<T, 16>(size_t(dm.c));
    double* istd = cpu_kernels::bn_scratch<4>(dm.c);
    const T *ps = plan.scale.data<T>(), *pb = plan.bias.data<T>();
    for (int64_t ch = 0; ch < dm.c; ++ch) {
      istd[ch] = 1.0 / std::sqrt(var_v[ch] + eps);
      ka[ch] = T(double(ps[ch]) * istd[ch]);
      kb[ch] = T(double(pb[ch]) - mean_v[ch] * double(ps[ch]) * istd[ch]);
    }
    LoDTensor& yt = c.out(B::y);
    if (&yt != &xt) yt.resize(xt.shape(), xt.dtype());
    T* py = yt.data<T>();
    parallel_for(0, dm.n * dm.c, std::max<int64_t>(1, (int64_t(1) << 14) / std::max<int64_t>(dm.s, 1)), [&](int64_t lo, int64_t hi) {
      for (int64_t pl = lo; pl < hi; ++pl) {
        const T ac = ka[pl % dm.c], bc = kb[pl % dm.c];
        const T* xp = px + pl * dm.s;
        T* yp = py + pl * dm.s;
        for (int64_t j = 0; j < dm.s; ++j) yp[j] = xp[j] * ac + bc;
      }
    });
    if (&yt != &xt) yt.set_lod(xt.lod());
    const bool update = !global && count > 0;
    auto write = [&](Slot slot, auto&& value) {
      LoDTensor& o = c.out(slot);
      o.resize(Shape{dm.c}, xt.dtype());
      T* p = o.data<T>();
      for (int64_t ch = 0; ch < dm.c; ++ch) p[ch] = T(value(ch));
    };
    if (write_mean) write(B::mean_out, [&](int64_t ch) { return update ? run_mean[ch] * mom + mean_v[ch] * (1.0 - mom) : run_mean[ch]; });
    if (write_var) write(B::variance_out, [&](int64_t ch) { return update ? run_var[ch] * mom + var_v[ch] * (1.0 - mom) : run_var[ch]; });
    if (c.has_out(B::saved_mean)) write(B::saved_mean, [&](int64_t ch) { return mean_v[ch]; });
    if (c.has_out(B::saved_variance)) write(B::saved_variance, [&](int64_t ch) { return istd[ch]; });
  });
}

/// batch_norm_grad; `sum` as in batch_norm_forward, called once in training: X@GRAD takes sum(dy) and
/// sum(dy * xhat) over every rank, Scale@GRAD and Bias@GRAD this rank's own.
template <bool Sync, class Sum>
void batch_norm_backward(KernelContext& c, const ops::BatchNorm::Attrs& a, Sum&& sum) {
  using ops::BatchNorm;
  using B = ops::BatchNorm;
  const kernels::BnGradPlan plan = kernels::bn_grad_plan(c);
  const LoDTensor& xt = plan.x;
  const kernels::NcsDims dm = kernels::ncs(xt.shape());
  const bool global = a.is_test || a.use_global_stats;
  const int64_t m = dm.n * dm.s;
  c.dispatch_float([&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *px = xt.data<T>(), *pdy = plan.y_grad.data<T>(), *ps = plan.scale.data<T>(), *pm = plan.saved_mean.data<T>(),
            *pi = plan.saved_variance.data<T>();
    T* pdx = nullptr;
    if (c.has_out(B::x_grad)) {
      LoDTensor& dx = c.out(B::x_grad);
      dx.resize(xt.shape(), xt.dtype());
      dx.set_lod(xt.lod());
      pdx = dx.data<T>();
    }
    double* sum_dy = cpu_kernels::bn_scratch<0>(dm.c);  // every channel is written below
    double* sum_dy_xhat = cpu_kernels::bn_scratch<1>(dm.c);
    // X@GRAD of channel ch from the sums of dy and dy * xhat over `count` values.
    auto dx_of = [&](int64_t ch, double sd, double sdx, double count) {
      if (!pdx) return;
      const double mu = double(pm[ch]), is = double(pi[ch]);
      const double k = double(ps[ch]) * is;
      const double md = count > 0 ? sd / count : 0, mdx = count > 0 ? sdx / count : 0;
      // dx = k (dy - md - (x - mu) is mdx) = kg dy + kx (x - mu) + k0 with the factors folded in double and applied
      // in T: vector lanes of T instead of a double conversion of every operand. x - mu stays a difference, so
      // a large mean does not cancel.
      const T kg = T(k), kx = T(-k * is * mdx), k0 = T(-k * md), mt = T(mu);
      for (int64_t i = 0; i < dm.n; ++i) {
        const T *xp = px + (i * dm.c + ch) * dm.s, *gp = pdy + (i * dm.c + ch) * dm.s;
        T* dp = pdx + (i * dm.c + ch) * dm.s;
        if (global)  // x does not enter: a non-finite x must not reach dx through 0 * x
          for (int64_t j = 0; j < dm.s; ++j) dp[j] = kg * gp[j];
        else
          for (int64_t j = 0; j < dm.s; ++j) dp[j] = kg * gp[j] + (kx * (xp[j] - mt) + k0);
      }
    };
    parallel_for(0, dm.c, 1, [&](int64_t lo, int64_t hi) {
      for (int64_t ch = lo; ch < hi; ++ch) {
        const double mu = double(pm[ch]), is = double(pi[ch]);
        double sd = 0, sdx = 0;
        for (int64_t i = 0; i < dm.n; ++i) {
          const T *xp = px + (i * dm.c + ch) * dm.s, *gp = pdy + (i * dm.c + ch) * dm.s;
          sd += cpu_kernels::lane_sum(gp, gp, dm.s, [](double g, double) { return g; });
          sdx += cpu_kernels::lane_sum(gp, xp, dm.s, [mu, is](double g, double v) { return g * (v - mu) * is; });
        }
        sum_dy[ch] = sd;
        sum_dy_xhat[ch] = sdx;
        if (!Sync) dx_of(ch, sd, sdx, double(m));
      }
    });
    if constexpr (Sync) {
      if (!global) {  // the global batch's sums for X@GRAD; the parameters' own stay this rank's
        double* all = cpu_kernels::bn_scratch<6>(2 * dm.c + 1);
        std::copy(sum_dy, sum_dy + dm.c, all);
        std::copy(sum_dy_xhat, sum_dy_xhat + dm.c, all + dm.c);
        all[2 * dm.c] = double(m);
        sum(all, 2 * dm.c + 1);
        parallel_for(0, dm.c, 1, [&](int64_t lo, int64_t hi) {
          for (int64_t ch = lo; ch < hi; ++ch) dx_of(ch, all[ch], all[dm.c + ch], all[2 * dm.c]);
        });
      } else {
        parallel_for(0, dm.c, 1, [&](int64_t lo, int64_t hi) {
          for (int64_t ch = lo; ch < hi; ++ch) dx_of(ch, sum_dy[ch], sum_dy_xhat[ch], double(m));
        });
      }
    }
    if (c.has_out(B::scale_grad)) {
      LoDTensor& d = c.out(B::scale_grad);
      d.resize(Shape{dm.c}, xt.dtype());
      for (int64_t ch = 0; ch < dm.c; ++ch) d.data<T>()[ch] = T(sum_dy_xhat[ch]);
    }
    if (c.has_out(B::bias_grad)) {
      LoDTensor& d = c.out(B::bias_grad);
      d.resize(Shape{dm.c}, xt.dtype());
      for (int64_t ch = 0; ch < dm.c; ++ch) d.data<T>()[ch] = T(sum_dy[ch]);
    }
  });
}

}  // namespace oar::cpu_kernels

namespace oar::ops {

inline void BatchNorm::eval_cpu(KernelContext& c, const Attrs& a) { cpu_kernels::batch_norm_forward(c, a, [](double*, int64_t) {}); }

inline void BatchNorm::eval_grad_cpu(KernelContext& c, const Attrs& a) { cpu_kernels::batch_norm_backward<false>(c, a, [](double*, int64_t) {}); }

namespace bn_detail {
/// Sums doubles over the ranks of `a.ring_id`, or an oar::Error naming the op when the ring has no communicator.
inline auto ring_sum(const KernelContext& c, const SyncBatchNorm::Attrs& a) {
  std::shared_ptr<Communicator> comm = find_communicator(a.ring_id);
  c.check(comm != nullptr, "ring {} has no communicator: make an oar::dist::Context (dist/context.hpp) before running a distributed program", a.ring_id);
  return [comm, &c](double* v, int64_t n) { comm->run([&] { comm->all_reduce_sum(v, n, DType::f64, fmt::format("{} statistics of {} channels", c.op().type(), n)); }); };
}
}  // namespace bn_detail

inline void SyncBatchNorm::eval_cpu(KernelContext& c, const Attrs& a) { cpu_kernels::batch_norm_forward(c, a, bn_detail::ring_sum(c, a)); }

inline void SyncBatchNorm::eval_grad_cpu(KernelContext& c, const Attrs& a) { cpu_kernels::batch_norm_backward<true>(c, a, bn_detail::ring_sum(c, a)); }

}  // namespace oar::ops
