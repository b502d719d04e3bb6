// kernels/cpu/sum.hpp: sum and sum_grad on the CPU.
#pragma once
#include "kernels/cpu/tensor_array.hpp"
#include "oar/ops/sum.hpp"
#include "oar/device/kernel_context.hpp"
#include "oar/device/thread_pool.hpp"

namespace oar::cpu_kernels::array {

/// Out[j] = the sum of the non-empty entries j of the arrays X (empty when all are); Out is as long as the
/// longest X. Out may be one of the X: the sum is built aside and moved in. Serves both places (CUDA's Sum
/// kernel calls it for arrays): the entries are added where they live.
inline void sum(KernelContext& c) {
  using S = ops::Sum;
  const size_t k = c.num_in(S::x);
  std::vector<const TensorList*> xs(k);
  size_t len = 0;
  for (size_t i = 0; i < k; ++i) {
    xs[i] = &in(c, S::x, i);
    len = std::max(len, xs[i]->size());
  }
  TensorList res(len);
  for (size_t j = 0; j < len; ++j) {
    LoDTensor& o = res[j];
    size_t first = k;
    for (size_t i = 0; i < k; ++i) {
      if (j >= xs[i]->size() || is_empty((*xs[i])[j])) continue;
      const LoDTensor& e = (*xs[i])[j];
      if (first == k) {
        first = i;
        o.set_place(c.place());
        copy(o, e);
        continue;
      }
      c.check(e.shape() == o.shape() && e.dtype() == o.dtype(), "entry {} of X[{}] ('{}') is {} {}, but that of X[{}] ('{}') is {} {}", j, i, c.in_name(S::x, i),
              name(e.dtype()), e.shape(), first, c.in_name(S::x, first), name(o.dtype()), o.shape());
      c.dispatch(type_list<float, double, int32_t, int64_t>{}, e.dtype(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        T* po = o.data<T>();
        const T* pe = e.data<T>();
        if (c.place().is_cuda()) return oar::detail::cuda_accumulate(c.cuda(), e.dtype(), po, pe, e.numel());
        for (int64_t n = 0; n < e.numel(); ++n) po[n] += pe[n];
      });
    }
  }
  out(c, S::out) = std::move(res);
}

}  // namespace oar::cpu_kernels::array

namespace oar::cpu_kernels {

/// Checks every X[i] against X[0] (shape and dtype) and returns the index of the input that Out is (summing in
/// place), or the input count when Out is none of them. The CPU and CUDA kernels both start here.
inline size_t sum_inputs(const KernelContext& c, const LoDTensor& out) {
  using S = ops::Sum;
  const size_t k = c.num_in(S::x);
  const LoDTensor& x0 = c.in(S::x, 0);
  size_t first = k;
  for (size_t i = 0; i < k; ++i) {
    const LoDTensor& xi = c.in(S::x, i);
    c.check(xi.shape() == x0.shape(), "X[{}] {} does not have the shape of X[0] {}", i, xi.shape(), x0.shape());
    c.check(xi.dtype() == x0.dtype(), "X[{}] is {} but X[0] is {}", i, name(xi.dtype()), name(x0.dtype()));
    if (&xi == &out) first = i;
  }
  return first;
}

}  // namespace oar::cpu_kernels

namespace oar::ops {

/// requires: every X[i] has X[0]'s shape and dtype. Out may be one of the X (in place): that input is the start
/// and the others are added to it. Inputs are looked up by index, so a run allocates nothing.
inline void Sum::eval_cpu(KernelContext& c, const NoAttrs&) {
  if (const Value* v = c.in_value(Sum::x, 0); v && v->is_list()) [[unlikely]]
    return cpu_kernels::array::sum(c);
  const size_t k = c.num_in(Sum::x);
  const LoDTensor& x0 = c.in(Sum::x, 0);
  LoDTensor& o = c.out(Sum::out);
  size_t first = cpu_kernels::sum_inputs(c, o);  // the input Out aliases starts the sum; without one, X[0] is copied first
  const bool copy_first = first == k;
  if (copy_first) {
    o.resize(x0.shape(), x0.dtype());
    first = 0;
  }
  c.dispatch(type_list<float, double, int32_t, int64_t>{}, x0.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* po = o.data<T>();
    parallel_for(0, x0.numel(), 1 << 14, [&](int64_t lo, int64_t hi) {
      if (copy_first) std::copy(x0.data<T>() + lo, x0.data<T>() + hi, po + lo);
      for (size_t j = 0; j < k; ++j) {
        if (j == first) continue;
        const T* r = c.in(Sum::x, j).data<T>();
        for (int64_t i = lo; i < hi; ++i) po[i] += r[i];
      }
    });
  });
  if (&o != &x0) o.set_lod(x0.lod());
}

/// X@GRAD[i] = Out@GRAD for every wanted i.
inline void Sum::eval_grad_cpu(KernelContext& c, const NoAttrs&) {
  const LoDTensor& dout = c.in(Sum::out_grad);
  for (size_t i = 0; i < c.num_out(Sum::x_grad); ++i) {
    if (!c.has_out(Sum::x_grad, i)) continue;
    LoDTensor& dx = c.out(Sum::x_grad, i);
    dx.copy_from(dout);
    if (i < c.num_in(Sum::x) && c.has_in(Sum::x, i)) dx.set_lod(c.in(Sum::x, i).lod());
  }
}

}  // namespace oar::ops
