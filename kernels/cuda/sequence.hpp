// kernels/cuda/sequence.hpp: eval_cuda of sequence_pool, sequence_softmax and sequence_expand and their
// gradients (device side: kernels/cuda/sequence.cu). Each starts from its CPU kernel's plan (pool_plan,
// seq_softmax_plan, expand_forward_plan and their grad twins: the CPU's checks, messages and output sizes) and
// sets the outputs' LoD as the CPU does. The LoD lives on the host: the offsets (or the row plan) a kernel needs
// are uploaded per call, freed in stream order.
#pragma once
#include <vector>

#include "kernels/common/place_io.hpp"
#include "kernels/common/sequence_expand.hpp"   // kernels::expand_forward_plan, expand_grad_plan
#include "kernels/common/sequence_pool.hpp"     // kernels::pool_plan, pool_grad_plan, row_size, seq_upper_levels
#include "kernels/common/sequence_softmax.hpp"  // kernels::seq_softmax_plan, seq_softmax_grad_plan
#include "kernels/cuda/host.hpp"
#include "kernels/cuda/sequence_launch.hpp"
#include "kernels/cuda/sequence_shape_launch.hpp"

namespace oar::cuda_kernels {

/// The offsets `seq` as int64 on the kernel's device.
inline Tensor device_offsets(const KernelContext& c, std::span<const size_t> seq) {
  const std::vector<int64_t> v(seq.begin(), seq.end());
  return kernels::place_io::upload(c, v);
}

}  // namespace oar::cuda_kernels

namespace oar::ops {

inline void SequencePool::eval_cuda(KernelContext& c, const Attrs& a) {
  const LoDTensor& xt = c.in(x);
  const kernels::PoolPlan plan = kernels::pool_plan(c, a);
  const int64_t S = plan.S, D = plan.D;
  LoDTensor& ot = *plan.out;
  c.dispatch(type_list<float, double>{}, xt.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* px = xt.data<T>();
    T* po = ot.data<T>();
    if (S * D == 0) return;
    const Tensor off = cuda_kernels::device_offsets(c, plan.seq);
    cuda_kernels::check(c, cuda_kernels::sequence_pool(cuda_kernels::SeqPool(int(a.pooltype)), cuda_kernels::elem(c, xt.dtype()), px, off.data<int64_t>(), po,
                                                       plan.max_index, S, D, cuda_kernels::stream(c)));
  });
  ot.set_lod(kernels::seq_upper_levels(xt.lod()));
}

/// MAX: MaxIndex comes to the host to be checked as the CPU checks it (each index inside its sequence), after a
/// stream sync (it is a kernel's output); the gradient is then written on the device from the device's copy.
inline void SequencePool::eval_grad_cuda(KernelContext& c, const Attrs& a) {
  if (!c.has_out(x_grad)) return;
  const LoDTensor& xt = c.in(x);
  const LoDTensor& dout = c.in(out_grad);
  const kernels::PoolGradPlan plan = kernels::pool_grad_plan(c, a);
  const int64_t S = plan.S, D = plan.D;
  const int32_t* pi = plan.max_index ? plan.max_index->data<int32_t>() : nullptr;
  if (pi && S * D > 0) {
    c.device().synchronize();
    kernels::check_max_index(c, plan, plan.max_index->to(cpu()).data<int32_t>());
  }
  LoDTensor& dx = *plan.x_grad;
  c.dispatch(type_list<float, double>{}, xt.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* pg = dout.data<T>();
    T* pd = dx.data<T>();
    if (xt.numel() == 0) return;
    const Tensor off = cuda_kernels::device_offsets(c, plan.seq);
    cuda_kernels::check(c, cuda_kernels::sequence_pool_grad(cuda_kernels::SeqPool(int(a.pooltype)), cuda_kernels::elem(c, xt.dtype()), pg, pi,
                                                            off.data<int64_t>(), pd, xt.dim(0), S, D, cuda_kernels::stream(c)));
  });
  dx.set_lod(xt.lod());
}

inline void SequenceSoftmax::eval_cuda(KernelContext& c, const NoAttrs&) {
  const LoDTensor& xt = c.in(x);
  const kernels::SeqSoftmaxPlan plan = kernels::seq_softmax_plan(c);
  LoDTensor& ot = *plan.out;
  c.dispatch(type_list<float, double>{}, xt.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* px = xt.data<T>();
    T* po = ot.data<T>();
    if (xt.numel() == 0) return;
    const Tensor off = cuda_kernels::device_offsets(c, plan.seq);
    cuda_kernels::check(c, cuda_kernels::sequence_softmax(cuda_kernels::elem(c, xt.dtype()), px, off.data<int64_t>(), po, plan.S, cuda_kernels::stream(c)));
  });
  ot.set_lod(xt.lod());
}

inline void SequenceSoftmax::eval_grad_cuda(KernelContext& c, const NoAttrs&) {
  if (!c.has_out(x_grad)) return;
  const LoDTensor& yt = c.in(out);
  const LoDTensor& dy = c.in(out_grad);
  const kernels::SeqSoftmaxPlan plan = kernels::seq_softmax_grad_plan(c);
  LoDTensor& dx = *plan.out;
  c.dispatch(type_list<float, double>{}, yt.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *py = yt.data<T>(), *pg = dy.data<T>();
    T* pd = dx.data<T>();
    if (yt.numel() == 0) return;
    const Tensor off = cuda_kernels::device_offsets(c, plan.seq);
    cuda_kernels::check(c, cuda_kernels::sequence_softmax_grad(cuda_kernels::elem(c, yt.dtype()), py, pg, off.data<int64_t>(), pd, plan.S,
                                                               cuda_kernels::stream(c)));
  });
  dx.set_lod(yt.lod());
}

/// Out row o copies X row src[o] (the plan's rows, made on the host and uploaded): any dtype of 1, 2, 4 or 8
/// bytes, as the CPU copies bytes. requires: Out is not X.
inline void SequenceExpand::eval_cuda(KernelContext& c, const Attrs& a) {
  const LoDTensor& xt = c.in(x);
  const kernels::ExpandForwardPlan plan = kernels::expand_forward_plan(c, a);
  const kernels::ExpandPlan& p = plan.p;
  LoDTensor& ot = *plan.out;
  const int64_t rows = int64_t(p.start[p.units]), D = kernels::row_size(xt);
  if (rows * D > 0) {
    std::vector<int64_t> src(static_cast<size_t>(rows));
    for (int64_t i = 0; i < p.units; ++i)
      for (size_t j = 0; j < p.n(i); ++j)
        for (size_t k = 0; k < p.len(i); ++k) src[p.start[i] + j * p.len(i) + k] = int64_t(p.begin(i) + k);
    const Tensor dsrc = kernels::place_io::upload(c, src);
    cuda_kernels::check(c, cuda_kernels::copy_rows(int(size_of(xt.dtype())), xt.raw(), dsrc.data<int64_t>(), ot.raw(), nullptr, rows, D, nullptr, 0,
                                                   cuda_kernels::stream(c)));
  }
  ot.set_lod(*plan.lod);
}

/// X@GRAD row r = the sum of Out@GRAD over the copies of r, in the CPU's order (a plan per X row: the first copy's
/// row, the copies, the stride between them; made on the host and uploaded).
inline void SequenceExpand::eval_grad_cuda(KernelContext& c, const Attrs& a) {
  if (!c.has_out(x_grad)) return;
  const LoDTensor& xt = c.in(x);
  const LoDTensor& dout = c.in(out_grad);
  const kernels::ExpandGradPlan g = kernels::expand_grad_plan(c, a);
  const kernels::ExpandPlan& p = g.p;
  const int64_t D = g.D;
  LoDTensor& dx = *g.x_grad;
  c.dispatch(type_list<float, double>{}, xt.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
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
    const Tensor dplan = kernels::place_io::upload(c, plan);
    cuda_kernels::check(c, cuda_kernels::sequence_expand_grad(cuda_kernels::elem(c, xt.dtype()), pg, dplan.data<int64_t>(), pd, M, D, cuda_kernels::stream(c)));
  });
  dx.set_lod(xt.lod());
}

}  // namespace oar::ops
