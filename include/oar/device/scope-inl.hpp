// oar/device/scope-inl.hpp: the implementation of scope.hpp (included by it when header-only; compiled once into liboar otherwise).
#pragma once
#include <algorithm>

#include "oar/device/scope.hpp"

namespace oar {

OAR_FUNC void Value::init(VarKind k) {
  if (!empty()) return;
  switch (k) {
    case VarKind::selected_rows: v_ = SelectedRows(); break;
    case VarKind::feed_minibatch: case VarKind::fetch_list: case VarKind::lod_tensor_array: v_ = TensorList(); break;
    case VarKind::step_scopes: v_ = ScopeList(); break;
    case VarKind::lod_rank_table: v_ = LoDTensor(); break;  // rows (sequence index, length): an i64 tensor [S, 2]
    default: v_ = LoDTensor(); break;
  }
}

OAR_FUNC Value& Scope::var(const std::string& name) {
  auto& p = vars_[name];
  if (!p) p = std::make_unique<Value>();
  return *p;
}

OAR_FUNC Value* Scope::find(const std::string& name) const {
  for (const Scope* s = this; s; s = s->parent_) {
    auto it = s->vars_.find(name);
    if (it != s->vars_.end()) return it->second.get();
  }
  return nullptr;
}

OAR_FUNC LoDTensor& Scope::tensor(const std::string& name) const {
  Value* v = find(name);
  if (!v) throw Error(fmt::format("no variable '{}' in the scope", name));
  return v->tensor();
}

OAR_FUNC std::vector<std::string> Scope::local_names() const {
  std::vector<std::string> out;
  for (auto& [k, v] : vars_) out.push_back(k);
  return out;
}

OAR_FUNC Scope& Scope::new_scope() {
  std::lock_guard lock(kids_mutex_);
  kids_.push_back(std::unique_ptr<Scope>(new Scope(this)));
  return *kids_.back();
}

// The kids go after the lock is given back: their tensors' frees may wait on the device (a graph captured by
// another thread, detail::CaptureGate), and that thread may need a new scope meanwhile.
OAR_FUNC void Scope::drop_kids() {
  std::vector<std::unique_ptr<Scope>> gone;
  {
    std::lock_guard lock(kids_mutex_);
    gone.swap(kids_);
  }
}

OAR_FUNC void Scope::drop(Scope* kid) {
  std::unique_ptr<Scope> gone;
  {
    std::lock_guard lock(kids_mutex_);
    auto it = std::find_if(kids_.begin(), kids_.end(), [&](auto& k) { return k.get() == kid; });
    if (it == kids_.end()) return;
    gone = std::move(*it);
    kids_.erase(it);
  }
}

}  // namespace oar
