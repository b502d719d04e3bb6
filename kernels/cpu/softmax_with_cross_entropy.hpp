// kernels/cpu/softmax_with_cross_entropy.hpp: softmax_with_cross_entropy and its grad on the CPU: one pass
// per row (max, exp-sum, softmax, loss from log-sum-exp), rows split over the thread pool.
#pragma once
#include <type_traits>

#include "kernels/cpu/cross_entropy.hpp"
#include "kernels/cpu/softmax.hpp"
#include "oar/ops/softmax_with_cross_entropy.hpp"

namespace oar::ops {

inline void SoftmaxWithCrossEntropy::eval_cpu(KernelContext& c, const Attrs& a) {
  const LoDTensor& x = c.in(logits);
  const LoDTensor& lt = c.in(label);
  LoDTensor& sm = c.out(softmax);
  LoDTensor& loss_t = c.out(loss);
  const bool soft = a.soft_label;
  const int64_t ignore = a.ignore_index;
  const kernels::xent::Rows rc = kernels::xent::check_operands(c, x, "Logits", lt, soft);
  const int64_t n = rc.n, d = rc.d;
  const int64_t* hard = soft ? nullptr : cpu_kernels::read_hard_labels(c, lt, n, d, ignore);
  c.dispatch(type_list<float, double>{}, x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    sm.resize(x.shape(), x.dtype());
    loss_t.resize(detail::ce_loss_shape(x.shape()), x.dtype());
    const T* px = x.data<T>();
    const T* pl = soft ? lt.data<T>() : nullptr;
    T *ps = sm.data<T>(), *po = loss_t.data<T>();
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
          int64_t l = hard[i];
          po[i] = l == ignore ? T(0) : lse - (xr[l] - m);
        }
      }
    });
  });
  sm.set_lod(x.lod());
  loss_t.set_lod(x.lod());
}

inline void SoftmaxWithCrossEntropy::eval_grad_cpu(KernelContext& c, const Attrs& a) {
  const int64_t ignore = a.ignore_index;
  cpu_kernels::xent_grad(c, logits_grad, c.in(softmax), "Softmax", c.in(label), c.in(loss_grad), "Loss@GRAD", a.soft_label, ignore,
                         [&](auto* r, const auto* sr, const auto* lr, int64_t l, auto g, int64_t d) {
                           using T = std::remove_cvref_t<decltype(g)>;
                           if (lr) {  // d/dx_j of -sum_k l_k log s_k = s_j * sum(l) - l_j
                             T sl = 0;
                             for (int64_t j = 0; j < d; ++j) sl += lr[j];
                             for (int64_t j = 0; j < d; ++j) r[j] = (sr[j] * sl - lr[j]) * g;
                           } else if (l == ignore) {
                             for (int64_t j = 0; j < d; ++j) r[j] = 0;
                           } else {
                             for (int64_t j = 0; j < d; ++j) r[j] = sr[j] * g;
                             r[l] -= g;
                           }
                         });
}

}  // namespace oar::ops
