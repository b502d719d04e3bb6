// kernels/cpu/concat.hpp: concat, concat_grad, split, stack and stack_grad on the CPU. All are one copy
// pattern: a tensor seen as [outer, dim * inner] and pieces of it as [outer, dim_i * inner], byte-wise
// (every dtype), parallel over outer rows when there are many.
#pragma once
#include <cstring>

#include "oar/ops/concat.hpp"
#include "oar/runtime/kernel_context.hpp"
#include "oar/runtime/thread_pool.hpp"

namespace oar::cpu_kernels {

/// One piece: its memory and its row width in bytes.
struct Piece {
  char* data;
  size_t row_bytes;
};

/// join = true: whole[o] = piece0[o] | piece1[o] | ... ; false: the reverse (split). Rows are `outer`;
/// whole's row is the sum of the pieces' rows. A piece with data == nullptr is skipped (split) or must not
/// occur (join).
inline void join_rows(char* whole, int64_t outer, const std::vector<Piece>& pieces, bool join) {
  size_t row = 0;
  for (auto& p : pieces) row += p.row_bytes;
  if (outer == 0 || row == 0) return;
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

inline void Concat::eval_cpu(KernelContext& c) {
  auto xs = c.ins("X");
  const Shape& s0 = xs[0]->shape();
  int axis = tensor_detail::normalize_axis(c, c.attr<int32_t>("axis"), s0.rank(), "axis", s0);
  Shape os = s0;
  os[axis] = 0;
  std::vector<cpu_kernels::Piece> pieces;
  size_t es = size_of(xs[0]->dtype());
  int64_t inner = s0.numel(axis + 1, s0.rank());
  for (size_t i = 0; i < xs.size(); ++i) {
    const Shape& si = xs[i]->shape();
    bool ok = si.rank() == s0.rank() && xs[i]->dtype() == xs[0]->dtype();
    for (int d = 0; ok && d < s0.rank(); ++d) ok = d == axis || si[d] == s0[d];
    c.check(ok, "X[{}] {} {} does not fit X[0] {} {} (only axis {} may differ)", i, si, name(xs[i]->dtype()), s0, name(xs[0]->dtype()), axis);
    os[axis] += si[axis];
    pieces.push_back({static_cast<char*>(xs[i]->raw()), size_t(si[axis] * inner) * es});
  }
  LoDTensor& out = c.out("Out");
  for (auto* x : xs) c.check(x != &out, "concat cannot write into one of its inputs");
  out.resize(os, xs[0]->dtype());
  cpu_kernels::join_rows(static_cast<char*>(out.raw()), s0.numel(0, axis), pieces, true);
  if (axis != 0) out.set_lod(xs[0]->lod());
  else out.clear_lod();
}

/// X@GRAD[i] = the i-th piece of Out@GRAD.
inline void Concat::eval_grad_cpu(KernelContext& c) {
  const LoDTensor& dout = c.in("Out@GRAD");
  size_t n = c.num_in("X");
  const Shape& s0 = c.in("X", 0).shape();
  int axis = tensor_detail::normalize_axis(c, c.attr<int32_t>("axis"), s0.rank(), "axis", s0);
  int64_t inner = s0.numel(axis + 1, s0.rank());
  size_t es = size_of(dout.dtype());
  std::vector<cpu_kernels::Piece> pieces;
  int64_t total = 0;
  for (size_t i = 0; i < n; ++i) {
    const LoDTensor& x = c.in("X", i);
    total += x.dim(axis);
    char* p = nullptr;
    if (c.has_out("X@GRAD", i)) {
      LoDTensor& dx = c.out("X@GRAD", i);
      dx.resize(x.shape(), dout.dtype());
      dx.set_lod(x.lod());
      p = static_cast<char*>(dx.raw());
    }
    pieces.push_back({p, size_t(x.dim(axis) * inner) * es});
  }
  c.check(dout.rank() == s0.rank() && dout.dim(axis) == total, "Out@GRAD {} does not match the inputs joined on axis {}", dout.shape(), axis);
  cpu_kernels::join_rows(static_cast<char*>(dout.raw()), s0.numel(0, axis), pieces, false);
}

inline void Split::eval_cpu(KernelContext& c) {
  const LoDTensor& x = c.in("X");
  int axis = tensor_detail::normalize_axis(c, c.attr<int32_t>("axis"), x.rank(), "axis", x.shape());
  size_t n = c.num_out("Out");
  auto sizes = sections(c, x.dim(axis), n);
  int64_t inner = x.shape().numel(axis + 1, x.rank());
  size_t es = size_of(x.dtype());
  std::vector<cpu_kernels::Piece> pieces;
  for (size_t i = 0; i < n; ++i) {
    Shape s = x.shape();
    s[axis] = sizes[i];
    char* p = nullptr;
    if (c.has_out("Out", i)) {
      LoDTensor& o = c.out("Out", i);
      c.check(&o != &x, "split cannot write into its input");
      o.resize(s, x.dtype());
      if (axis != 0) o.set_lod(x.lod());
      else o.clear_lod();
      p = static_cast<char*>(o.raw());
    }
    pieces.push_back({p, size_t(sizes[i] * inner) * es});
  }
  cpu_kernels::join_rows(static_cast<char*>(x.raw()), x.shape().numel(0, axis), pieces, false);
}

inline void Stack::eval_cpu(KernelContext& c) {
  auto xs = c.ins("X");
  const Shape& s0 = xs[0]->shape();
  for (size_t i = 1; i < xs.size(); ++i)
    c.check(xs[i]->shape() == s0 && xs[i]->dtype() == xs[0]->dtype(), "X[{}] {} {} differs from X[0] {} {}", i, xs[i]->shape(),
            name(xs[i]->dtype()), s0, name(xs[0]->dtype()));
  Shape ys = x_with_axis(c, s0, int64_t(xs.size()));
  int axis = c.attr<int32_t>("axis");
  if (axis < 0) axis += s0.rank() + 1;
  size_t row = size_t(s0.numel(axis, s0.rank())) * size_of(xs[0]->dtype());
  std::vector<cpu_kernels::Piece> pieces;
  for (auto* x : xs) pieces.push_back({static_cast<char*>(x->raw()), row});
  LoDTensor& y = c.out("Y");
  for (auto* x : xs) c.check(x != &y, "stack cannot write into one of its inputs");
  y.resize(ys, xs[0]->dtype());
  y.clear_lod();
  cpu_kernels::join_rows(static_cast<char*>(y.raw()), s0.numel(0, axis), pieces, true);
}

/// X@GRAD[i] = Y@GRAD[..., i, ...] along axis.
inline void Stack::eval_grad_cpu(KernelContext& c) {
  const LoDTensor& dy = c.in("Y@GRAD");
  size_t n = c.num_out("X@GRAD");
  int r = dy.rank() - 1;
  int axis = c.attr<int32_t>("axis");
  if (axis < 0) axis += r + 1;
  c.check(axis >= 0 && axis <= r && dy.dim(axis) == int64_t(n), "Y@GRAD {} does not hold {} slices on axis {}", dy.shape(), n, axis);
  Shape xs = dy.shape();
  xs.erase(axis);
  size_t row = size_t(xs.numel(axis, r)) * size_of(dy.dtype());
  std::vector<cpu_kernels::Piece> pieces;
  for (size_t i = 0; i < n; ++i) {
    char* p = nullptr;
    if (c.has_out("X@GRAD", i)) {
      LoDTensor& dx = c.out("X@GRAD", i);
      dx.resize(xs, dy.dtype());
      p = static_cast<char*>(dx.raw());
    }
    pieces.push_back({p, row});
  }
  cpu_kernels::join_rows(static_cast<char*>(dy.raw()), xs.numel(0, axis), pieces, false);
}

}  // namespace oar::ops
