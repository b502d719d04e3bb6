// oar/runtime/kernel_registry.hpp: kernels by (op type, device kind), built on first use from the op list: an
// op's eval_cpu / eval_cuda serve `<op>`, its eval_grad_cpu / eval_grad_cuda serve `<op>_grad`; each takes the
// KernelContext and the op's decoded Attrs. The kernel picks the dtype (KernelContext::dispatch).
#pragma once
#include <memory>
#include <unordered_map>

// With OAR_SEPARATE_KERNELS (below) only the one translation unit that compiles the kernels parses them.
#if !defined(OAR_SEPARATE_KERNELS) || defined(OAR_KERNELS_IMPLEMENTATION)
#include "kernels/cpu/all.hpp"
#endif
#include "oar/ops/registry.hpp"
#include "oar/device/kernel_context.hpp"
#include "oar/device/tensor.hpp"
#include "oar/device/thread_pool.hpp"

namespace oar {

using KernelFn = void (*)(KernelContext&);
/// Decodes an op's attributes into its typed Attrs (owned by the returned pointer).
using AttrsFn = std::shared_ptr<const void> (*)(const Operator&, const OpDef*);

/// The kernels of one op type, one per device kind, and how to decode the attributes they read.
struct KernelEntry {
  KernelFn cpu = nullptr;
  KernelFn cuda = nullptr;
  AttrsFn attrs = nullptr;
  KernelFn on(const Place& p) const { return p.is_cpu() ? cpu : cuda; }
  /// "cpu, cuda": the places that have a kernel (error texts).
  std::string places() const {
    std::string have;
    if (cpu) have += "cpu";
    if (cuda) have += have.empty() ? "cuda" : ", cuda";
    return have.empty() ? "none" : have;
  }
};

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
#endif

}  // namespace detail

class KernelRegistry {
 public:
  static const KernelRegistry& instance();
  const KernelEntry* find(std::string_view type) const {
    auto it = kernels_.find(std::string(type));
    return it == kernels_.end() ? nullptr : &it->second;
  }
  /// The kernels of `type` with `place` among them; an oar::Error naming the op, the user's line, the place
  /// and the places that op has kernels for.
  const KernelEntry& get(const std::string& type, const Place& place, const Origin& origin = {}) const {
    const KernelEntry* e = find(type);
    if (e && e->on(place)) return *e;
    throw Error(fmt::format("no kernel for op '{}' on {} (kernels exist for: {})", type, place.str(), e ? e->places() : std::string("none")), origin);
  }

 private:
  KernelRegistry();
  std::unordered_map<std::string, KernelEntry> kernels_;
};

// Header-only by default: every translation unit that runs programs compiles the kernels. A project with
// many such translation units may define OAR_SEPARATE_KERNELS everywhere and OAR_KERNELS_IMPLEMENTATION in
// exactly one of them (before including oar), which then compiles the kernels once (the tests do this).
#if !defined(OAR_SEPARATE_KERNELS)
#define OAR_KERNEL_REGISTRY_LINKAGE inline
#elif defined(OAR_KERNELS_IMPLEMENTATION)
#define OAR_KERNEL_REGISTRY_LINKAGE
#endif

#if defined(OAR_KERNEL_REGISTRY_LINKAGE)
OAR_KERNEL_REGISTRY_LINKAGE const KernelRegistry& KernelRegistry::instance() {
  static const KernelRegistry r;
  return r;
}

OAR_KERNEL_REGISTRY_LINKAGE KernelRegistry::KernelRegistry() {
  for_each_op(AllOps{}, [&]<class Op>() {
    using A = typename detail::attrs_of<Op>::type;
    std::string type = Op::def().type;
    KernelEntry fwd, grad;
    fwd.attrs = grad.attrs = &detail::decode_attrs<Op>;
    if constexpr (requires(KernelContext& c, const A& a) { Op::eval_cpu(c, a); }) fwd.cpu = &detail::run_cpu<Op>;
    else if constexpr (requires(KernelContext& c) { Op::eval_cpu(c); }) fwd.cpu = &Op::eval_cpu;
    if constexpr (requires(KernelContext& c, const A& a) { Op::eval_grad_cpu(c, a); }) grad.cpu = &detail::run_grad_cpu<Op>;
    else if constexpr (requires(KernelContext& c) { Op::eval_grad_cpu(c); }) grad.cpu = &Op::eval_grad_cpu;
#if OAR_WITH_CUDA
    if constexpr (requires(KernelContext& c, const A& a) { Op::eval_cuda(c, a); }) fwd.cuda = &detail::run_cuda<Op>;
    if constexpr (requires(KernelContext& c, const A& a) { Op::eval_grad_cuda(c, a); }) grad.cuda = &detail::run_grad_cuda<Op>;
#endif
    if (fwd.cpu || fwd.cuda) kernels_[type] = fwd;
    if (grad.cpu || grad.cuda) kernels_[type + "_grad"] = grad;
  });
}
#undef OAR_KERNEL_REGISTRY_LINKAGE
#endif

}  // namespace oar
