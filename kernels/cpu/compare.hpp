// kernels/cpu/compare.hpp: the comparison and logical ops on the CPU. The comparisons walk Y's broadcast over X
// with the element-wise binary ops' launcher (kernels/cpu/elementwise_binary.hpp).
#pragma once
#include <functional>

#include "kernels/common/compare.hpp"
#include "kernels/cpu/elementwise_binary.hpp"
#include "oar/device/kernel_context.hpp"
#include "oar/device/thread_pool.hpp"
#include "oar/ops/compare.hpp"

namespace oar::cpu_kernels {

/// out[i] = Cmp{}(x[i], y[j]) with Y broadcast over X. requires: Out is neither X nor Y (it is bool, they are not).
template <class Cmp>
void compare(KernelContext& c, const ops::CompareOp::Attrs& a) {
  const kernels::ComparePlan p = kernels::compare_plan(c, a);
  c.dispatch(type_list<int32_t, int64_t, float, double>{}, p.x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* px = p.x.data<T>();
    const T* py = p.y.data<T>();
    bool* po = p.out.data<bool>();
    detail::for_each_broadcast(p.b, [&](int64_t i, int64_t j) { po[i] = Cmp{}(px[i], py[j]); });
  });
  p.out.set_lod(p.x.lod());
}

/// out[i] = F{}(x[i], y[i]) over bool tensors of one shape. In-place allowed (Out == X or Y).
template <class F>
void logical(KernelContext& c) {
  const kernels::LogicalPlan p = kernels::logical_plan(c);
  const bool* px = p.x.data<bool>();
  const bool* py = p.y.data<bool>();
  bool* po = p.out.data<bool>();
  parallel_for(0, p.x.numel(), 1 << 15, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) po[i] = F{}(px[i], py[i]);
  });
  if (&p.out != &p.x) p.out.set_lod(p.x.lod());
}

}  // namespace oar::cpu_kernels

namespace oar::ops {

#define OAR_DEFINE_COMPARE_KERNEL(op_type, Op, Functor) \
  inline void Op::eval_cpu(KernelContext& c, const Attrs& a) { cpu_kernels::compare<Functor>(c, a); }
OAR_COMPARE_OPS(OAR_DEFINE_COMPARE_KERNEL)
#undef OAR_DEFINE_COMPARE_KERNEL

#define OAR_DEFINE_LOGICAL_KERNEL(op_type, Op, Functor) \
  inline void Op::eval_cpu(KernelContext& c, const NoAttrs&) { cpu_kernels::logical<Functor>(c); }
OAR_LOGICAL_BINARY_OPS(OAR_DEFINE_LOGICAL_KERNEL)
#undef OAR_DEFINE_LOGICAL_KERNEL

/// In-place allowed (Out == X).
inline void LogicalNot::eval_cpu(KernelContext& c, const NoAttrs&) {
  const LoDTensor& xt = c.in(x);
  c.check(xt.dtype() == DType::boolean, "X ('{}') must be bool, got {}", c.in_name(x), name(xt.dtype()));
  LoDTensor& ot = c.out(out);
  if (&ot != &xt) ot.resize(xt.shape(), DType::boolean);
  const bool* px = xt.data<bool>();
  bool* po = ot.data<bool>();
  parallel_for(0, xt.numel(), 1 << 15, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) po[i] = !px[i];
  });
  if (&ot != &xt) ot.set_lod(xt.lod());
}

}  // namespace oar::ops
