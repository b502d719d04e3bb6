// kernels/cuda/sequence_conv.hpp: eval_cuda of sequence_conv and its gradient (device side:
// kernels/cuda/sequence_conv.cu). The CPU's plan: the context columns of every row ([N, length * D], zeros outside
// the row's sequence), then cuBLAS's products; the checks are the CPU kernel's (seq_shape::conv_shape).
#pragma once
#include "kernels/common/sequence_conv.hpp"
#include "kernels/cuda/elementwise_launch.hpp"
#include "kernels/cuda/host.hpp"
#include "kernels/cuda/sequence.hpp"  // device_offsets
#include "kernels/cuda/sequence_conv_launch.hpp"

namespace oar::ops {

inline void SequenceConv::eval_cuda(KernelContext& c, const Attrs& a) {
  const kernels::seq_shape::ConvShape p = kernels::seq_shape::conv_shape(c, a, false);
  const LoDTensor &xt = p.x, &ft = p.filter;
  LoDTensor& ot = c.out(out);
  c.dispatch_float([&](auto tag) {
    using T = typename decltype(tag)::type;
    ot.resize(Shape{p.n, p.m}, xt.dtype());
    if (p.n * p.m == 0) return;
    const Tensor off = cuda_kernels::device_offsets(c, p.offs);
    const Tensor col = cuda_kernels::workspace(c, size_t(p.n * p.w) * sizeof(T));
    T* pc = static_cast<T*>(col.raw());
    cuda_kernels::check(c, cuda_kernels::sequence_context(cuda_kernels::elem(c, xt.dtype()), xt.data<T>(), off.data<int64_t>(), pc, p.n,
                                                          int64_t(p.offs.size()) - 1, p.d, a.start, a.length, cuda_kernels::stream(c)));
    cuda_kernels::gemm<T>(c, false, false, p.n, p.m, p.w, T(1), pc, p.w, ft.data<T>(), p.m, T(0), ot.data<T>(), p.m);
  });
  ot.set_lod(xt.lod());
}

/// Filter@GRAD = col^T Out@GRAD; X@GRAD gathers dcol = Out@GRAD Filter^T back per row (each X row sums the taps
/// that read it, in the CPU's order), so no two threads write one element.
inline void SequenceConv::eval_grad_cuda(KernelContext& c, const Attrs& a) {
  const bool want_x = c.has_out(x_grad), want_f = c.has_out(filter_grad);
  if (!want_x && !want_f) return;
  const kernels::seq_shape::ConvShape p = kernels::seq_shape::conv_shape(c, a, true);
  const LoDTensor &xt = p.x, &ft = p.filter, &dout = *p.dout;
  const int64_t S = int64_t(p.offs.size()) - 1;
  const cuda_kernels::Elem e = cuda_kernels::elem(c, xt.dtype());
  c.dispatch_float([&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* g = dout.data<T>();
    LoDTensor* df = want_f ? &c.out(filter_grad) : nullptr;
    LoDTensor* dx = want_x ? &c.out(x_grad) : nullptr;
    if (df) df->resize(ft.shape(), ft.dtype());
    if (dx) dx->resize(xt.shape(), xt.dtype());
    const Tensor off = p.n > 0 ? cuda_kernels::device_offsets(c, p.offs) : Tensor();
    const Tensor col = cuda_kernels::workspace(c, size_t(p.n * p.w) * sizeof(T));
    T* pc = static_cast<T*>(col.raw());
    if (df && p.w * p.m > 0) {
      if (p.n == 0) {
        cuda_kernels::check(c, cuda_kernels::fill(df->raw(), df->numel(), int(sizeof(T)), 0, cuda_kernels::stream(c)));
      } else {
        cuda_kernels::check(c, cuda_kernels::sequence_context(e, xt.data<T>(), off.data<int64_t>(), pc, p.n, S, p.d, a.start, a.length,
                                                              cuda_kernels::stream(c)));
        cuda_kernels::gemm<T>(c, true, false, p.w, p.m, p.n, T(1), pc, p.w, g, p.m, T(0), df->data<T>(), p.m);
      }
    }
    if (dx && p.n * p.d > 0) {
      // col's memory holds dcol now: Filter@GRAD's product is queued before on the same stream.
      if (p.m == 0) cuda_kernels::check(c, cuda_kernels::fill(pc, p.n * p.w, int(sizeof(T)), 0, cuda_kernels::stream(c)));
      else cuda_kernels::gemm<T>(c, false, true, p.n, p.w, p.m, T(1), g, p.m, ft.data<T>(), p.m, T(0), pc, p.w);
      cuda_kernels::check(c, cuda_kernels::sequence_context_grad(e, pc, off.data<int64_t>(), dx->data<T>(), p.n, S, p.d, a.start, a.length,
                                                                 cuda_kernels::stream(c)));
    }
    if (dx) dx->set_lod(xt.lod());
  });
}

}  // namespace oar::ops
