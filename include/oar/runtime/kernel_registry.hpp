// oar/runtime/kernel_registry.hpp: kernels by (op type, device kind), built on first use from the op list: an
// op's eval_cpu / eval_cuda serve `<op>`, its eval_grad_cpu / eval_grad_cuda serve `<op>_grad`; each takes the
// KernelContext and the op's decoded Attrs. The kernel picks the dtype (KernelContext::dispatch). An op with
// `static constexpr bool any_place = true;` has kernels that never touch tensor memory on the host (views, whole
// copies, copies through the place): its eval_cpu / eval_grad_cpu serve CUDA too.
// Only runtime/kernel_registry-inl.hpp sees the op list and the kernels: compiled, they are built once, in liboar.
#pragma once
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>

#include "oar/config.hpp"
#include "oar/device/kernel_context.hpp"

namespace oar {

struct OpDef;

using KernelFn = void (*)(KernelContext&);
/// The kernel of several consecutive ops of one type with equal attributes, run as one (on CUDA the update
/// ops: one launch for every parameter instead of one per parameter). Each context is one op's.
using GroupFn = void (*)(std::span<KernelContext* const>);
/// Decodes an op's attributes into its typed Attrs (owned by the returned pointer).
using AttrsFn = std::shared_ptr<const void> (*)(const Operator&, const OpDef*);

/// The kernels of one op type, one per device kind, and how to decode the attributes they read.
struct KernelEntry {
  KernelFn cpu = nullptr;
  KernelFn cuda = nullptr;
  GroupFn cuda_group = nullptr;  ///< eval_cuda_group, where the op has one
  AttrsFn attrs = nullptr;
  KernelFn on(const Place& p) const { return p.is_cpu() ? cpu : cuda; }
  /// "cpu, cuda": the places that have a kernel (error texts).
  std::string places() const;
};

class KernelRegistry {
 public:
  static const KernelRegistry& instance();
  const KernelEntry* find(std::string_view type) const;
  /// The kernels of `type` with `place` among them; an oar::Error naming the op, the user's line, the place
  /// and the places that op has kernels for.
  const KernelEntry& get(const std::string& type, const Place& place, const Origin& origin = {}) const;

 private:
  KernelRegistry();
  std::unordered_map<std::string, KernelEntry> kernels_;
};

}  // namespace oar

#if OAR_HEADER_ONLY
#include "oar/runtime/kernel_registry-inl.hpp"
#endif
