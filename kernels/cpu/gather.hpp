// kernels/cpu/gather.hpp: gather and gather_grad (a scatter-add) on the CPU.
#pragma once
#include <cstring>

#include "oar/ops/gather.hpp"
#include "oar/runtime/kernel_context.hpp"
#include "oar/runtime/thread_pool.hpp"

namespace oar::cpu_kernels {

/// The indices of an i32/i64 tensor as int64, each checked against [0, rows); an oar::Error names the first
/// bad one as "<what>[i] = v".
inline std::vector<int64_t> checked_indices(const KernelContext& c, const Tensor& idx, int64_t rows, const char* what, const char* range_of) {
  std::vector<int64_t> out(static_cast<size_t>(idx.numel()));
  c.dispatch(type_list<int32_t, int64_t>{}, idx.dtype(), [&](auto tag) {
    using I = typename decltype(tag)::type;
    const I* p = idx.data<I>();
    for (size_t i = 0; i < out.size(); ++i) {
      int64_t v = int64_t(p[i]);
      c.check(v >= 0 && v < rows, "{}[{}] = {} is out of range [0, {}) ({})", what, i, v, rows, range_of);
      out[i] = v;
    }
  });
  return out;
}

}  // namespace oar::cpu_kernels

namespace oar::ops {

inline void Gather::eval_cpu(KernelContext& c) {
  const LoDTensor& x = c.in("X");
  const LoDTensor& index = c.in("Index");
  c.check(x.rank() >= 1, "X must have rank >= 1, got {}", x.shape());
  auto idx = cpu_kernels::checked_indices(c, index, x.dim(0), "Index", fmt::format("the rows of X {}", x.shape().str()).c_str());
  Shape os = x.shape();
  os[0] = int64_t(idx.size());
  LoDTensor& out = c.out("Out");
  c.check(&out != &x, "gather cannot run in place");
  out.resize(os, x.dtype());
  out.clear_lod();
  size_t row = size_t(x.shape().numel(1, x.rank())) * size_of(x.dtype());
  const char* src = static_cast<const char*>(x.raw());
  char* dst = static_cast<char*>(out.raw());
  if (row == 0) return;
  parallel_for(0, int64_t(idx.size()), std::max<int64_t>(1, int64_t((size_t(1) << 16) / row)), [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) std::memcpy(dst + size_t(i) * row, src + size_t(idx[size_t(i)]) * row, row);
  });
}

/// X@GRAD = zeros; X@GRAD[index[i]] += Out@GRAD[i] (repeated indices add up).
inline void Gather::eval_grad_cpu(KernelContext& c) {
  if (!c.has_out("X@GRAD")) return;
  const LoDTensor& x = c.in("X");
  const LoDTensor& dout = c.in("Out@GRAD");
  auto idx = cpu_kernels::checked_indices(c, c.in("Index"), x.dim(0), "Index", fmt::format("the rows of X {}", x.shape().str()).c_str());
  LoDTensor& dx = c.out("X@GRAD");
  int64_t d = x.shape().numel(1, x.rank());
  c.check(dout.numel() == int64_t(idx.size()) * d, "Out@GRAD {} does not match {} rows of X {}", dout.shape(), idx.size(), x.shape());
  c.dispatch_float([&](auto tag) {
    using T = typename decltype(tag)::type;
    dx.resize(x.shape(), x.dtype());
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
  dx.set_lod(x.lod());
}

}  // namespace oar::ops
