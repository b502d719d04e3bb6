// kernels/cpu/sequence_slice.hpp: sequence_slice and its grad on the CPU: one block copy per sequence.
#pragma once
#include <cstring>

#include "kernels/common/sequence_slice.hpp"
#include "oar/ops/sequence_slice.hpp"

namespace oar::ops {

inline void SequenceSlice::eval_cpu(KernelContext& c, const NoAttrs&) {
  const kernels::seq_shape::SlicePlan p = kernels::seq_shape::slice_plan(c);
  const LoDTensor& xt = c.in(x);
  const std::vector<size_t>& last = p.lod->back();
  const char* src = static_cast<const char*>(xt.raw());
  char* dst = static_cast<char*>(p.out->raw());
  for (size_t i = 0; i < p.spec.length.size(); ++i)
    if (p.spec.length[i]) std::memcpy(dst + last[i] * p.row, src + (p.offs[i] + size_t(p.spec.offset[i])) * p.row, size_t(p.spec.length[i]) * p.row);
  p.out->set_lod(*p.lod);
}

inline void SequenceSlice::eval_grad_cpu(KernelContext& c, const NoAttrs&) {
  if (!c.has_out(x_grad)) return;
  const kernels::seq_shape::SliceGradPlan p = kernels::seq_shape::slice_grad_plan(c);
  const LoDTensor& xt = c.in(x);
  char* dst = static_cast<char*>(p.x_grad->raw());
  const char* src = static_cast<const char*>(c.in(out_grad).raw());
  if (xt.bytes()) std::memset(dst, 0, xt.bytes());  // all-zero bytes are 0.0 for f32 and f64
  size_t at = 0;
  for (size_t i = 0; i < p.spec.length.size(); ++i) {
    if (p.spec.length[i]) std::memcpy(dst + (p.offs[i] + size_t(p.spec.offset[i])) * p.row, src + at * p.row, size_t(p.spec.length[i]) * p.row);
    at += size_t(p.spec.length[i]);
  }
  p.x_grad->set_lod(xt.lod());
}

}  // namespace oar::ops
