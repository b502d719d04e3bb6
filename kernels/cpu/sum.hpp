// kernels/cpu/sum.hpp: sum and sum_grad on the CPU.
#pragma once
#include "oar/ops/sum.hpp"
#include "oar/runtime/kernel_context.hpp"
#include "oar/runtime/thread_pool.hpp"

namespace oar::ops {

/// requires: every X[i] has X[0]'s shape and dtype. Out may be one of the X (in place): that input is the start
/// and the others are added to it.
inline void Sum::eval_cpu(KernelContext& c) {
  std::vector<const LoDTensor*> xs = c.ins("X");
  LoDTensor& out = c.out("Out");
  const LoDTensor& x0 = *xs[0];
  for (size_t i = 1; i < xs.size(); ++i) {
    c.check(xs[i]->shape() == x0.shape(), "X[{}] {} does not have the shape of X[0] {}", i, xs[i]->shape(), x0.shape());
    c.check(xs[i]->dtype() == x0.dtype(), "X[{}] is {} but X[0] is {}", i, name(xs[i]->dtype()), name(x0.dtype()));
  }
  LoD lod = x0.lod();
  // The input Out aliases starts the sum; otherwise the first two inputs do.
  size_t first = xs.size();
  for (size_t i = 0; i < xs.size(); ++i)
    if (xs[i] == &out) first = i;
  c.dispatch(type_list<float, double, int32_t, int64_t>{}, x0.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const int64_t n = x0.numel();
    std::vector<const T*> rest;
    const T* a = nullptr;
    if (first == xs.size()) {
      a = x0.data<T>();
      for (size_t i = 1; i < xs.size(); ++i) rest.push_back(xs[i]->data<T>());
      out.resize(x0.shape(), x0.dtype());
    } else {
      for (size_t i = 0; i < xs.size(); ++i)
        if (i != first) rest.push_back(xs[i]->data<T>());
    }
    T* o = out.data<T>();
    parallel_for(0, n, 1 << 14, [&](int64_t lo, int64_t hi) {
      if (a) std::copy(a + lo, a + hi, o + lo);
      for (const T* r : rest)
        for (int64_t i = lo; i < hi; ++i) o[i] += r[i];
    });
  });
  out.set_lod(std::move(lod));
}

/// X@GRAD[i] = Out@GRAD for every wanted i.
inline void Sum::eval_grad_cpu(KernelContext& c) {
  const LoDTensor& dout = c.in("Out@GRAD");
  for (size_t i = 0; i < c.num_out("X@GRAD"); ++i) {
    if (!c.has_out("X@GRAD", i)) continue;
    LoDTensor& dx = c.out("X@GRAD", i);
    dx.copy_from(dout);
    if (i < c.num_in("X") && c.has_in("X", i)) dx.set_lod(c.in("X", i).lod());
  }
}

}  // namespace oar::ops
