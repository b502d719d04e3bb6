// kernels/cpu/one_hot.hpp: one_hot on the CPU.
#pragma once
#include "kernels/cpu/gather.hpp"
#include "oar/ops/one_hot.hpp"
#include "oar/device/kernel_context.hpp"

namespace oar::ops {

inline void OneHot::eval_cpu(KernelContext& c, const Attrs& a) {
  const LoDTensor& xt = c.in(x);
  const int64_t dep = a.depth;
  c.check(xt.rank() >= 1 && xt.dim(xt.rank() - 1) == 1, "X must end in a dim of 1 ([N, 1]), got {}", xt.shape());
  auto idx = cpu_kernels::checked_indices(c, xt, dep, x, [&] { return fmt::format("depth = {}", dep); });
  Shape os = xt.shape();
  os[os.rank() - 1] = dep;
  const DType t = a.dtype;
  LoDTensor& ot = c.out(out);
  c.dispatch(type_list<float, double, int32_t, int64_t>{}, t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    ot.resize(os, t);
    T* p = ot.data<T>();
    std::fill_n(p, ot.numel(), T(0));
    for (size_t i = 0; i < idx.size(); ++i) p[int64_t(i) * dep + idx[i]] = T(1);
  });
  ot.set_lod(xt.lod());
}

}  // namespace oar::ops
