// kernels/cpu/softmax_with_cross_entropy.hpp: softmax_with_cross_entropy and its grad on the CPU: one pass
// per row (max, exp-sum, softmax, loss from log-sum-exp), rows split over the thread pool.
#pragma once
#include "kernels/cpu/cross_entropy.hpp"
#include "kernels/cpu/softmax.hpp"
#include "oar/ops/softmax_with_cross_entropy.hpp"

namespace oar::ops {

inline void SoftmaxWithCrossEntropy::eval_cpu(KernelContext& c) {
  const LoDTensor& x = c.in("Logits");
  const LoDTensor& label = c.in("Label");
  LoDTensor& sm = c.out("Softmax");
  LoDTensor& loss = c.out("Loss");
  const bool soft = c.attr<bool>("soft_label");
  const int64_t ignore = c.attr<int32_t>("ignore_index");
  auto [n, d] = cpu_kernels::rows_cols(x.shape());
  Shape ls = x.shape();
  ls[ls.rank() - 1] = 1;
  std::vector<int64_t> hard;
  if (soft) c.check(label.shape() == x.shape(), "soft_label needs Label {} shaped like Logits {}", label.shape(), x.shape());
  else hard = cpu_kernels::read_hard_labels(c, label, n, d, ignore);
  c.dispatch(type_list<float, double>{}, x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    sm.resize(x.shape(), x.dtype());
    loss.resize(ls, x.dtype());
    const T* px = x.data<T>();
    const T* pl = soft ? label.data<T>() : nullptr;
    T *ps = sm.data<T>(), *po = loss.data<T>();
    parallel_for(0, n, cpu_kernels::row_grain(d), [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) {
        const T* xr = px + i * d;
        T m;
        const T lse = cpu_kernels::softmax_line<false>(xr, ps + i * d, d, 1, &m);  // log(sum(exp(x - m)))
        if (soft) {
          const T* lr = pl + i * d;
          T s = 0;
          for (int64_t j = 0; j < d; ++j) s += lr[j] * (lse - (xr[j] - m));
          po[i] = s;
        } else {
          int64_t l = hard[size_t(i)];
          po[i] = l == ignore ? T(0) : lse - (xr[l] - m);
        }
      }
    });
  });
  sm.set_lod(x.lod());
  loss.set_lod(x.lod());
}

inline void SoftmaxWithCrossEntropy::eval_grad_cpu(KernelContext& c) {
  if (!c.has_out("Logits@GRAD")) return;
  const LoDTensor& sm = c.in("Softmax");
  const LoDTensor& label = c.in("Label");
  const LoDTensor& dl = c.in("Loss@GRAD");
  LoDTensor& dx = c.out("Logits@GRAD");
  const bool soft = c.attr<bool>("soft_label");
  const int64_t ignore = c.attr<int32_t>("ignore_index");
  auto [n, d] = cpu_kernels::rows_cols(sm.shape());
  c.check(dl.numel() == n, "Loss@GRAD {} must hold one value per row of Softmax {}", dl.shape(), sm.shape());
  std::vector<int64_t> hard;
  if (!soft) hard = cpu_kernels::read_hard_labels(c, label, n, d, ignore);
  c.dispatch(type_list<float, double>{}, sm.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    dx.resize(sm.shape(), sm.dtype());
    const T *ps = sm.data<T>(), *pdl = dl.data<T>();
    const T* pl = soft ? label.data<T>() : nullptr;
    T* pdx = dx.data<T>();
    parallel_for(0, n, cpu_kernels::row_grain(d), [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) {
        const T* sr = ps + i * d;
        T* r = pdx + i * d;
        const T g = pdl[i];
        if (soft) {  // d/dx_j of -sum_k l_k log s_k = s_j * sum(l) - l_j
          const T* lr = pl + i * d;
          T sl = 0;
          for (int64_t j = 0; j < d; ++j) sl += lr[j];
          for (int64_t j = 0; j < d; ++j) r[j] = (sr[j] * sl - lr[j]) * g;
        } else {
          int64_t l = hard[size_t(i)];
          if (l == ignore) {
            for (int64_t j = 0; j < d; ++j) r[j] = 0;
          } else {
            for (int64_t j = 0; j < d; ++j) r[j] = sr[j] * g;
            r[l] -= g;
          }
        }
      }
    });
  });
  dx.set_lod(sm.lod());
}

}  // namespace oar::ops
