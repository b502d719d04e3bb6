// kernels/cpu/sequence_expand.hpp: sequence_expand and its grad on the CPU. Both follow one plan: where in
// Out each unit of X (a sequence, or a row when X has no LoD) starts, from Y's LoD at ref_level.
#pragma once
#include "kernels/common/sequence_expand.hpp"
#include "kernels/cpu/sequence_pool.hpp"
#include "oar/ops/sequence_expand.hpp"

namespace oar::ops {

/// requires: Out is not X (rows are copied from X while Out is written).
inline void SequenceExpand::eval_cpu(KernelContext& c, const Attrs& a) {
  const LoDTensor& xt = c.in(x);
  const kernels::ExpandForwardPlan plan = kernels::expand_forward_plan(c, a);
  const kernels::ExpandPlan& p = plan.p;
  LoDTensor& ot = *plan.out;
  const size_t row = size_t(kernels::row_size(xt)) * size_of(xt.dtype());
  const char* px = static_cast<const char*>(xt.raw());
  char* po = static_cast<char*>(ot.raw());
  if (row > 0)
    parallel_for(0, p.units, cpu_kernels::seq_grain(ot.numel(), p.units), [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) {
        const size_t bytes = p.len(i) * row;
        for (size_t j = 0; j < p.n(i); ++j) std::memcpy(po + p.start[i] * row + j * bytes, px + p.begin(i) * row, bytes);
      }
    });
  ot.set_lod(*plan.lod);
}

/// X@GRAD unit i = the sum of Out@GRAD over unit i's copies (zeros when it has none).
inline void SequenceExpand::eval_grad_cpu(KernelContext& c, const Attrs& a) {
  if (!c.has_out(x_grad)) return;
  const LoDTensor& xt = c.in(x);
  const LoDTensor& dout = c.in(out_grad);
  const kernels::ExpandGradPlan plan = kernels::expand_grad_plan(c, a);
  const kernels::ExpandPlan& p = plan.p;
  const int64_t D = plan.D;
  LoDTensor& dx = *plan.x_grad;
  c.dispatch(type_list<float, double>{}, xt.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* pg = dout.data<T>();
    T* pd = dx.data<T>();
    parallel_for(0, p.units, cpu_kernels::seq_grain(dout.numel() + dx.numel(), p.units), [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) {
        const size_t elems = p.len(i) * size_t(D);
        T* d = pd + p.begin(i) * size_t(D);
        std::fill(d, d + elems, T(0));
        for (size_t j = 0; j < p.n(i); ++j) {
          const T* g = pg + p.start[i] * size_t(D) + j * elems;
          for (size_t k = 0; k < elems; ++k) d[k] += g[k];
        }
      }
    });
  });
  dx.set_lod(xt.lod());
}

}  // namespace oar::ops
