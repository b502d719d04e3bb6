// oar/device/scope.hpp: Scope, a tree of name -> Value maps (lookup walks up to the root), and Value, the
// run-time content of a variable (a LoDTensor, SelectedRows, a tensor list, or step scopes).
#pragma once
#include <map>
#include <mutex>
#include <memory>
#include <string>
#include <unordered_map>
#include <variant>
#include <vector>

#include "oar/ir/program.hpp"
#include "oar/device/tensor.hpp"

namespace oar {

class Scope;

/// The run-time content of one variable.
class Value {
 public:
  using TensorList = std::vector<LoDTensor>;
  using ScopeList = std::vector<Scope*>;

  bool empty() const { return std::holds_alternative<std::monostate>(v_); }
  bool is_tensor() const { return std::holds_alternative<LoDTensor>(v_); }
  bool is_selected_rows() const { return std::holds_alternative<SelectedRows>(v_); }
  bool is_list() const { return std::holds_alternative<TensorList>(v_); }
  /// The LoDTensor, or nullptr when the value holds anything else (a kernel's input lookup: no throw, no call).
  const LoDTensor* tensor_if() const { return std::get_if<LoDTensor>(&v_); }
  LoDTensor* tensor_if() { return std::get_if<LoDTensor>(&v_); }

  /// The LoDTensor, created on first use; oar::Error if the value holds something else.
  LoDTensor& tensor() {
    if (empty()) v_ = LoDTensor();
    if (auto* t = std::get_if<LoDTensor>(&v_)) return *t;
    throw Error("variable does not hold a tensor");
  }
  const LoDTensor& tensor() const {
    if (auto* t = std::get_if<LoDTensor>(&v_)) return *t;
    throw Error("variable does not hold a tensor");
  }
  SelectedRows& selected_rows() {
    if (empty()) v_ = SelectedRows();
    if (auto* t = std::get_if<SelectedRows>(&v_)) return *t;
    throw Error("variable does not hold selected rows");
  }
  TensorList& list() {
    if (empty()) v_ = TensorList();
    if (auto* t = std::get_if<TensorList>(&v_)) return *t;
    throw Error("variable does not hold a tensor list");
  }
  ScopeList& scopes() {
    if (empty()) v_ = ScopeList();
    if (auto* t = std::get_if<ScopeList>(&v_)) return *t;
    throw Error("variable does not hold step scopes");
  }
  /// Makes the value the right kind for a VarKind (Fluid creates variables by VarDesc type).
  void init(VarKind k);
  void reset() { v_ = std::monostate(); }

 private:
  std::variant<std::monostate, LoDTensor, SelectedRows, TensorList, ScopeList> v_;
};

/// Name -> Value, with child scopes. `var` creates in this scope; `find` searches this scope then ancestors.
class Scope {
 public:
  Scope() = default;
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

  /// The value `name` of this scope, created when absent.
  Value& var(const std::string& name);
  /// Searches this scope, then its ancestors; nullptr if absent.
  Value* find(const std::string& name) const;
  Value* find_local(const std::string& name) const {
    auto it = vars_.find(name);
    return it == vars_.end() ? nullptr : it->second.get();
  }
  /// The tensor of `name`, searched through ancestors; oar::Error naming the variable when absent.
  LoDTensor& tensor(const std::string& name) const;
  bool erase(const std::string& name) { return vars_.erase(name) != 0; }
  std::vector<std::string> local_names() const;

  /// A child scope. Safe to call from several threads at once (evaluators of one model).
  Scope& new_scope();
  void drop_kids();
  /// Removes one child scope.
  void drop(Scope* kid);
  Scope* parent() const { return parent_; }
  size_t num_kids() const { return kids_.size(); }

 private:
  explicit Scope(Scope* parent) : parent_(parent) {}
  Scope* parent_ = nullptr;
  std::unordered_map<std::string, std::unique_ptr<Value>> vars_;
  std::vector<std::unique_ptr<Scope>> kids_;
  std::mutex kids_mutex_;
};

}  // namespace oar

#if OAR_HEADER_ONLY
#include "oar/device/scope-inl.hpp"
#endif
