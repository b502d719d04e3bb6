// kernels/cpu/sequence_softmax.hpp: sequence_softmax and its grad on the CPU: the softmax row helper of
// kernels/cpu/softmax.hpp run over each sequence's slice of the column.
#pragma once
#include "kernels/common/sequence_softmax.hpp"
#include "kernels/cpu/sequence_pool.hpp"
#include "kernels/cpu/softmax.hpp"
#include "oar/ops/sequence_softmax.hpp"

namespace oar::ops {

inline void SequenceSoftmax::eval_cpu(KernelContext& c, const NoAttrs&) {
  const LoDTensor& xt = c.in(x);
  const kernels::SeqSoftmaxPlan plan = kernels::seq_softmax_plan(c);
  const std::span<const size_t> seq = plan.seq;
  LoDTensor& ot = *plan.out;
  c.dispatch(type_list<float, double>{}, xt.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* px = xt.data<T>();
    T* po = ot.data<T>();
    parallel_for(0, plan.S, cpu_kernels::seq_grain(xt.numel(), plan.S), [&](int64_t lo, int64_t hi) {
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
  const kernels::SeqSoftmaxPlan plan = kernels::seq_softmax_grad_plan(c);
  const std::span<const size_t> seq = plan.seq;
  LoDTensor& dx = *plan.out;
  c.dispatch(type_list<float, double>{}, yt.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *py = yt.data<T>(), *pg = dy.data<T>();
    T* pd = dx.data<T>();
    parallel_for(0, plan.S, cpu_kernels::seq_grain(yt.numel(), plan.S), [&](int64_t lo, int64_t hi) {
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
