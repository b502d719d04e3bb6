// kernels/cpu/concat.hpp: concat, concat_grad, split, stack and stack_grad, on the CPU and, the same code, on
// CUDA (the ops are `any_place`). All are one copy pattern: a tensor seen as [outer, dim * inner] and pieces of
// it as [outer, dim_i * inner], byte-wise (every dtype), parallel over outer rows when there are many; on a GPU
// one 2-D copy per piece.
// Hand-written: faster than xt::concatenate, which walks views element by element (oar_bench nd_concat).
#pragma once
#include <cstring>
#include <span>

#include "kernels/cpu/scratch.hpp"
#include "oar/ops/concat.hpp"
#include "oar/device/kernel_context.hpp"
#include "oar/device/thread_pool.hpp"

namespace oar::cpu_kernels {

/// One piece: its memory and its row width in bytes.
struct Piece {
  char* data;
  size_t row_bytes;
};

/// The caller's list of `n` pieces: a per-thread buffer, so a steady run allocates nothing.
inline Piece* piece_scratch(size_t n) { return thread_scratch<Piece, 50>(n); }

/// join = true: whole[o] = piece0[o] | piece1[o] | ... ; false: the reverse (split). Rows are `outer`;
/// whole's row is the sum of the pieces' rows. A piece with data == nullptr is skipped (split) or must not
/// occur (join).
inline void join_rows(const KernelContext& c, char* whole, int64_t outer, std::span<const Piece> pieces, bool join) {
  size_t row = 0;
  for (auto& p : pieces) row += p.row_bytes;
  if (outer == 0 || row == 0) return;
  if (c.place().is_cuda()) {  // one 2-D copy per piece on the kernel's stream: these kernels serve CUDA as they are
    size_t at = 0;
    for (auto& p : pieces) {
      if (p.data && p.row_bytes) {
        if (join) oar::detail::cuda_copy_rows(c.cuda(), whole + at, row, p.data, p.row_bytes, p.row_bytes, size_t(outer));
        else oar::detail::cuda_copy_rows(c.cuda(), p.data, p.row_bytes, whole + at, row, p.row_bytes, size_t(outer));
      }
      at += p.row_bytes;
    }
    return;
  }
  int64_t grain = std::max<int64_t>(1, int64_t((size_t(1) << 16) / row));
  parallel_for(0, outer, grain, [&](int64_t lo, int64_t hi) {
    for (int64_t o = lo; o < hi; ++o) {
      char* w = whole + size_t(o) * row;
      for (auto& p : pieces) {
        if (p.data && p.row_bytes) {
          char* q = p.data + size_t(o) * p.row_bytes;
          if (join) std::memcpy(w, q, p.row_bytes);
          else std::memcpy(q, w, p.row_bytes);
        }
        w += p.row_bytes;
      }
    }
  });
}

}  // namespace oar::cpu_kernels

namespace oar::ops {

inline void Concat::eval_cpu(KernelContext& c, const Attrs& a) {
  const size_t n = c.num_in(x);
  const LoDTensor& x0 = c.in(x, 0);
  const Shape& s0 = x0.shape();
  int ax = tensor_detail::normalize_axis(c, a.axis, s0.rank(), axis, s0);
  Shape os = s0;
  os[ax] = 0;
  cpu_kernels::Piece* pieces = cpu_kernels::piece_scratch(n);
  size_t es = size_of(x0.dtype());
  int64_t inner = s0.numel(ax + 1, s0.rank());
  for (size_t i = 0; i < n; ++i) {
    const LoDTensor& xi = c.in(x, i);
    const Shape& si = xi.shape();
    bool ok = si.rank() == s0.rank() && xi.dtype() == x0.dtype();
    for (int d = 0; ok && d < s0.rank(); ++d) ok = d == ax || si[d] == s0[d];
    c.check(ok, "X[{}] {} {} does not fit X[0] {} {} (only axis {} may differ)", i, si, name(xi.dtype()), s0, name(x0.dtype()), ax);
    os[ax] += si[ax];
    pieces[i] = {static_cast<char*>(xi.raw()), size_t(si[ax] * inner) * es};
  }
  LoDTensor& ot = c.out(out);
  for (size_t i = 0; i < n; ++i) c.check(&c.in(x, i) != &ot, "concat cannot write into one of its inputs");
  ot.resize(os, x0.dtype());
  cpu_kernels::join_rows(c, static_cast<char*>(ot.raw()), s0.numel(0, ax), {pieces, n}, true);
  if (ax != 0) ot.set_lod(x0.lod());
  else ot.clear_lod();
}

/// X@GRAD[i] = the i-th piece of Out@GRAD.
inline void Concat::eval_grad_cpu(KernelContext& c, const Attrs& a) {
  const LoDTensor& dout = c.in(out_grad);
  size_t n = c.num_in(x);
  const Shape& s0 = c.in(x, 0).shape();
  int ax = tensor_detail::normalize_axis(c, a.axis, s0.rank(), axis, s0);
  int64_t inner = s0.numel(ax + 1, s0.rank());
  size_t es = size_of(dout.dtype());
  cpu_kernels::Piece* pieces = cpu_kernels::piece_scratch(n);
  int64_t total = 0;
  for (size_t i = 0; i < n; ++i) {
    const LoDTensor& xi = c.in(x, i);
    total += xi.dim(ax);
    char* p = nullptr;
    if (c.has_out(x_grad, i)) {
      LoDTensor& dx = c.out(x_grad, i);
      dx.resize(xi.shape(), dout.dtype());
      dx.set_lod(xi.lod());
      p = static_cast<char*>(dx.raw());
    }
    pieces[i] = {p, size_t(xi.dim(ax) * inner) * es};
  }
  c.check(dout.rank() == s0.rank() && dout.dim(ax) == total, "Out@GRAD {} does not match the inputs joined on axis {}", dout.shape(), ax);
  cpu_kernels::join_rows(c, static_cast<char*>(dout.raw()), s0.numel(0, ax), {pieces, n}, false);
}

inline void Split::eval_cpu(KernelContext& c, const Attrs& a) {
  const LoDTensor& xt = c.in(x);
  int ax = tensor_detail::normalize_axis(c, a.axis, xt.rank(), axis, xt.shape());
  size_t n = c.num_out(out);
  int64_t* sizes = cpu_kernels::thread_scratch<int64_t, 52>(n);
  section_sizes(c, xt.dim(ax), n, a.num, a.sections, sizes);
  int64_t inner = xt.shape().numel(ax + 1, xt.rank());
  size_t es = size_of(xt.dtype());
  cpu_kernels::Piece* pieces = cpu_kernels::piece_scratch(n);
  for (size_t i = 0; i < n; ++i) {
    Shape s = xt.shape();
    s[ax] = sizes[i];
    char* p = nullptr;
    if (c.has_out(out, i)) {
      LoDTensor& o = c.out(out, i);
      c.check(&o != &xt, "split cannot write into its input");
      o.resize(s, xt.dtype());
      if (ax != 0) o.set_lod(xt.lod());
      else o.clear_lod();
      p = static_cast<char*>(o.raw());
    }
    pieces[i] = {p, size_t(sizes[i] * inner) * es};
  }
  cpu_kernels::join_rows(c, static_cast<char*>(xt.raw()), xt.shape().numel(0, ax), {pieces, n}, false);
}

inline void Stack::eval_cpu(KernelContext& c, const Attrs& a) {
  const size_t n = c.num_in(x);
  const LoDTensor& x0 = c.in(x, 0);
  const Shape& s0 = x0.shape();
  for (size_t i = 1; i < n; ++i) {
    const LoDTensor& xi = c.in(x, i);
    c.check(xi.shape() == s0 && xi.dtype() == x0.dtype(), "X[{}] {} {} differs from X[0] {} {}", i, xi.shape(), name(xi.dtype()), s0,
            name(x0.dtype()));
  }
  Shape ys = x_with_axis(c, s0, int64_t(n), a.axis);
  int ax = a.axis;
  if (ax < 0) ax += s0.rank() + 1;
  size_t row = size_t(s0.numel(ax, s0.rank())) * size_of(x0.dtype());
  cpu_kernels::Piece* pieces = cpu_kernels::piece_scratch(n);
  for (size_t i = 0; i < n; ++i) pieces[i] = {static_cast<char*>(c.in(x, i).raw()), row};
  LoDTensor& yt = c.out(y);
  for (size_t i = 0; i < n; ++i) c.check(&c.in(x, i) != &yt, "stack cannot write into one of its inputs");
  yt.resize(ys, x0.dtype());
  yt.clear_lod();
  cpu_kernels::join_rows(c, static_cast<char*>(yt.raw()), s0.numel(0, ax), {pieces, n}, true);
}

/// X@GRAD[i] = Y@GRAD[..., i, ...] along axis.
inline void Stack::eval_grad_cpu(KernelContext& c, const Attrs& a) {
  const LoDTensor& dy = c.in(y_grad);
  size_t n = c.num_out(x_grad);
  int r = dy.rank() - 1;
  int ax = a.axis;
  if (ax < 0) ax += r + 1;
  c.check(ax >= 0 && ax <= r && dy.dim(ax) == int64_t(n), "Y@GRAD {} does not hold {} slices on axis {}", dy.shape(), n, ax);
  Shape xs = dy.shape();
  xs.erase(ax);
  size_t row = size_t(xs.numel(ax, r)) * size_of(dy.dtype());
  cpu_kernels::Piece* pieces = cpu_kernels::piece_scratch(n);
  for (size_t i = 0; i < n; ++i) {
    char* p = nullptr;
    if (c.has_out(x_grad, i)) {
      LoDTensor& dx = c.out(x_grad, i);
      dx.resize(xs, dy.dtype());
      p = static_cast<char*>(dx.raw());
    }
    pieces[i] = {p, row};
  }
  cpu_kernels::join_rows(c, static_cast<char*>(dy.raw()), xs.numel(0, ax), {pieces, n}, false);
}

}  // namespace oar::ops
