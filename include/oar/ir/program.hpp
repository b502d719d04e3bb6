// oar/ir/program.hpp: the compile-time description: Program -> Block -> Operator / Variable / Parameter.
// Plain C++ objects mirroring framework.proto one to one; ir/serialize.hpp converts them to and from the wire.
#pragma once
#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "oar/config.hpp"
#include "oar/core/dtype.hpp"
#include "oar/core/error.hpp"
#include "oar/core/shape.hpp"
#include "oar/ir/attribute.hpp"

namespace oar {

class Block;
class Program;
class Operator;

/// Fluid's VarType.Type values for non-tensor variable kinds.
enum class VarKind : int32_t {
  lod_tensor = 7, selected_rows = 8, feed_minibatch = 9, fetch_list = 10, step_scopes = 11,
  lod_rank_table = 12, lod_tensor_array = 13, place_list = 14, reader = 15, raw = 17,
};

/// What a parameter carries besides its tensor description (not serialized by Fluid: a loaded program's
/// parameters are plain persistable variables, as in Fluid).
struct ParamInfo {
  bool trainable = true;
  std::string initializer;        ///< e.g. "xavier_uniform", "constant(0)"
  float learning_rate = 1.0f;     ///< scale of the optimizer's learning rate
  std::string regularizer;        ///< "", "l1" or "l2"
  double regularizer_coeff = 0;
  std::string gradient_clip;      ///< "", "value" (to [clip_a, clip_b]), "norm" (clip_a), "global_norm" (clip_a)
  double clip_a = 0, clip_b = 0;
};

/// A named variable of a block: kind, dtype, shape (-1 unknown), lod_level, persistable.
class Variable {
 public:
  Variable(std::string name, VarKind kind = VarKind::lod_tensor) : name_(std::move(name)), kind_(kind) {}

  const std::string& name() const { return name_; }
  VarKind kind() const { return kind_; }
  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int lod_level() const { return lod_level_; }
  bool persistable() const { return persistable_; }
  bool stop_gradient() const { return stop_gradient_; }
  bool is_parameter() const { return param_.has_value(); }
  const ParamInfo* param() const { return param_ ? &*param_ : nullptr; }
  ParamInfo* param() { return param_ ? &*param_ : nullptr; }
  /// The op that last wrote this variable (nullptr for data, parameters in the main program, ...).
  const Operator* writer() const { return writer_; }
  /// Where the user created it (a data layer's line); not serialized.
  const Origin& origin() const { return origin_; }
  Variable& set_origin(Origin o) { origin_ = std::move(o); return *this; }

  Variable& set_kind(VarKind k) { kind_ = k; return *this; }
  Variable& set_dtype(DType t) { dtype_ = t; return *this; }
  Variable& set_shape(Shape s) { shape_ = std::move(s); return *this; }
  Variable& set_lod_level(int l) { lod_level_ = l; return *this; }
  Variable& set_persistable(bool p) { persistable_ = p; return *this; }
  Variable& set_stop_gradient(bool s) { stop_gradient_ = s; return *this; }
  Variable& set_param(ParamInfo p) { param_ = std::move(p); persistable_ = true; return *this; }
  void set_writer(const Operator* op) { writer_ = op; }

  bool is_tensor() const { return kind_ == VarKind::lod_tensor || kind_ == VarKind::selected_rows; }

 private:
  std::string name_;
  VarKind kind_;
  DType dtype_ = DType::f32;
  Shape shape_;
  int lod_level_ = 0;
  bool persistable_ = false;
  bool stop_gradient_ = false;
  std::optional<ParamInfo> param_;
  const Operator* writer_ = nullptr;
  Origin origin_;
};

/// A variable that is a parameter: always in the global block, persistable, with ParamInfo.
using Parameter = Variable;

/// One slot of an op: the slot name ("X") and the names of the variables bound to it.
struct SlotArgs {
  std::string slot;
  std::vector<std::string> args;
  friend bool operator==(const SlotArgs&, const SlotArgs&) = default;
};

/// An operator description: type, inputs and outputs by slot, attributes, and where the user created it.
class Operator {
 public:
  Operator() = default;
  explicit Operator(std::string type) : type_(std::move(type)) {}

  const std::string& type() const { return type_; }
  void set_type(std::string t) { type_ = std::move(t); }
  const std::vector<SlotArgs>& inputs() const { return inputs_; }
  const std::vector<SlotArgs>& outputs() const { return outputs_; }
  std::vector<SlotArgs>& mutable_inputs() { return inputs_; }
  std::vector<SlotArgs>& mutable_outputs() { return outputs_; }

  /// Names bound to slot `slot` (empty if the slot is absent).
  const std::vector<std::string>& input(std::string_view slot) const { return find(inputs_, slot); }
  const std::vector<std::string>& output(std::string_view slot) const { return find(outputs_, slot); }
  bool has_input(std::string_view slot) const { return !input(slot).empty(); }
  bool has_output(std::string_view slot) const { return !output(slot).empty(); }
  Operator& set_input(std::string slot, std::vector<std::string> args) { set(inputs_, std::move(slot), std::move(args)); return *this; }
  Operator& set_output(std::string slot, std::vector<std::string> args) { set(outputs_, std::move(slot), std::move(args)); return *this; }
  std::vector<std::string> input_names() const { return all(inputs_); }
  std::vector<std::string> output_names() const { return all(outputs_); }
  void rename_input(const std::string& from, const std::string& to) { rename(inputs_, from, to); }
  void rename_output(const std::string& from, const std::string& to) { rename(outputs_, from, to); }

  /// Attributes by name (ordered; looked up by string_view without building a std::string).
  using AttrMap = std::map<std::string, Attribute, std::less<>>;
  const AttrMap& attrs() const { return attrs_; }
  bool has_attr(std::string_view n) const { return attrs_.find(n) != attrs_.end(); }
  const Attribute& attr(std::string_view n) const {
    auto it = attrs_.find(n);
    if (it == attrs_.end()) throw Error(fmt::format("op '{}' has no attribute '{}'", type_, n), origin_);
    return it->second;
  }
  template <class T> T attr(std::string_view n) const { return attr_as<T>(attr(n), n); }
  template <class T> T attr_or(std::string_view n, T dflt) const { return has_attr(n) ? attr<T>(n) : dflt; }
  template <class V> Operator& set_attr(const std::string& n, V v) { attrs_[n] = to_attribute(std::move(v)); return *this; }
  /// Typed access through an op's attribute constant: `op.attr(Conv2d::groups)` is an int32_t.
  template <class T> T attr(Attr<T> a) const { return attr<T>(a.name); }
  template <class T> T attr_or(Attr<T> a, T dflt) const { return attr_or<T>(a.name, std::move(dflt)); }
  template <class T, class V> Operator& set_attr(Attr<T> a, V v) {
    attrs_[std::string(a.name)] = Attribute(T(std::move(v)));
    return *this;
  }
  void remove_attr(std::string_view n) {
    if (auto it = attrs_.find(n); it != attrs_.end()) attrs_.erase(it);
  }
  /// The sub-block index of a control-flow op (its `sub_block` attribute), or -1.
  int sub_block() const {
    auto it = attrs_.find(common::sub_block.name);
    return it == attrs_.end() ? -1 : std::get<BlockRef>(it->second).idx;
  }

  bool is_target() const { return is_target_; }
  void set_is_target(bool t) { is_target_ = t; }
  const Origin& origin() const { return origin_; }
  void set_origin(Origin o) { origin_ = std::move(o); }

  friend bool operator==(const Operator& a, const Operator& b) {
    return a.type_ == b.type_ && a.inputs_ == b.inputs_ && a.outputs_ == b.outputs_ && a.attrs_ == b.attrs_ && a.is_target_ == b.is_target_;
  }

 private:
  static const std::vector<std::string>& find(const std::vector<SlotArgs>& v, std::string_view slot) {
    static const std::vector<std::string> none;
    for (auto& s : v) if (s.slot == slot) return s.args;
    return none;
  }
  static void set(std::vector<SlotArgs>& v, std::string slot, std::vector<std::string> args) {
    for (auto& s : v) if (s.slot == slot) { s.args = std::move(args); return; }
    v.push_back({std::move(slot), std::move(args)});
  }
  static std::vector<std::string> all(const std::vector<SlotArgs>& v) {
    std::vector<std::string> out;
    for (auto& s : v) out.insert(out.end(), s.args.begin(), s.args.end());
    return out;
  }
  static void rename(std::vector<SlotArgs>& v, const std::string& from, const std::string& to) {
    for (auto& s : v) for (auto& a : s.args) if (a == from) a = to;
  }

  std::string type_;
  std::vector<SlotArgs> inputs_, outputs_;
  AttrMap attrs_;
  bool is_target_ = false;
  Origin origin_;
};

/// Fields of a new variable; unset fields leave an existing variable as it is.
struct VarSpec {
  std::optional<DType> dtype;
  std::optional<Shape> shape;
  std::optional<int> lod_level;
  std::optional<bool> persistable;
  std::optional<bool> stop_gradient;
  VarKind kind = VarKind::lod_tensor;
};

/// A block: variables and an ordered op list; knows its parent block (-1 for the global block).
class Block {
 public:
  Block(Program* program, int idx, int parent_idx) : program_(program), idx_(idx), parent_idx_(parent_idx) {}
  Block(const Block&) = delete;
  Block& operator=(const Block&) = delete;

  int idx() const { return idx_; }
  int parent_idx() const { return parent_idx_; }
  int forward_block_idx() const { return forward_block_idx_; }
  void set_forward_block_idx(int i) { forward_block_idx_ = i; }
  Program& program() const { return *program_; }
  /// The parent block, or nullptr for the global block.
  Block* parent() const;

  // ---- variables
  bool has_var(const std::string& name) const { return index_.count(name) != 0; }
  /// The variable `name` of this block; oar::Error if absent.
  Variable& var(const std::string& name) const {
    auto it = index_.find(name);
    if (it == index_.end()) throw Error(fmt::format("block {} has no variable '{}'", idx_, name));
    return *vars_[it->second];
  }
  /// Looks `name` up in this block, then its ancestors; nullptr if absent everywhere.
  Variable* find_var(const std::string& name) const;
  /// Like find_var, but an oar::Error when absent.
  Variable& var_recursive(const std::string& name) const {
    if (auto* v = find_var(name)) return *v;
    throw Error(fmt::format("no variable '{}' in block {} or its ancestors", name, idx_));
  }
  /// Creates `name` in this block, or returns the existing one. A conflicting redefinition (another dtype,
  /// shape, lod_level or kind) is refused with oar::Error.
  Variable& create_var(const std::string& name, const VarSpec& spec = {});
  /// Creates a parameter; it always lands in the global block, whichever block asks.
  Parameter& create_parameter(const std::string& name, DType dtype, Shape shape, ParamInfo info = {});
  bool remove_var(const std::string& name);
  /// Renames a variable of this block and every use of it by this block's ops; oar::Error when `to` exists.
  void rename_var(const std::string& from, const std::string& to);
  /// Variables in creation order.
  std::vector<Variable*> vars() const {
    std::vector<Variable*> out;
    for (auto& v : vars_) out.push_back(v.get());
    return out;
  }
  std::vector<Parameter*> parameters() const {
    std::vector<Parameter*> out;
    for (auto& v : vars_) if (v->is_parameter()) out.push_back(v.get());
    return out;
  }
  size_t num_vars() const { return vars_.size(); }

  // ---- ops
  size_t num_ops() const { return ops_.size(); }
  Operator& op(size_t i) const { return *ops_.at(i); }
  std::vector<Operator*> ops() const {
    std::vector<Operator*> out;
    for (auto& o : ops_) out.push_back(o.get());
    return out;
  }
  Operator& append_op(Operator op) { return insert_op(ops_.size(), std::move(op)); }
  Operator& prepend_op(Operator op) { return insert_op(0, std::move(op)); }
  Operator& insert_op(size_t index, Operator op);
  void remove_op(size_t index) {
    OAR_CHECK(index < ops_.size(), "remove_op: index {} out of range ({} ops)", index, ops_.size());
    ops_.erase(ops_.begin() + long(index));
    refresh_writers();
  }
  void remove_ops(size_t begin, size_t end) {
    ops_.erase(ops_.begin() + long(begin), ops_.begin() + long(end));
    refresh_writers();
  }
  /// Sets each variable's writer to the last op of this block that outputs it.
  void refresh_writers();

 private:
  friend class Program;
  friend bool operator==(const Program& a, const Program& b);
  Program* program_;
  int idx_, parent_idx_, forward_block_idx_ = -1;
  std::vector<std::unique_ptr<Variable>> vars_;
  std::unordered_map<std::string, size_t> index_;
  std::vector<std::unique_ptr<Operator>> ops_;
};

/// A program: a flat list of blocks forming a tree through parent_idx; block 0 is the global block.
class Program {
 public:
  Program() { blocks_.push_back(std::make_unique<Block>(this, 0, -1)); }
  Program(const Program& other) { copy_from(other); }
  Program& operator=(const Program& other) {
    if (this != &other) copy_from(other);
    return *this;
  }
  Program(Program&& other) noexcept { *this = std::move(other); }
  /// Takes `other`'s blocks; `other` is left an empty program (one global block).
  Program& operator=(Program&& other) noexcept;

  Block& global_block() const { return *blocks_[0]; }
  Block& block(int i) const {
    OAR_CHECK(i >= 0 && size_t(i) < blocks_.size(), "program has no block {} ({} blocks)", i, blocks_.size());
    return *blocks_[size_t(i)];
  }
  size_t num_blocks() const { return blocks_.size(); }
  Block& current_block() const { return *blocks_[size_t(current_)]; }
  /// Appends a block whose parent is the current block (or `parent_idx`) and makes it current.
  Block& create_block(int parent_idx = -2);
  /// Makes the current block's parent current again.
  void rollback() { current_ = std::max(0, current_block().parent_idx()); }
  void set_current_block(int i) { current_ = i; }

  int64_t version() const { return version_; }
  void set_version(int64_t v) { version_ = v; }
  uint64_t random_seed() const { return random_seed_; }
  void set_random_seed(uint64_t s) { random_seed_ = s; }

  /// A deep copy. With for_test, every op that has an `is_test` attribute gets is_test = true.
  Program clone(bool for_test = false) const;
  /// The program with only the ops of block 0 that the targets (variable names) depend on; sub-blocks of
  /// kept ops stay; variables no kept op touches are dropped.
  Program prune(const std::vector<std::string>& targets) const;

  /// All parameters (they live in the global block).
  std::vector<Parameter*> parameters() const { return global_block().parameters(); }

  friend bool operator==(const Program& a, const Program& b);

 private:
  void copy_from(const Program& other);
  std::vector<std::unique_ptr<Block>> blocks_;
  int current_ = 0;
  int64_t version_ = 0;
  uint64_t random_seed_ = 0;
};

inline Block* Block::parent() const { return parent_idx_ < 0 ? nullptr : &program_->block(parent_idx_); }

}  // namespace oar

#if OAR_HEADER_ONLY
#include "oar/ir/program-inl.hpp"
#endif
