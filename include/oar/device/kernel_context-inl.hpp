// oar/device/kernel_context-inl.hpp: the implementation of kernel_context.hpp (included by it when header-only; compiled once into liboar otherwise).
#pragma once
#include "oar/device/kernel_context.hpp"

namespace oar {

OAR_FUNC KernelContext::KernelContext(const Operator& op, Scope& scope, const DeviceContext& dev, const void* attrs)
    : op_(&op), scope_(&scope), dev_(&dev), place_(dev.place()), attrs_(attrs) {
  resolve(op.inputs(), ins_);
  resolve(op.outputs(), outs_);
}

OAR_FUNC void KernelContext::resolve(const std::vector<SlotArgs>& slots, std::vector<Resolved>& out) {
  for (auto& s : slots) {
    Resolved r{&s.slot, &s.args, {}};
    for (auto& n : s.args) r.vals.push_back(n == kEmptyVarName ? nullptr : scope_->find(n));
    out.push_back(std::move(r));
  }
}

OAR_FUNC const std::string& KernelContext::name_of(const std::vector<Resolved>& v, std::string_view slot, size_t i) {
  static const std::string none = "<none>";
  for (auto& r : v)
    if (*r.slot == slot && i < r.names->size()) return (*r.names)[i];
  return none;
}

}  // namespace oar
