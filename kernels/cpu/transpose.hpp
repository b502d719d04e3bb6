// kernels/cpu/transpose.hpp: transpose and transpose_grad on the CPU: one strided gather per output row,
// over the element's bytes (so every dtype shares the code), parallel over rows.
// Hand-written: faster than xt::transpose, which walks views element by element (oar_bench nd_transpose).
#pragma once
#include <array>
#include <span>

#include "oar/ops/transpose.hpp"
#include "oar/device/kernel_context.hpp"
#include "oar/device/thread_pool.hpp"

namespace oar::cpu_kernels {

/// Calls f(type_tag<U>{}) with an unsigned type of `bytes` bytes (1, 2, 4 or 8).
template <class F>
void visit_bytes(size_t bytes, F&& f) {
  switch (bytes) {
    case 1: f(type_tag<uint8_t>{}); break;
    case 2: f(type_tag<uint16_t>{}); break;
    case 4: f(type_tag<uint32_t>{}); break;
    case 8: f(type_tag<uint64_t>{}); break;
    default: throw Error(fmt::format("no element type of {} bytes", bytes));
  }
}

/// out = x with dims permuted: out.shape[k] = x.shape[perm[k]]. requires: perm a permutation; out != x.
inline void transpose(const Tensor& x, std::span<const int32_t> perm, Tensor& out) {
  const Shape& is = x.shape();
  int r = is.rank();
  Shape os;
  for (int32_t p : perm) os.push_back(is[p]);
  out.resize(os, x.dtype());
  int64_t n = x.numel();
  if (n == 0) return;
  std::array<int64_t, Shape::kMaxRank> istride;
  if (r) istride[size_t(r - 1)] = 1;
  for (int d = r - 2; d >= 0; --d) istride[size_t(d)] = istride[size_t(d + 1)] * is[d + 1];
  // Stride in x of each output dim.
  std::array<int64_t, Shape::kMaxRank> ps;
  for (int k = 0; k < r; ++k) ps[size_t(k)] = istride[size_t(perm[size_t(k)])];
  int64_t last = r ? os[r - 1] : 1, rows = last ? n / last : 0, ls = r ? ps[size_t(r - 1)] : 1;
  visit_bytes(size_of(x.dtype()), [&](auto tag) {
    using U = typename decltype(tag)::type;
    const U* src = static_cast<const U*>(x.raw());
    U* dst = static_cast<U*>(out.raw());
    parallel_for(0, rows, std::max<int64_t>(1, (1 << 14) / std::max<int64_t>(last, 1)), [&](int64_t lo, int64_t hi) {
      for (int64_t row = lo; row < hi; ++row) {
        int64_t rem = row, base = 0;
        for (int k = r - 2; k >= 0; --k) {
          base += (rem % os[k]) * ps[size_t(k)];
          rem /= os[k];
        }
        U* o = dst + row * last;
        const U* s = src + base;
        if (ls == 1) std::copy_n(s, last, o);
        else for (int64_t j = 0; j < last; ++j) o[j] = s[j * ls];
      }
    });
  });
}

}  // namespace oar::cpu_kernels

namespace oar::ops {

inline void Transpose::eval_cpu(KernelContext& c, const Attrs& a) {
  const LoDTensor& xt = c.in(x);
  check_perm(c, xt.shape(), a.axis);
  LoDTensor& ot = c.out(out);
  c.check(&ot != &xt, "transpose cannot run in place");
  cpu_kernels::transpose(xt, a.axis, ot);
  ot.clear_lod();
}

/// X@GRAD = transpose(Out@GRAD, inverse of axis).
inline void Transpose::eval_grad_cpu(KernelContext& c, const Attrs& a) {
  if (!c.has_out(x_grad)) return;
  const LoDTensor& dout = c.in(out_grad);
  check_perm(c, dout.shape(), a.axis);
  const std::array<int32_t, Shape::kMaxRank> inv = inverse(a.axis);
  LoDTensor& dx = c.out(x_grad);
  cpu_kernels::transpose(dout, std::span<const int32_t>(inv.data(), a.axis.size()), dx);
  dx.set_lod(c.in(x).lod());
}

}  // namespace oar::ops
