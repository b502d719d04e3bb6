// oar/device/kernel_context-inl.hpp: the implementation of kernel_context.hpp (included by it when header-only; compiled once into liboar otherwise).
#pragma once
#include "oar/device/kernel_context.hpp"

namespace oar {

OAR_FUNC KernelContext::KernelContext(const Operator& op, Scope& scope, const DeviceContext& dev, const void* attrs)
    : op_(&op), scope_(&scope), dev_(&dev), place_(dev.place()), attrs_(attrs) {
  resolve(op.inputs(), ins_);
  resolve(op.outputs(), outs_);
  for (auto& r : ins_)
    for (Value* v : r.vals)
      if (v && !first_in_) first_in_ = v;
}

OAR_FUNC void KernelContext::fail_in(Slot slot, size_t i) const {
  Value* v = value(ins_, slot, i);
  if (!v) fail("input {}[{}] is missing", slot.name, i);
  const LoDTensor* t = v->tensor_if();
  if (!t) fail("input {} ('{}') holds no tensor", slot.name, name_of(ins_, slot, i));
  if (!t->initialized()) fail("input {} ('{}') has no value yet (never fed or computed)", slot.name, name_of(ins_, slot, i));
  fail("input {} ('{}') lives on {}, but the op runs on {} (move the model's variables with the Model's place)", slot.name, name_of(ins_, slot, i),
       t->place().str(), place_.str());
}

OAR_FUNC void KernelContext::fail_out(Slot slot, size_t i) const { fail("output {}[{}] is missing", slot.name, i); }

OAR_FUNC DType KernelContext::first_initialized_dtype() const {
  for (auto& s : ins_)
    for (auto* v : s.vals)
      if (v && v->is_tensor() && v->tensor().initialized()) return v->tensor().dtype();
  return DType::f32;
}

OAR_FUNC void KernelContext::resolve(const std::vector<SlotArgs>& slots, std::vector<Resolved>& out) {
  for (auto& s : slots) {
    Resolved r{Slot::hash(s.slot), &s.slot, &s.args, {}};
    for (auto& n : s.args) r.vals.push_back(n == kEmptyVarName ? nullptr : scope_->find(n));
    out.push_back(std::move(r));
  }
}

OAR_FUNC const std::string& KernelContext::name_of(const std::vector<Resolved>& v, Slot slot, size_t i) {
  static const std::string none = "<none>";
  const Resolved* r = find(v, slot);
  return r && i < r->names->size() ? (*r->names)[i] : none;
}

}  // namespace oar
