// oar/runtime/kernel_registry-inl.hpp: the implementation of kernel_registry.hpp (included by it when header-only; compiled once into liboar otherwise).
#pragma once
#include "oar/runtime/kernel_registry.hpp"

#if OAR_HEADER_ONLY
#include "kernels/cpu/all.hpp"  // liboar: src/kernels.cpp includes them
#if OAR_WITH_CUDA
#include "kernels/cuda/all.hpp"
#endif
#endif
#include "oar/ops/op.hpp"
#include "oar/ops/op_list.hpp"

namespace oar {

namespace detail {

/// The op's Attrs type: its own `Attrs`, or NoAttrs.
template <class Op> struct attrs_of { using type = NoAttrs; };
template <class Op> requires requires { typename Op::Attrs; } struct attrs_of<Op> { using type = typename Op::Attrs; };

template <class Op>
std::shared_ptr<const void> decode_attrs(const Operator& op, const OpDef* def) {
  return std::make_shared<const typename attrs_of<Op>::type>(AttrReader(op, def));
}

// A kernel is `eval_<device>(KernelContext&, const Attrs&)`; the adapters below turn each into a KernelFn.
template <class Op> void run_cpu(KernelContext& c) { Op::eval_cpu(c, c.attrs<typename attrs_of<Op>::type>()); }
template <class Op> void run_grad_cpu(KernelContext& c) { Op::eval_grad_cpu(c, c.attrs<typename attrs_of<Op>::type>()); }
#if OAR_WITH_CUDA
template <class Op> void run_cuda(KernelContext& c) { Op::eval_cuda(c, c.attrs<typename attrs_of<Op>::type>()); }
template <class Op> void run_grad_cuda(KernelContext& c) { Op::eval_grad_cuda(c, c.attrs<typename attrs_of<Op>::type>()); }
template <class Op> void run_cuda_group(std::span<KernelContext* const> cs) { Op::eval_cuda_group(cs, cs[0]->attrs<typename attrs_of<Op>::type>()); }
#endif

}  // namespace detail

OAR_FUNC std::string KernelEntry::places() const {
  std::string have;
  if (cpu) have += "cpu";
  if (cuda) have += have.empty() ? "cuda" : ", cuda";
  return have.empty() ? "none" : have;
}

OAR_FUNC const KernelRegistry& KernelRegistry::instance() {
  static const KernelRegistry r;
  return r;
}

OAR_FUNC KernelRegistry::KernelRegistry() {
  for_each_op(AllOps{}, [&]<class Op>() {
    using A = typename detail::attrs_of<Op>::type;
    std::string type = Op::def().type;
    KernelEntry fwd, grad;
    fwd.attrs = grad.attrs = &detail::decode_attrs<Op>;
    if constexpr (requires(KernelContext& c, const A& a) { Op::eval_cpu(c, a); }) fwd.cpu = &detail::run_cpu<Op>;
    else if constexpr (requires(KernelContext& c) { Op::eval_cpu(c); }) fwd.cpu = &Op::eval_cpu;
    if constexpr (requires(KernelContext& c, const A& a) { Op::eval_grad_cpu(c, a); }) grad.cpu = &detail::run_grad_cpu<Op>;
    else if constexpr (requires(KernelContext& c) { Op::eval_grad_cpu(c); }) grad.cpu = &Op::eval_grad_cpu;
    // NOTE: a kernel declared with another parameter type (NoAttrs for an op that has Attrs) would match
    // neither form above and be left out without a word, to fail only when a program runs.
    static_assert(!requires { &Op::eval_cpu; } || requires(KernelContext& c, const A& a) { Op::eval_cpu(c, a); } ||
                      requires(KernelContext& c) { Op::eval_cpu(c); },
                  "eval_cpu must take (KernelContext&, const Op::Attrs&), or const NoAttrs& for an op without Attrs");
    static_assert(!requires { &Op::eval_grad_cpu; } || requires(KernelContext& c, const A& a) { Op::eval_grad_cpu(c, a); } ||
                      requires(KernelContext& c) { Op::eval_grad_cpu(c); },
                  "eval_grad_cpu must take (KernelContext&, const Op::Attrs&), or const NoAttrs& for an op without Attrs");
#if OAR_WITH_CUDA
    if constexpr (requires(KernelContext& c, const A& a) { Op::eval_cuda(c, a); }) fwd.cuda = &detail::run_cuda<Op>;
    if constexpr (requires(KernelContext& c, const A& a) { Op::eval_grad_cuda(c, a); }) grad.cuda = &detail::run_grad_cuda<Op>;
    if constexpr (requires(std::span<KernelContext* const> cs, const A& a) { Op::eval_cuda_group(cs, a); }) fwd.cuda_group = &detail::run_cuda_group<Op>;
    // An op whose kernels only make views, copy whole tensors or copy through KernelContext's place serves
    // every place with its one set of kernels (it says so: `static constexpr bool any_place = true;`).
    if constexpr (requires { requires Op::any_place; }) {
      fwd.cuda = fwd.cpu;
      grad.cuda = grad.cpu;
    }
#endif
    if (fwd.cpu || fwd.cuda) kernels_[type] = fwd;
    if (grad.cpu || grad.cuda) kernels_[type + "_grad"] = grad;
  });
}

OAR_FUNC const KernelEntry* KernelRegistry::find(std::string_view type) const {
  auto it = kernels_.find(std::string(type));
  return it == kernels_.end() ? nullptr : &it->second;
}

OAR_FUNC const KernelEntry& KernelRegistry::get(const std::string& type, const Place& place, const Origin& origin) const {
  const KernelEntry* e = find(type);
  if (e && e->on(place)) return *e;
  throw Error(fmt::format("no kernel for op '{}' on {} (kernels exist for: {})", type, place.str(), e ? e->places() : std::string("none")), origin);
}

}  // namespace oar
