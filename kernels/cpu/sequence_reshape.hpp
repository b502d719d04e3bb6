// kernels/cpu/sequence_reshape.hpp: sequence_reshape and its grad on the CPU and, the same code, on CUDA (the op
// is `any_place`): a copy of the bytes (the row-major layout already is the re-cut one) and the last LoD level
// rescaled, which reads only the LoD (on the host on every place).
#pragma once
#include "kernels/cpu/place_io.hpp"
#include "kernels/cpu/sequence_conv.hpp"  // seq_shape::last_level
#include "oar/ops/sequence_reshape.hpp"

namespace oar::ops {

inline void SequenceReshape::eval_cpu(KernelContext& c, const Attrs& a) {
  const LoDTensor& xt = c.in(x);
  c.check(xt.rank() == 2, "X must be [N, D], got {}", xt.shape());
  auto offs = cpu_kernels::seq_shape::last_level(c, xt, x);
  const int64_t d = xt.dim(1), nd = a.new_dim;
  for (size_t i = 0; i + 1 < offs.size(); ++i) {
    const int64_t elems = int64_t(offs[i + 1] - offs[i]) * d;
    c.check(elems % nd == 0, "sequence {} has {} rows of {} = {} elements, which do not split into rows of new_dim = {}", i, offs[i + 1] - offs[i], d,
            elems, nd);
  }
  LoDTensor& ot = c.out(out);
  ot.resize(Shape{xt.dim(0) * d / nd, nd}, xt.dtype());
  cpu_kernels::place_io::copy(c, ot.raw(), xt.raw(), xt.bytes());
  // NOTE: a per-thread LoD: assigning into it reuses its vectors, so a steady state allocates nothing.
  thread_local LoD lod;
  lod = xt.lod();
  for (size_t& o : lod.back()) o = size_t(int64_t(o) * d / nd);
  ot.set_lod(lod);
}

inline void SequenceReshape::eval_grad_cpu(KernelContext& c, const Attrs&) {
  if (!c.has_out(x_grad)) return;
  const LoDTensor& xt = c.in(x);
  const LoDTensor& dout = c.in(out_grad);
  c.check(dout.numel() == xt.numel() && dout.dtype() == xt.dtype(), "Out@GRAD {} {} does not match X {} {}", dout.shape(), name(dout.dtype()),
          xt.shape(), name(xt.dtype()));
  LoDTensor& dx = c.out(x_grad);
  dx.resize(xt.shape(), xt.dtype());
  cpu_kernels::place_io::copy(c, dx.raw(), dout.raw(), xt.bytes());
  dx.set_lod(xt.lod());
}

}  // namespace oar::ops
