// kernels/cpu/sequence_concat.hpp: sequence_concat and its grad on the CPU: byte copies (every dtype), one
// output sequence per task; Out's offsets are the sums of the inputs' offsets.
#pragma once
#include "kernels/common/sequence_concat.hpp"
#include "kernels/cpu/scratch.hpp"
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
  const kernels::ConcatPlan p = kernels::concat_plan(c);
  const size_t n = p.n;
  LoDTensor& ot = *p.out;
  cpu_kernels::ConcatPart* parts = cpu_kernels::concat_parts(n);
  for (size_t k = 0; k < n; ++k) {
    const LoDTensor& xk = c.in(x, k);
    parts[k] = {xk.lod()[0].data(), static_cast<const char*>(xk.raw()), nullptr};
  }
  const size_t row = size_t(p.D) * size_of(ot.dtype());
  char* po = static_cast<char*>(ot.raw());
  const std::vector<size_t>& ol = (*p.lod)[0];
  if (row > 0)
    parallel_for(0, int64_t(p.S), cpu_kernels::seq_grain(ot.numel(), int64_t(p.S)), [&](int64_t lo, int64_t hi) {
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
  ot.set_lod(*p.lod);
}

/// X@GRAD[k] = the rows of Out@GRAD that came from X[k], with X[k]'s LoD.
inline void SequenceConcat::eval_grad_cpu(KernelContext& c, const NoAttrs&) {
  const kernels::ConcatGradPlan p = kernels::concat_grad_plan(c);
  const size_t n = p.n;
  const LoDTensor& dout = c.in(out_grad);
  cpu_kernels::ConcatPart* parts = cpu_kernels::concat_parts(n);
  for (size_t k = 0; k < n; ++k) {
    char* g = c.has_out(x_grad, k) ? static_cast<char*>(c.out(x_grad, k).raw()) : nullptr;
    parts[k] = {c.in(x, k).lod()[0].data(), nullptr, g};
  }
  const size_t row = size_t(p.D) * size_of(dout.dtype());
  const char* pg = static_cast<const char*>(dout.raw());
  if (row > 0)
    parallel_for(0, int64_t(p.S), cpu_kernels::seq_grain(dout.numel(), int64_t(p.S)), [&](int64_t lo, int64_t hi) {
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
