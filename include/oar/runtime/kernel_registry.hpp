// oar/runtime/kernel_registry.hpp: kernels by (op type, place), built on first use from the op list: an op's
// eval_cpu serves `<op>`, its eval_grad_cpu serves `<op>_grad`. The kernel picks the dtype (KernelContext::dispatch).
#pragma once
#include <unordered_map>

#include "kernels/cpu/all.hpp"
#include "oar/ops/registry.hpp"

namespace oar {

using KernelFn = void (*)(KernelContext&);

struct KernelEntry {
  KernelFn cpu = nullptr;
  KernelFn cuda = nullptr;
};

class KernelRegistry {
 public:
  static const KernelRegistry& instance() {
    static const KernelRegistry r;
    return r;
  }
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
  KernelRegistry() {
    for_each_op(AllOps{}, [&]<class Op>() {
      std::string type = Op::def().type;
      if constexpr (requires(KernelContext& c) { Op::eval_cpu(c); }) kernels_[type].cpu = &Op::eval_cpu;
      if constexpr (requires(KernelContext& c) { Op::eval_grad_cpu(c); }) kernels_[type + "_grad"].cpu = &Op::eval_grad_cpu;
    });
  }
  std::unordered_map<std::string, KernelEntry> kernels_;
};

}  // namespace oar
