// kernels/cpu/sequence_softmax.hpp: sequence_softmax and its grad on the CPU: the softmax row helper of
// kernels/cpu/softmax.hpp run over each sequence's slice of the column.
#pragma once
#include "kernels/cpu/sequence_pool.hpp"
#include "kernels/cpu/softmax.hpp"
#include "oar/ops/sequence_softmax.hpp"

namespace oar::ops {

inline void SequenceSoftmax::eval_cpu(KernelContext& c, const NoAttrs&) {
  const LoDTensor& xt = c.in(x);
  const std::span<const size_t> seq = cpu_kernels::seq_last_level(c, x, xt);
  c.check(xt.numel() == xt.dim(0), "X must be [N, 1] or [N] (one score per row), got {}", xt.shape());
  const int64_t S = int64_t(seq.size()) - 1;
  LoDTensor& ot = c.out(out);
  c.dispatch(type_list<float, double>{}, xt.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    ot.resize(xt.shape(), xt.dtype());
    const T* px = xt.data<T>();
    T* po = ot.data<T>();
    parallel_for(0, S, cpu_kernels::seq_grain(xt.numel(), S), [&](int64_t lo, int64_t hi) {
      for (int64_t s = lo; s < hi; ++s) {
        const size_t b = seq[size_t(s)], e = seq[size_t(s) + 1];
        if (e > b) cpu_kernels::softmax_line<false>(px + b, po + b, int64_t(e - b), 1);
      }
    });
  });
  ot.set_lod(xt.lod());
}

/// X@GRAD = out * (dout - sum over the sequence of dout * out), sequences from Out's LoD.
inline void SequenceSoftmax::eval_grad_cpu(KernelContext& c, const NoAttrs&) {
  if (!c.has_out(x_grad)) return;
  const LoDTensor& yt = c.in(out);
  const LoDTensor& dy = c.in(out_grad);
  const std::span<const size_t> seq = cpu_kernels::seq_last_level(c, out, yt);
  c.check(dy.numel() == yt.numel(), "Out@GRAD {} does not match Out {}", dy.shape(), yt.shape());
  const int64_t S = int64_t(seq.size()) - 1;
  LoDTensor& dx = c.out(x_grad);
  c.dispatch(type_list<float, double>{}, yt.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    dx.resize(yt.shape(), yt.dtype());
    const T *py = yt.data<T>(), *pg = dy.data<T>();
    T* pd = dx.data<T>();
    parallel_for(0, S, cpu_kernels::seq_grain(yt.numel(), S), [&](int64_t lo, int64_t hi) {
      for (int64_t s = lo; s < hi; ++s) {
        const size_t b = seq[size_t(s)], e = seq[size_t(s) + 1];
        T acc = 0;
        for (size_t r = b; r < e; ++r) acc += pg[r] * py[r];
        for (size_t r = b; r < e; ++r) pd[r] = py[r] * (pg[r] - acc);
      }
    });
  });
  dx.set_lod(yt.lod());
}

}  // namespace oar::ops
