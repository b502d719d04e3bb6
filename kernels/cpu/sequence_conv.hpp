// kernels/cpu/sequence_conv.hpp: sequence_conv and its grad on the CPU: the windows of every row gathered into
// a [N, length * D] column matrix (zeros outside the row's sequence), then one GEMM with the filter. The LoD
// check the sequence shape kernels share (seq_shape::last_level) is kernels/common/sequence_conv.hpp's.
#pragma once
#include <algorithm>
#include <span>

#include "kernels/common/sequence_conv.hpp"
#include "kernels/cpu/gemm.hpp"
#include "kernels/cpu/scratch.hpp"
#include "oar/device/kernel_context.hpp"
#include "oar/device/thread_pool.hpp"
#include "oar/ops/sequence_conv.hpp"

namespace oar::cpu_kernels::seq_shape {

using namespace kernels::seq_shape;

/// The sequence of `offs` that holds row r (offs as last_level gives; empty sequences are skipped).
inline size_t sequence_of(std::span<const size_t> offs, int64_t r) {
  return size_t(std::upper_bound(offs.begin(), offs.end(), size_t(r)) - offs.begin()) - 1;
}

/// Rows of [N, width] matrices per parallel_for chunk: about 16K elements.
inline int64_t row_grain(int64_t width) { return std::max<int64_t>(1, (int64_t(1) << 14) / std::max<int64_t>(width, 1)); }

/// col[r] = [x[r + start], ..., x[r + start + len - 1]] with zeros for rows outside r's sequence.
/// x: [N, D], col: [N, len * D]. requires: col does not alias x.
template <class T>
void context_columns(const T* x, std::span<const size_t> offs, int64_t n, int64_t d, int start, int len, T* col) {
  const int64_t w = int64_t(len) * d;
  parallel_for(0, n, row_grain(w), [&](int64_t lo, int64_t hi) {
    size_t s = sequence_of(offs, lo);
    for (int64_t r = lo; r < hi; ++r) {
      while (int64_t(offs[s + 1]) <= r) ++s;
      const int64_t b = int64_t(offs[s]), e = int64_t(offs[s + 1]);
      T* dst = col + r * w;
      for (int j = 0; j < len; ++j) {
        const int64_t src = r + start + j;
        if (src >= b && src < e) std::copy_n(x + src * d, d, dst + j * d);
        else std::fill_n(dst + j * d, d, T(0));
      }
    }
  });
}

}  // namespace oar::cpu_kernels::seq_shape

namespace oar::ops {

inline void SequenceConv::eval_cpu(KernelContext& c, const Attrs& a) {
  const cpu_kernels::seq_shape::ConvShape p = cpu_kernels::seq_shape::conv_shape(c, a, false);
  const LoDTensor &xt = p.x, &ft = p.filter;
  LoDTensor& ot = c.out(out);
  c.dispatch_float([&](auto tag) {
    using T = typename decltype(tag)::type;
    ot.resize(Shape{p.n, p.m}, xt.dtype());
    T* col = cpu_kernels::thread_scratch<T, 81>(size_t(p.n * p.w));
    cpu_kernels::seq_shape::context_columns(xt.data<T>(), p.offs, p.n, p.d, a.start, a.length, col);
    cpu_kernels::gemm<T>(false, false, p.n, p.m, p.w, T(1), col, p.w, ft.data<T>(), p.m, T(0), ot.data<T>(), p.m);
  });
  ot.set_lod(xt.lod());
}

/// Filter@GRAD = col^T * Out@GRAD; X@GRAD[u] = sum over j of dcol[u - start - j] block j (the rows whose window
/// put u at tap j), with dcol = Out@GRAD * Filter^T: a gather per row, so rows never collide.
inline void SequenceConv::eval_grad_cpu(KernelContext& c, const Attrs& a) {
  const bool want_x = c.has_out(x_grad), want_f = c.has_out(filter_grad);
  if (!want_x && !want_f) return;
  const cpu_kernels::seq_shape::ConvShape p = cpu_kernels::seq_shape::conv_shape(c, a, true);
  const LoDTensor &xt = p.x, &ft = p.filter, &dout = *p.dout;
  const int64_t n = p.n, d = p.d, w = p.w, m = p.m;
  const std::span<const size_t> offs = p.offs;
  c.dispatch_float([&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* g = dout.data<T>();
    if (want_f) {
      LoDTensor& df = c.out(filter_grad);
      df.resize(ft.shape(), ft.dtype());
      T* col = cpu_kernels::thread_scratch<T, 81>(size_t(n * w));
      cpu_kernels::seq_shape::context_columns(xt.data<T>(), offs, n, d, a.start, a.length, col);
      cpu_kernels::gemm<T>(true, false, w, m, n, T(1), col, w, g, m, T(0), df.data<T>(), m);
    }
    if (want_x) {
      LoDTensor& dx = c.out(x_grad);
      dx.resize(xt.shape(), xt.dtype());
      T* dcol = cpu_kernels::thread_scratch<T, 82>(size_t(n * w));
      cpu_kernels::gemm<T>(false, true, n, w, m, T(1), g, m, ft.data<T>(), m, T(0), dcol, w);
      T* px = dx.data<T>();
      const int start = a.start, len = a.length;
      parallel_for(0, n, cpu_kernels::seq_shape::row_grain(w), [&](int64_t lo, int64_t hi) {
        size_t s = cpu_kernels::seq_shape::sequence_of(offs, lo);
        for (int64_t u = lo; u < hi; ++u) {
          while (int64_t(offs[s + 1]) <= u) ++s;
          const int64_t b = int64_t(offs[s]), e = int64_t(offs[s + 1]);
          T* row = px + u * d;
          std::fill_n(row, d, T(0));
          for (int j = 0; j < len; ++j) {
            const int64_t r = u - start - j;  // the output row whose tap j reads u
            if (r < b || r >= e) continue;
            const T* src = dcol + r * w + int64_t(j) * d;
            for (int64_t k = 0; k < d; ++k) row[k] += src[k];
          }
        }
      });
      dx.set_lod(xt.lod());
    }
  });
}

}  // namespace oar::ops
