// oar/runtime/kernel_registry.hpp: kernels by (op type, place), built on first use from the op list: an op's
// eval_cpu serves `<op>`, its eval_grad_cpu serves `<op>_grad`. The kernel picks the dtype (KernelContext::dispatch).
#pragma once
#include <unordered_map>

// With OAR_SEPARATE_KERNELS (below) only the one translation unit that compiles the kernels parses them.
#if !defined(OAR_SEPARATE_KERNELS) || defined(OAR_KERNELS_IMPLEMENTATION)
#include "kernels/cpu/all.hpp"
#endif
#include "oar/ops/registry.hpp"
#include "oar/runtime/kernel_context.hpp"
#include "oar/runtime/tensor.hpp"
#include "oar/runtime/thread_pool.hpp"

namespace oar {

using KernelFn = void (*)(KernelContext&);

struct KernelEntry {
  KernelFn cpu = nullptr;
  KernelFn cuda = nullptr;
};

class KernelRegistry {
 public:
  static const KernelRegistry& instance();
  const KernelEntry* find(const std::string& type) const {
    auto it = kernels_.find(type);
    return it == kernels_.end() ? nullptr : &it->second;
  }
  /// The kernel of `type` on `place`; an oar::Error naming the op, the place and what exists.
  KernelFn get(const std::string& type, const Place& place, const Origin& origin = {}) const {
    const KernelEntry* e = find(type);
    KernelFn f = e ? (place.is_cpu() ? e->cpu : e->cuda) : nullptr;
    if (f) return f;
    std::string have;
    if (e && e->cpu) have += "cpu";
    if (e && e->cuda) have += have.empty() ? "cuda" : ", cuda";
    throw Error(fmt::format("no kernel for op '{}' on {} (kernels exist for: {})", type, place.str(), have.empty() ? "none" : have), origin);
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
    std::string type = Op::def().type;
    if constexpr (requires(KernelContext& c) { Op::eval_cpu(c); }) kernels_[type].cpu = &Op::eval_cpu;
    if constexpr (requires(KernelContext& c) { Op::eval_grad_cpu(c); }) kernels_[type + "_grad"].cpu = &Op::eval_grad_cpu;
  });
}
#undef OAR_KERNEL_REGISTRY_LINKAGE
#endif

}  // namespace oar
