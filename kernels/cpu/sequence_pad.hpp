// kernels/cpu/sequence_pad.hpp: sequence_pad, sequence_unpad and their grads on the CPU: block copies per
// sequence, spread over the thread pool; padding filled from PadValue.
#pragma once
#include <algorithm>
#include <cstring>

#include "kernels/cpu/sequence_conv.hpp"  // seq_shape::last_level
#include "oar/ops/sequence_pad.hpp"

namespace oar::cpu_kernels::seq_shape {

/// The row where top-level sequence i of `lod` starts (Fluid's absolute offset: followed down every level).
inline size_t top_offset(const LoD& lod, size_t i) {
  size_t k = lod[0][i];
  for (size_t l = 1; l < lod.size(); ++l) k = lod[l][k];
  return k;
}

/// Sequences per parallel_for chunk when each moves `elems` elements: about 16K elements a chunk.
inline int64_t seq_grain(int64_t elems) { return std::max<int64_t>(1, (int64_t(1) << 14) / std::max<int64_t>(elems, 1)); }

/// The dtypes the copying kernels take.
using copy_types = type_list<float, double, int32_t, int64_t>;

}  // namespace oar::cpu_kernels::seq_shape

namespace oar::ops {

inline void SequencePad::eval_cpu(KernelContext& c, const Attrs& a) {
  namespace ss = cpu_kernels::seq_shape;
  const LoDTensor& xt = c.in(x);
  const LoDTensor& pv = c.in(pad_value);
  c.check(xt.rank() >= 2, "X must be [N, step...] with rank >= 2, got {}", xt.shape());
  ss::last_level(c, xt, x);
  const LoD& lod = xt.lod();
  const int64_t seqs = int64_t(lod[0].size()) - 1, step = xt.shape().numel(1, xt.rank());
  c.check(pv.dtype() == xt.dtype() && (pv.numel() == 1 || pv.numel() == step), "PadValue must be {} with 1 or {} (a step of X) elements, got {} {}",
          name(xt.dtype()), step, pv.shape(), name(pv.dtype()));
  int64_t longest = 0;
  for (int64_t s = 0; s < seqs; ++s) longest = std::max(longest, int64_t(ss::top_offset(lod, size_t(s + 1)) - ss::top_offset(lod, size_t(s))));
  const int64_t padded = a.padded_length == -1 ? longest : a.padded_length;
  c.check(padded >= longest, "padded_length = {} is shorter than the longest sequence ({} rows)", padded, longest);
  Shape os{seqs, padded};
  for (int i = 1; i < xt.rank(); ++i) os.push_back(xt.dim(i));
  LoDTensor& ot = c.out(out);
  LoDTensor& lt = c.out(length);
  lt.resize(Shape{seqs}, DType::i64);
  lt.clear_lod();
  int64_t* plen = lt.data<int64_t>();
  for (int64_t s = 0; s < seqs; ++s) plen[s] = int64_t(ss::top_offset(lod, size_t(s + 1)) - ss::top_offset(lod, size_t(s)));
  c.dispatch(ss::copy_types{}, xt.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    ot.resize(os, xt.dtype());
    const T *px = xt.data<T>(), *pp = pv.data<T>();
    T* po = ot.data<T>();
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
  ot.clear_lod();
}

inline void SequencePad::eval_grad_cpu(KernelContext& c, const Attrs&) {
  namespace ss = cpu_kernels::seq_shape;
  if (!c.has_out(x_grad)) return;
  const LoDTensor& xt = c.in(x);
  const LoDTensor& dout = c.in(out_grad);
  ss::last_level(c, xt, x);
  const LoD& lod = xt.lod();
  const int64_t seqs = int64_t(lod[0].size()) - 1, step = xt.shape().numel(1, xt.rank());
  c.check(dout.rank() == xt.rank() + 1 && dout.dim(0) == seqs && dout.shape().numel(2, dout.rank()) == step && dout.dtype() == xt.dtype(),
          "Out@GRAD {} {} must be [{}, padded_length, step...] for X {} {}", dout.shape(), name(dout.dtype()), seqs, xt.shape(), name(xt.dtype()));
  const int64_t padded = dout.dim(1);
  for (int64_t s = 0; s < seqs; ++s) {
    const int64_t len = int64_t(ss::top_offset(lod, size_t(s + 1)) - ss::top_offset(lod, size_t(s)));
    c.check(len <= padded, "sequence {} has {} rows but Out@GRAD holds {} steps", s, len, padded);
  }
  LoDTensor& dx = c.out(x_grad);
  c.dispatch(ss::copy_types{}, xt.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    dx.resize(xt.shape(), xt.dtype());
    const T* pg = dout.data<T>();
    T* px = dx.data<T>();
    parallel_for(0, seqs, ss::seq_grain(padded * step), [&](int64_t lo, int64_t hi) {
      for (int64_t s = lo; s < hi; ++s) {
        const int64_t b = int64_t(ss::top_offset(lod, size_t(s))), len = int64_t(ss::top_offset(lod, size_t(s + 1))) - b;
        std::copy_n(pg + s * padded * step, len * step, px + b * step);
      }
    });
  });
  dx.set_lod(xt.lod());
}

inline void SequenceUnpad::eval_cpu(KernelContext& c, const NoAttrs&) {
  namespace ss = cpu_kernels::seq_shape;
  const LoDTensor& xt = c.in(x);
  const LoDTensor& lt = c.in(length);
  c.check(xt.rank() >= 2, "X must be [S, L, step...] with rank >= 2, got {}", xt.shape());
  const int64_t seqs = xt.dim(0), steps = xt.dim(1), step = xt.shape().numel(2, xt.rank());
  c.check(lt.dtype() == DType::i64 && lt.numel() == seqs, "Length must be i64 with one entry per sequence ({}), got {} {}", seqs, lt.shape(),
          name(lt.dtype()));
  const int64_t* plen = lt.data<int64_t>();
  // NOTE: a per-thread LoD: resizing it to a size it had before allocates nothing.
  thread_local LoD lod;
  lod.resize(1);
  std::vector<size_t>& offs = lod[0];
  offs.resize(size_t(seqs) + 1);
  offs[0] = 0;
  for (int64_t s = 0; s < seqs; ++s) {
    c.check(plen[s] >= 0 && plen[s] <= steps, "Length[{}] = {} is outside [0, {}] (the steps of X)", s, plen[s], steps);
    offs[size_t(s) + 1] = offs[size_t(s)] + size_t(plen[s]);
  }
  Shape os{int64_t(offs.back())};
  for (int i = 2; i < xt.rank(); ++i) os.push_back(xt.dim(i));
  LoDTensor& ot = c.out(out);
  c.dispatch(ss::copy_types{}, xt.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    ot.resize(os, xt.dtype());
    const T* px = xt.data<T>();
    T* po = ot.data<T>();
    parallel_for(0, seqs, ss::seq_grain(steps * step), [&](int64_t lo, int64_t hi) {
      for (int64_t s = lo; s < hi; ++s) std::copy_n(px + s * steps * step, plen[s] * step, po + int64_t(offs[size_t(s)]) * step);
    });
  });
  ot.set_lod(lod);
}

inline void SequenceUnpad::eval_grad_cpu(KernelContext& c, const NoAttrs&) {
  namespace ss = cpu_kernels::seq_shape;
  if (!c.has_out(x_grad)) return;
  const LoDTensor& xt = c.in(x);
  const LoDTensor& lt = c.in(length);
  const LoDTensor& dout = c.in(out_grad);
  const int64_t seqs = xt.dim(0), steps = xt.dim(1), step = xt.shape().numel(2, xt.rank());
  c.check(lt.dtype() == DType::i64 && lt.numel() == seqs, "Length must be i64 with one entry per sequence ({}), got {} {}", seqs, lt.shape(),
          name(lt.dtype()));
  const int64_t* plen = lt.data<int64_t>();
  int64_t rows = 0;
  for (int64_t s = 0; s < seqs; ++s) {
    c.check(plen[s] >= 0 && plen[s] <= steps, "Length[{}] = {} is outside [0, {}] (the steps of X)", s, plen[s], steps);
    rows += plen[s];
  }
  c.check(dout.rank() >= 1 && dout.dim(0) == rows && dout.numel() == rows * step && dout.dtype() == xt.dtype(),
          "Out@GRAD {} {} must hold the {} unpadded rows of X {} {}", dout.shape(), name(dout.dtype()), rows, xt.shape(), name(xt.dtype()));
  LoDTensor& dx = c.out(x_grad);
  c.dispatch(ss::copy_types{}, xt.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    dx.resize(xt.shape(), xt.dtype());
    const T* pg = dout.data<T>();
    T* px = dx.data<T>();
    int64_t at = 0;
    for (int64_t s = 0; s < seqs; ++s) {
      T* dst = px + s * steps * step;
      std::copy_n(pg + at * step, plen[s] * step, dst);
      std::fill(dst + plen[s] * step, dst + steps * step, T(0));
      at += plen[s];
    }
  });
  dx.set_lod(xt.lod());
}

}  // namespace oar::ops
