// kernels/cpu/gather.hpp: gather and gather_grad (a scatter-add) on the CPU.
// Hand-written: faster than xt::view with xt::keep, which walks views element by element (oar_bench nd_gather).
#pragma once
#include <cstring>
#include <span>

#include "kernels/common/gather.hpp"
#include "oar/ops/gather.hpp"
#include "oar/device/kernel_context.hpp"
#include "oar/device/thread_pool.hpp"

namespace oar::cpu_kernels {

using kernels::checked_indices;

}  // namespace oar::cpu_kernels

namespace oar::ops {

inline void Gather::eval_cpu(KernelContext& c, const NoAttrs&) {
  const LoDTensor& xt = c.in(x);
  const LoDTensor& it = c.in(index);
  c.check(xt.rank() >= 1, "X must have rank >= 1, got {}", xt.shape());
  auto idx = cpu_kernels::checked_indices(c, it, xt.dim(0), index, [&] { return fmt::format("the rows of X {}", xt.shape().str()); });
  Shape os = xt.shape();
  os[0] = int64_t(idx.size());
  LoDTensor& ot = c.out(out);
  c.check(&ot != &xt, "gather cannot run in place");
  ot.resize(os, xt.dtype());
  ot.clear_lod();
  size_t row = size_t(xt.shape().numel(1, xt.rank())) * size_of(xt.dtype());
  const char* src = static_cast<const char*>(xt.raw());
  char* dst = static_cast<char*>(ot.raw());
  if (row == 0) return;
  parallel_for(0, int64_t(idx.size()), std::max<int64_t>(1, int64_t((size_t(1) << 16) / row)), [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) std::memcpy(dst + size_t(i) * row, src + size_t(idx[size_t(i)]) * row, row);
  });
}

/// X@GRAD = zeros; X@GRAD[index[i]] += Out@GRAD[i] (repeated indices add up).
inline void Gather::eval_grad_cpu(KernelContext& c, const NoAttrs&) {
  if (!c.has_out(x_grad)) return;
  const LoDTensor& xt = c.in(x);
  const LoDTensor& dout = c.in(out_grad);
  auto idx = cpu_kernels::checked_indices(c, c.in(index), xt.dim(0), index, [&] { return fmt::format("the rows of X {}", xt.shape().str()); });
  LoDTensor& dx = c.out(x_grad);
  int64_t d = xt.shape().numel(1, xt.rank());
  c.check(dout.numel() == int64_t(idx.size()) * d, "Out@GRAD {} does not match {} rows of X {}", dout.shape(), idx.size(), xt.shape());
  c.dispatch_float([&](auto tag) {
    using T = typename decltype(tag)::type;
    dx.resize(xt.shape(), xt.dtype());
    T* g = dx.data<T>();
    const T* go = dout.data<T>();
    std::fill_n(g, dx.numel(), T(0));
    // Parallel over columns: rows may repeat, columns never collide.
    parallel_for(0, d, std::max<int64_t>(1, int64_t(1 << 14) / std::max<int64_t>(1, int64_t(idx.size()))), [&](int64_t lo, int64_t hi) {
      for (size_t i = 0; i < idx.size(); ++i) {
        T* gr = g + idx[i] * d;
        const T* s = go + int64_t(i) * d;
        for (int64_t j = lo; j < hi; ++j) gr[j] += s[j];
      }
    });
  });
  dx.set_lod(xt.lod());
}

}  // namespace oar::ops
