// kernels/cpu/one_hot.hpp: one_hot on the CPU.
#pragma once
#include "kernels/cpu/gather.hpp"
#include "oar/ops/one_hot.hpp"
#include "oar/runtime/kernel_context.hpp"

namespace oar::ops {

inline void OneHot::eval_cpu(KernelContext& c) {
  const LoDTensor& x = c.in("X");
  const int64_t depth = c.attr<int32_t>("depth");
  c.check(x.rank() >= 1 && x.dim(x.rank() - 1) == 1, "X must end in a dim of 1 ([N, 1]), got {}", x.shape());
  auto idx = cpu_kernels::checked_indices(c, x, depth, "X", fmt::format("depth = {}", depth).c_str());
  Shape os = x.shape();
  os[os.rank() - 1] = depth;
  DType t = DType(c.attr<int32_t>("dtype"));
  LoDTensor& out = c.out("Out");
  c.dispatch(type_list<float, double, int32_t, int64_t>{}, t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    out.resize(os, t);
    T* p = out.data<T>();
    std::fill_n(p, out.numel(), T(0));
    for (size_t i = 0; i < idx.size(); ++i) p[int64_t(i) * depth + idx[i]] = T(1);
  });
  out.set_lod(x.lod());
}

}  // namespace oar::ops
