// kernels/common/sequence_conv.hpp: the LoD check the sequence shape kernels of every place share
// (seq_shape::last_level), and sequence_conv's sizes checked as both places' kernels need them.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "oar/ops/sequence_conv.hpp"
#include "oar/device/kernel_context.hpp"

namespace oar::kernels::seq_shape {

/// The offsets of the last LoD level of input `t` (sequence i is rows [o[i], o[i+1])), after checking that `t`
/// has LoD (exactly `levels` levels when levels > 0), that the LoD is well formed and that it covers t's rows.
inline std::span<const size_t> last_level(const KernelContext& c, const LoDTensor& t, Slot slot, int levels = 0) {
  const LoD& lod = t.lod();
  c.check(!lod.empty(), "{} ('{}') has no LoD: it must be a batch of sequences (a LoD tensor), got a plain tensor {}", slot.name, c.in_name(slot),
          t.shape());
  c.check(levels <= 0 || int(lod.size()) == levels, "{} must have {} LoD level(s), got {}", slot.name, levels, lod.size());
  const int64_t rows = t.rank() > 0 ? t.dim(0) : 0;
  if (const std::string why = lod_error(lod, rows); !why.empty()) [[unlikely]]
    c.fail("{} has a bad LoD for its {} rows: {}", slot.name, rows, why);
  return {lod.back().data(), lod.back().size()};
}

/// sequence_conv's sizes (X [n, d], Filter [w = length * d, m]) and X's offsets, checked as both places'
/// kernels need them; `grad` checks Out@GRAD [n, m] too.
struct ConvShape {
  const LoDTensor &x, &filter;
  const LoDTensor* dout;  ///< Out@GRAD (grad), else null
  std::span<const size_t> offs;
  int64_t n, d, w, m;
};
inline ConvShape conv_shape(const KernelContext& c, const ops::SequenceConv::Attrs& a, bool grad) {
  using Op = ops::SequenceConv;
  const LoDTensor& xt = c.in(Op::x);
  const LoDTensor& ft = c.in(Op::filter);
  c.check(xt.rank() == 2, "X must be [N, D], got {}", xt.shape());
  ConvShape p{xt, ft, grad ? &c.in(Op::out_grad) : nullptr, {}, xt.dim(0), xt.dim(1), int64_t(a.length) * xt.dim(1), 0};
  c.check(ft.rank() == 2 && ft.dim(0) == p.w, "Filter must be [contextLength * D, M] = [{}, M], got {}", p.w, ft.shape());
  c.check(ft.dtype() == xt.dtype(), "Filter must have X's dtype {}, got {}", name(xt.dtype()), name(ft.dtype()));
  p.m = ft.dim(1);
  if (grad) c.check(p.dout->shape() == Shape{p.n, p.m}, "Out@GRAD must be [{}, {}], got {}", p.n, p.m, p.dout->shape());
  p.offs = last_level(c, xt, Op::x, 1);
  return p;
}

}  // namespace oar::kernels::seq_shape
