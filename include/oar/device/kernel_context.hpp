// oar/device/kernel_context.hpp: what a kernel sees: the device context of the place it runs on, its op's
// inputs and outputs resolved to run-time values once, the op's attributes decoded once into the op's typed
// Attrs, the dtype to dispatch on, and errors that name the op and the user's line.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "oar/config.hpp"
#include "oar/device/cuda.hpp"
#include "oar/device/device_context.hpp"
#include "oar/device/scope.hpp"

namespace oar {

template <class... Ts> struct type_list {};

class KernelContext {
 public:
  /// Resolves every slot of `op` in `scope` (names that are absent resolve to nullptr: an optional slot).
  /// `attrs` points to the op's decoded Attrs (owned by the prepared step).
  KernelContext(const Operator& op, Scope& scope, const DeviceContext& dev, const void* attrs = nullptr);

  const Operator& op() const { return *op_; }
  Scope& scope() const { return *scope_; }
  /// The context of the device the kernel runs on, and its place.
  const DeviceContext& device() const { return *dev_; }
  Place place() const { return place_; }
  const CpuContext& cpu() const { return static_cast<const CpuContext&>(*dev_); }
  const CudaContext& cuda() const { return static_cast<const CudaContext&>(*dev_); }
  /// The op's attributes as decoded at prepare (`A` is the op's Attrs; the registry guarantees the match).
  template <class A> const A& attrs() const { return *static_cast<const A*>(attrs_); }

  bool has_in(Slot slot, size_t i = 0) const { return value(ins_, slot, i) != nullptr; }
  bool has_out(Slot slot, size_t i = 0) const { return value(outs_, slot, i) != nullptr; }
  size_t num_in(Slot slot) const { return count(ins_, slot); }
  size_t num_out(Slot slot) const { return count(outs_, slot); }
  Value* in_value(Slot slot, size_t i = 0) const { return value(ins_, slot, i); }
  Value* out_value(Slot slot, size_t i = 0) const { return value(outs_, slot, i); }

  /// Input tensor `slot`[i]; an oar::Error naming the op when it is missing or was never written.
  const LoDTensor& in(Slot slot, size_t i = 0) const {
    Value* v = value(ins_, slot, i);
    const LoDTensor* t = v ? v->tensor_if() : nullptr;
    if (!t || !t->initialized() || t->place() != place_) [[unlikely]] fail_in(slot, i);
    return *t;
  }
  /// Output tensor `slot`[i], on the kernel's place (resize it before writing).
  LoDTensor& out(Slot slot, size_t i = 0) const {
    Value* v = value(outs_, slot, i);
    if (!v) [[unlikely]] fail_out(slot, i);
    LoDTensor* tp = v->tensor_if();
    LoDTensor& t = tp ? *tp : v->tensor();  // the first run makes the value a tensor
    t.set_place(place_);
    return t;
  }
  /// Input `slot`[i] when the op has it (an optional input), null otherwise.
  const LoDTensor* in_if(Slot slot, size_t i = 0) const { return has_in(slot, i) ? &in(slot, i) : nullptr; }
  /// Output `slot`[i] when the op writes it (a wanted gradient), null otherwise.
  LoDTensor* out_if(Slot slot, size_t i = 0) const { return has_out(slot, i) ? &out(slot, i) : nullptr; }
  const std::string& in_name(Slot slot, size_t i = 0) const { return name_of(ins_, slot, i); }
  const std::string& out_name(Slot slot, size_t i = 0) const { return name_of(outs_, slot, i); }

  /// The dtype kernels dispatch on: the first input tensor's (or f32 for ops without tensor inputs).
  DType dtype() const {
    if (first_in_) [[likely]]
      if (const LoDTensor* t = first_in_->tensor_if(); t && t->initialized()) return t->dtype();
    return first_initialized_dtype();
  }

  /// Calls `f(type_tag<T>{})` for the T in `Ts...` matching `t`; otherwise an oar::Error listing what exists.
  template <class... Ts, class F>
  void dispatch(type_list<Ts...>, DType t, F&& f) const {
    bool done = ((dtype_of<Ts> == t ? (f(type_tag<Ts>{}), true) : false) || ...);
    if (!done) {
      std::string have;
      ((have += (have.empty() ? "" : ", ") + std::string(name(dtype_of<Ts>))), ...);
      fail("no {} kernel on {} for dtype {} (kernels exist for: {})", op_->type(), dev_->place().str(), name(t), have);
    }
  }
  template <class F> void dispatch_float(F&& f) const { dispatch(type_list<float, double>{}, dtype(), std::forward<F>(f)); }

  template <class... Args>
  [[noreturn]] void fail(fmt::format_string<Args...> f, Args&&... args) const {
    throw Error(fmt::format("{}: {}", op_->type(), fmt::format(f, std::forward<Args>(args)...)), op_->origin());
  }
  template <class... Args>
  void check(bool cond, fmt::format_string<Args...> f, Args&&... args) const {
    if (!cond) [[unlikely]] fail(f, std::forward<Args>(args)...);
  }

 private:
  struct Resolved {
    uint64_t key;  // Slot::hash of the slot's name
    const std::string* slot;
    const std::vector<std::string>* names;
    std::vector<Value*> vals;
  };
  void resolve(const std::vector<SlotArgs>& slots, std::vector<Resolved>& out);
  // By hash alone: the registry's slot names hash apart (tested), so an equal key is the same name.
  static const Resolved* find(const std::vector<Resolved>& v, Slot slot) {
    for (auto& r : v)
      if (r.key == slot.key) return &r;
    return nullptr;
  }
  static Value* value(const std::vector<Resolved>& v, Slot slot, size_t i) {
    const Resolved* r = find(v, slot);
    return r && i < r->vals.size() ? r->vals[i] : nullptr;
  }
  static size_t count(const std::vector<Resolved>& v, Slot slot) {
    const Resolved* r = find(v, slot);
    return r ? r->vals.size() : 0;
  }
  // The failure paths of in() / out(), out of line so that the lookups inline into every kernel.
  [[noreturn, gnu::cold, gnu::noinline]] void fail_in(Slot slot, size_t i) const;
  [[noreturn, gnu::cold, gnu::noinline]] void fail_out(Slot slot, size_t i) const;
  DType first_initialized_dtype() const;
  /// The variable name of `slot`[i], or "<none>" (error texts).
  static const std::string& name_of(const std::vector<Resolved>& v, Slot slot, size_t i);
  // kEmptyVarName lives in ops/op.hpp; repeat the literal to keep runtime free of ops headers here.
  static constexpr const char* kEmptyVarName = "@EMPTY@";

  const Operator* op_;
  Scope* scope_;
  const DeviceContext* dev_;
  Place place_;
  const void* attrs_;
  std::vector<Resolved> ins_, outs_;
  Value* first_in_ = nullptr;  // the first input value: where dtype() looks first
};

}  // namespace oar

#if OAR_HEADER_ONLY
#include "oar/device/kernel_context-inl.hpp"
#endif
