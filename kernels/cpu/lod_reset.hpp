// kernels/cpu/lod_reset.hpp: lod_reset and its grad on the CPU and, the same code, on CUDA (the op is
// `any_place`): a copy of the data through the place under the chosen LoD (checked against X's rows before it is
// set); Y's values, when they are the offsets, are read on the host (place_io::host).
#pragma once
#include "kernels/cpu/place_io.hpp"
#include "kernels/cpu/sequence_pool.hpp"
#include "oar/ops/lod_reset.hpp"

namespace oar::ops {

inline void LoDReset::eval_cpu(KernelContext& c, const Attrs& a) {
  const LoDTensor& xt = c.in(x);
  c.check(xt.rank() >= 1, "X ('{}') must have rows (rank >= 1), got a scalar", c.in_name(x));
  const LoD* lod = &a.target;
  const char* from = "target_lod";
  if (c.has_in(y)) {
    const LoDTensor& yt = c.in(y);
    if (yt.lod_level() > 0) {
      lod = &yt.lod();
      from = "Y's LoD";
    } else {
      c.check(yt.numel() == (yt.rank() == 0 ? 1 : yt.dim(0)), "Y ('{}') without LoD gives offsets and must be [K] or [K, 1], got {}", c.in_name(y),
              yt.shape());
      LoD& s = kernels::seq_lod_scratch(1);
      s[0].clear();
      c.dispatch(type_list<int32_t, int64_t>{}, yt.dtype(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        const Tensor values = cpu_kernels::place_io::host(c, yt);
        const T* p = values.data<T>();
        for (int64_t i = 0; i < yt.numel(); ++i) {
          c.check(p[i] >= 0, "Y ('{}') has a negative offset {} at {}", c.in_name(y), int64_t(p[i]), i);
          s[0].push_back(size_t(p[i]));
        }
      });
      lod = &s;
      from = "Y's values";
    }
  }
  c.check(!lod->empty(), "needs Y or a target_lod");
  const std::string why = lod_error(*lod, xt.dim(0));  // "" (no allocation) unless the LoD is bad
  c.check(why.empty(), "the LoD from {} does not fit X ('{}') {}: {}", from, c.in_name(x), xt.shape(), why);
  LoDTensor& ot = c.out(out);
  if (&ot != &xt) ot.copy_from(xt);
  ot.set_lod(*lod);
}

/// X@GRAD = Out@GRAD's values with X's LoD.
inline void LoDReset::eval_grad_cpu(KernelContext& c, const Attrs&) {
  if (!c.has_out(x_grad)) return;
  const LoDTensor& xt = c.in(x);
  const LoDTensor& dout = c.in(out_grad);
  c.check(dout.shape() == xt.shape() && dout.dtype() == xt.dtype(), "Out@GRAD {} {} does not match X {} {}", dout.shape(), name(dout.dtype()), xt.shape(),
          name(xt.dtype()));
  LoDTensor& dx = c.out(x_grad);
  if (&dx != &dout) dx.copy_from(dout);
  dx.set_lod(xt.lod());
}

}  // namespace oar::ops
