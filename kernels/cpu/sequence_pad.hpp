// kernels/cpu/sequence_pad.hpp: sequence_pad, sequence_unpad and their grads on the CPU: block copies per
// sequence, spread over the thread pool; padding filled from PadValue.
#pragma once
#include <algorithm>
#include <cstring>

#include "kernels/common/sequence_pad.hpp"
#include "oar/device/thread_pool.hpp"
#include "oar/ops/sequence_pad.hpp"

namespace oar::cpu_kernels::seq_shape {

using namespace kernels::seq_shape;

/// Sequences per parallel_for chunk when each moves `elems` elements: about 16K elements a chunk.
inline int64_t seq_grain(int64_t elems) { return std::max<int64_t>(1, (int64_t(1) << 14) / std::max<int64_t>(elems, 1)); }

}  // namespace oar::cpu_kernels::seq_shape

namespace oar::ops {

inline void SequencePad::eval_cpu(KernelContext& c, const Attrs& a) {
  namespace ss = cpu_kernels::seq_shape;
  const ss::PadPlan p = ss::pad_plan(c, a);
  const LoDTensor& xt = c.in(x);
  const LoDTensor& pv = c.in(pad_value);
  const LoD& lod = *p.lod;
  const int64_t seqs = p.seqs, step = p.step, padded = p.padded;
  int64_t* plen = p.length->data<int64_t>();
  for (int64_t s = 0; s < seqs; ++s) plen[s] = p.len(s);
  c.dispatch(ss::copy_types{}, xt.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *px = xt.data<T>(), *pp = pv.data<T>();
    T* po = p.out->data<T>();
    const bool scalar = pv.numel() == 1;
    parallel_for(0, seqs, ss::seq_grain(padded * step), [&](int64_t lo, int64_t hi) {
      for (int64_t s = lo; s < hi; ++s) {
        const int64_t b = int64_t(ss::top_offset(lod, size_t(s))), len = plen[s];
        T* dst = po + s * padded * step;
        std::copy_n(px + b * step, len * step, dst);
        if (scalar) std::fill(dst + len * step, dst + padded * step, pp[0]);
        else
          for (int64_t t = len; t < padded; ++t) std::copy_n(pp, step, dst + t * step);
      }
    });
  });
}

inline void SequencePad::eval_grad_cpu(KernelContext& c, const Attrs&) {
  namespace ss = cpu_kernels::seq_shape;
  if (!c.has_out(x_grad)) return;
  const ss::PadGradPlan p = ss::pad_grad_plan(c);
  const LoDTensor& xt = c.in(x);
  const LoDTensor& dout = c.in(out_grad);
  const LoD& lod = *p.lod;
  const int64_t padded = p.padded, step = p.step;
  c.dispatch(ss::copy_types{}, xt.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* pg = dout.data<T>();
    T* px = p.x_grad->data<T>();
    parallel_for(0, p.seqs, ss::seq_grain(padded * step), [&](int64_t lo, int64_t hi) {
      for (int64_t s = lo; s < hi; ++s) {
        const int64_t b = int64_t(ss::top_offset(lod, size_t(s))), len = int64_t(ss::top_offset(lod, size_t(s + 1))) - b;
        std::copy_n(pg + s * padded * step, len * step, px + b * step);
      }
    });
  });
  p.x_grad->set_lod(xt.lod());
}

inline void SequenceUnpad::eval_cpu(KernelContext& c, const NoAttrs&) {
  namespace ss = cpu_kernels::seq_shape;
  const ss::UnpadPlan p = ss::unpad_plan(c);
  const LoDTensor& xt = c.in(x);
  const std::vector<size_t>& offs = (*p.lod)[0];
  const int64_t steps = p.steps, step = p.step;
  c.dispatch(ss::copy_types{}, xt.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* px = xt.data<T>();
    T* po = p.out->data<T>();
    parallel_for(0, p.seqs, ss::seq_grain(steps * step), [&](int64_t lo, int64_t hi) {
      for (int64_t s = lo; s < hi; ++s) std::copy_n(px + s * steps * step, p.len[s] * step, po + int64_t(offs[size_t(s)]) * step);
    });
  });
  p.out->set_lod(*p.lod);
}

inline void SequenceUnpad::eval_grad_cpu(KernelContext& c, const NoAttrs&) {
  namespace ss = cpu_kernels::seq_shape;
  if (!c.has_out(x_grad)) return;
  const ss::UnpadGradPlan p = ss::unpad_grad_plan(c);
  const LoDTensor& xt = c.in(x);
  const LoDTensor& dout = c.in(out_grad);
  const int64_t steps = p.steps, step = p.step;
  c.dispatch(ss::copy_types{}, xt.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* pg = dout.data<T>();
    T* px = p.x_grad->data<T>();
    int64_t at = 0;
    for (int64_t s = 0; s < p.seqs; ++s) {
      T* dst = px + s * steps * step;
      std::copy_n(pg + at * step, p.len[s] * step, dst);
      std::fill(dst + p.len[s] * step, dst + steps * step, T(0));
      at += p.len[s];
    }
  });
  p.x_grad->set_lod(xt.lod());
}

}  // namespace oar::ops
