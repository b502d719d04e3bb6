// kernels/cuda/sequence.hpp: eval_cuda of sequence_pool, sequence_softmax and sequence_expand and their
// gradients (device side: kernels/cuda/sequence.cu). Each checks what its CPU kernel checks, with the CPU's
// functions (seq_last_level, expand_plan) and messages, and sets the outputs' LoD as the CPU does. The LoD lives
// on the host: the offsets (or the row plan) a kernel needs are uploaded per call, freed in stream order.
#pragma once
#include <vector>

#include "kernels/cpu/sequence_expand.hpp"  // cpu_kernels::expand_plan
#include "kernels/cpu/sequence_pool.hpp"    // cpu_kernels::seq_last_level, row_size, seq_upper_levels
#include "kernels/cpu/sequence_softmax.hpp"
#include "kernels/cuda/host.hpp"

namespace oar::cuda_kernels {

/// The offsets `seq` as int64 on the kernel's device.
inline Tensor device_offsets(const KernelContext& c, std::span<const size_t> seq) {
  std::vector<int64_t> v(seq.begin(), seq.end());
  return Tensor::from<int64_t>(v, Shape{int64_t(v.size())}).to(c.place());
}

}  // namespace oar::cuda_kernels

namespace oar::ops {

inline void SequencePool::eval_cuda(KernelContext& c, const Attrs& a) {
  const LoDTensor& xt = c.in(x);
  const cpu_kernels::PoolPlan plan = cpu_kernels::pool_plan(c, a);
  const std::span<const size_t> seq = plan.seq;
  const int64_t S = plan.S, D = plan.D;
  LoDTensor& ot = *plan.out;
  const PoolType pt = a.pooltype;
  c.dispatch(type_list<float, double>{}, xt.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* px = xt.data<T>();
    T* po = ot.data<T>();
    int32_t* pi = plan.max_index;
    if (S * D == 0) return;
    const Tensor off = cuda_kernels::device_offsets(c, seq);
    cuda_kernels::check(c, cuda_kernels::sequence_pool(cuda_kernels::SeqPool(int(pt)), cuda_kernels::elem(c, xt.dtype()), px, off.data<int64_t>(), po, pi, S,
                                                       D, cuda_kernels::stream(c)));
  });
  ot.set_lod(cpu_kernels::seq_upper_levels(xt.lod()));
}

/// MAX: MaxIndex comes to the host to be checked as the CPU checks it (each index inside its sequence), after a
/// stream sync (it is a kernel's output); the gradient is then written on the device from the device's copy.
inline void SequencePool::eval_grad_cuda(KernelContext& c, const Attrs& a) {
  if (!c.has_out(x_grad)) return;
  const LoDTensor& xt = c.in(x);
  const LoDTensor& dout = c.in(out_grad);
  const cpu_kernels::PoolGradPlan plan = cpu_kernels::pool_grad_plan(c, a);
  const std::span<const size_t> seq = plan.seq;
  const int64_t S = plan.S, D = plan.D;
  const PoolType pt = a.pooltype;
  const int32_t* pi = plan.max_index ? plan.max_index->data<int32_t>() : nullptr;
  if (pi && S * D > 0) {
    c.device().synchronize();
    cpu_kernels::check_max_index(c, plan, plan.max_index->to(cpu()).data<int32_t>());
  }
  LoDTensor& dx = *plan.x_grad;
  c.dispatch(type_list<float, double>{}, xt.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* pg = dout.data<T>();
    T* pd = dx.data<T>();
    if (xt.numel() == 0) return;
    const Tensor off = cuda_kernels::device_offsets(c, seq);
    cuda_kernels::check(c, cuda_kernels::sequence_pool_grad(cuda_kernels::SeqPool(int(pt)), cuda_kernels::elem(c, xt.dtype()), pg, pi, off.data<int64_t>(), pd,
                                                            xt.dim(0), S, D, cuda_kernels::stream(c)));
  });
  dx.set_lod(xt.lod());
}

inline void SequenceSoftmax::eval_cuda(KernelContext& c, const NoAttrs&) {
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
    if (xt.numel() == 0) return;
    const Tensor off = cuda_kernels::device_offsets(c, seq);
    cuda_kernels::check(c, cuda_kernels::sequence_softmax(cuda_kernels::elem(c, xt.dtype()), px, off.data<int64_t>(), po, S, cuda_kernels::stream(c)));
  });
  ot.set_lod(xt.lod());
}

inline void SequenceSoftmax::eval_grad_cuda(KernelContext& c, const NoAttrs&) {
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
    if (yt.numel() == 0) return;
    const Tensor off = cuda_kernels::device_offsets(c, seq);
    cuda_kernels::check(c, cuda_kernels::sequence_softmax_grad(cuda_kernels::elem(c, yt.dtype()), py, pg, off.data<int64_t>(), pd, S, cuda_kernels::stream(c)));
  });
  dx.set_lod(yt.lod());
}

/// Out row o copies X row src[o] (the plan's rows, made on the host and uploaded): any dtype of 1, 2, 4 or 8
/// bytes, as the CPU copies bytes. requires: Out is not X.
inline void SequenceExpand::eval_cuda(KernelContext& c, const Attrs& a) {
  const LoDTensor& xt = c.in(x);
  const cpu_kernels::ExpandPlan p = cpu_kernels::expand_plan(c, xt, c.in(y), a.ref_level);
  LoDTensor& ot = c.out(out);
  c.check(&ot != &xt, "Out cannot be X");
  LoD& lod = cpu_kernels::seq_lod_scratch(1);
  if (p.xu) {  // one sequence per copy
    lod[0].assign(1, 0);
    for (int64_t i = 0; i < p.units; ++i)
      for (size_t j = 0; j < p.n(i); ++j) lod[0].push_back(lod[0].back() + p.len(i));
  } else {  // the copies of row i are sequence i
    lod[0].assign(p.r.begin(), p.r.end());
  }
  const int64_t rows = int64_t(p.start[p.units]), D = cpu_kernels::row_size(xt);
  Shape os = xt.shape();
  os[0] = rows;
  ot.resize(os, xt.dtype());
  if (rows * D > 0) {
    std::vector<int64_t> src(static_cast<size_t>(rows));
    for (int64_t i = 0; i < p.units; ++i)
      for (size_t j = 0; j < p.n(i); ++j)
        for (size_t k = 0; k < p.len(i); ++k) src[p.start[i] + j * p.len(i) + k] = int64_t(p.begin(i) + k);
    const Tensor dsrc = Tensor::from<int64_t>(src, Shape{rows}).to(c.place());
    cuda_kernels::check(c, cuda_kernels::copy_rows(int(size_of(xt.dtype())), xt.raw(), dsrc.data<int64_t>(), ot.raw(), nullptr, rows, D, nullptr, 0,
                                                   cuda_kernels::stream(c)));
  }
  ot.set_lod(lod);
}

/// X@GRAD row r = the sum of Out@GRAD over the copies of r, in the CPU's order (a plan per X row: the first copy's
/// row, the copies, the stride between them; made on the host and uploaded).
inline void SequenceExpand::eval_grad_cuda(KernelContext& c, const Attrs& a) {
  if (!c.has_out(x_grad)) return;
  const LoDTensor& xt = c.in(x);
  const LoDTensor& dout = c.in(out_grad);
  const cpu_kernels::ExpandPlan p = cpu_kernels::expand_plan(c, xt, c.in(y), a.ref_level);
  const int64_t D = cpu_kernels::row_size(xt);
  c.check(dout.rank() >= 1 && dout.dim(0) == int64_t(p.start[p.units]) && dout.numel() == dout.dim(0) * D, "Out@GRAD {} does not fit Out's {} rows of X {}",
          dout.shape(), p.start[p.units], xt.shape());
  LoDTensor& dx = c.out(x_grad);
  c.dispatch(type_list<float, double>{}, xt.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    dx.resize(xt.shape(), xt.dtype());
    const T* pg = dout.data<T>();
    T* pd = dx.data<T>();
    const int64_t M = xt.dim(0);
    if (M * D == 0) return;
    std::vector<int64_t> plan(size_t(3 * M), 0);
    for (int64_t i = 0; i < p.units; ++i)
      for (size_t k = 0; k < p.len(i); ++k) {
        const size_t r = p.begin(i) + k;
        plan[3 * r] = int64_t(p.start[i] + k);
        plan[3 * r + 1] = int64_t(p.n(i));
        plan[3 * r + 2] = int64_t(p.len(i));
      }
    const Tensor dplan = Tensor::from<int64_t>(plan, Shape{3 * M}).to(c.place());
    cuda_kernels::check(c, cuda_kernels::sequence_expand_grad(cuda_kernels::elem(c, xt.dtype()), pg, dplan.data<int64_t>(), pd, M, D, cuda_kernels::stream(c)));
  });
  dx.set_lod(xt.lod());
}

}  // namespace oar::ops
