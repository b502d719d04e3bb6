// kernels/cpu/sequence_concat.hpp: sequence_concat and its grad on the CPU: byte copies (every dtype), one
// output sequence per task; Out's offsets are the sums of the inputs' offsets.
#pragma once
#include "kernels/cpu/sequence_pool.hpp"
#include "oar/ops/sequence_concat.hpp"

namespace oar::cpu_kernels {

/// One input of sequence_concat as the copy loops see it: its offsets, its rows and its gradient's rows
/// (null when not wanted). Kept in a per-thread list (scratch slot 61) so a steady run allocates nothing.
struct ConcatPart {
  const size_t* lod;
  const char* data;
  char* grad;
};
inline ConcatPart* concat_parts(size_t n) { return thread_scratch<ConcatPart, 61>(n); }

}  // namespace oar::cpu_kernels

namespace oar::ops {

/// requires: Out is none of the inputs.
inline void SequenceConcat::eval_cpu(KernelContext& c, const NoAttrs&) {
  const size_t n = c.num_in(x);
  const LoDTensor& x0 = c.in(x, 0);
  const size_t S = cpu_kernels::seq_last_level(c, x, x0, 0).size() - 1;
  const int64_t D = cpu_kernels::row_size(x0);
  int64_t rows = 0;
  for (size_t k = 0; k < n; ++k) {
    const LoDTensor& xk = c.in(x, k);
    const size_t sk = cpu_kernels::seq_last_level(c, x, xk, k).size() - 1;
    c.check(xk.lod_level() == 1, "X[{}] ('{}') has {} LoD levels; sequence_concat joins inputs of exactly 1", k, c.in_name(x, k), xk.lod_level());
    c.check(sk == S, "X[{}] ('{}') has {} sequences but X[0] has {}; every input needs the same number", k, c.in_name(x, k), sk, S);
    bool ok = xk.dtype() == x0.dtype() && xk.rank() == x0.rank();
    for (int d = 1; ok && d < x0.rank(); ++d) ok = xk.dim(d) == x0.dim(d);
    c.check(ok, "X[{}] {} {} does not fit X[0] {} {} (only the rows may differ)", k, xk.shape(), name(xk.dtype()), x0.shape(), name(x0.dtype()));
    rows += xk.dim(0);
  }
  LoDTensor& ot = c.out(out);
  cpu_kernels::ConcatPart* parts = cpu_kernels::concat_parts(n);
  for (size_t k = 0; k < n; ++k) {
    const LoDTensor& xk = c.in(x, k);
    c.check(&xk != &ot, "Out cannot be one of the inputs");
    parts[k] = {xk.lod()[0].data(), static_cast<const char*>(xk.raw()), nullptr};
  }
  LoD& lod = cpu_kernels::seq_lod_scratch(1);
  lod[0].assign(S + 1, 0);
  for (size_t k = 0; k < n; ++k)
    for (size_t s = 0; s <= S; ++s) lod[0][s] += c.in(x, k).lod()[0][s];
  Shape os = x0.shape();
  os[0] = rows;
  ot.resize(os, x0.dtype());
  const size_t row = size_t(D) * size_of(x0.dtype());
  char* po = static_cast<char*>(ot.raw());
  const std::vector<size_t>& ol = lod[0];
  if (row > 0)
    parallel_for(0, int64_t(S), cpu_kernels::seq_grain(os.numel(), int64_t(S)), [&](int64_t lo, int64_t hi) {
      for (int64_t s = lo; s < hi; ++s) {
        char* o = po + ol[size_t(s)] * row;
        for (size_t k = 0; k < n; ++k) {
          const size_t* l = parts[k].lod;
          const size_t bytes = (l[s + 1] - l[s]) * row;
          std::memcpy(o, parts[k].data + l[s] * row, bytes);
          o += bytes;
        }
      }
    });
  ot.set_lod(lod);
}

/// X@GRAD[k] = the rows of Out@GRAD that came from X[k], with X[k]'s LoD.
inline void SequenceConcat::eval_grad_cpu(KernelContext& c, const NoAttrs&) {
  const size_t n = c.num_in(x);
  const LoDTensor& x0 = c.in(x, 0);
  const LoDTensor& dout = c.in(out_grad);
  const size_t S = cpu_kernels::seq_last_level(c, x, x0, 0).size() - 1;
  const int64_t D = cpu_kernels::row_size(x0);
  int64_t rows = 0;
  for (size_t k = 0; k < n; ++k) {
    const size_t sk = cpu_kernels::seq_last_level(c, x, c.in(x, k), k).size() - 1;
    c.check(sk == S && c.in(x, k).lod_level() == 1 && cpu_kernels::row_size(c.in(x, k)) == D, "X[{}] ('{}') does not fit X[0]", k, c.in_name(x, k));
    rows += c.in(x, k).dim(0);
  }
  c.check(dout.rank() >= 1 && dout.dim(0) == rows && dout.numel() == rows * D && dout.dtype() == x0.dtype(), "Out@GRAD {} does not fit Out [{}, ...] {}",
          dout.shape(), rows, name(x0.dtype()));
  cpu_kernels::ConcatPart* parts = cpu_kernels::concat_parts(n);
  for (size_t k = 0; k < n; ++k) {
    const LoDTensor& xk = c.in(x, k);
    char* g = nullptr;
    if (c.has_out(x_grad, k)) g = static_cast<char*>(c.out(x_grad, k).resize(xk.shape(), x0.dtype()).raw());
    parts[k] = {xk.lod()[0].data(), nullptr, g};
  }
  const size_t row = size_t(D) * size_of(x0.dtype());
  const char* pg = static_cast<const char*>(dout.raw());
  if (row > 0)
    parallel_for(0, int64_t(S), cpu_kernels::seq_grain(dout.numel(), int64_t(S)), [&](int64_t lo, int64_t hi) {
      for (int64_t s = lo; s < hi; ++s) {
        size_t at = 0;  // Out's offset of sequence s: the sum of the inputs' offsets
        for (size_t k = 0; k < n; ++k) at += parts[k].lod[s];
        const char* g = pg + at * row;
        for (size_t k = 0; k < n; ++k) {
          const size_t* l = parts[k].lod;
          const size_t bytes = (l[s + 1] - l[s]) * row;
          if (parts[k].grad) std::memcpy(parts[k].grad + l[s] * row, g, bytes);
          g += bytes;
        }
      }
    });
  for (size_t k = 0; k < n; ++k)
    if (c.has_out(x_grad, k)) c.out(x_grad, k).set_lod(c.in(x, k).lod());
}

}  // namespace oar::ops
