// oar/ir/program-inl.hpp: the implementation of program.hpp (included by it when header-only; compiled once into liboar otherwise).
#pragma once
#include "oar/ir/program.hpp"

#include <functional>
#include <set>

namespace oar {

OAR_FUNC Variable* Block::find_var(const std::string& name) const {
  for (const Block* b = this; b; b = b->parent()) {
    auto it = b->index_.find(name);
    if (it != b->index_.end()) return b->vars_[it->second].get();
  }
  return nullptr;
}

OAR_FUNC Variable& Block::create_var(const std::string& name, const VarSpec& spec) {
  OAR_CHECK(!name.empty(), "a variable needs a name");
  if (auto it = index_.find(name); it != index_.end()) {
    Variable& v = *vars_[it->second];
    auto conflict = [&](const char* what, const std::string& had, const std::string& want) {
      throw Error(fmt::format("variable '{}' is already defined in block {} with {} {}; redefining it with {} {} is refused", name, idx_,
                              what, had, what, want));
    };
    if (spec.kind != v.kind()) conflict("kind", std::to_string(int(v.kind())), std::to_string(int(spec.kind)));
    if (spec.dtype && *spec.dtype != v.dtype()) conflict("dtype", std::string(oar::name(v.dtype())), std::string(oar::name(*spec.dtype)));
    if (spec.shape && !v.shape().empty() && *spec.shape != v.shape()) conflict("shape", v.shape().str(), spec.shape->str());
    if (spec.shape && v.shape().empty()) v.set_shape(*spec.shape);
    if (spec.lod_level && *spec.lod_level != v.lod_level()) conflict("lod_level", std::to_string(v.lod_level()), std::to_string(*spec.lod_level));
    if (spec.persistable && *spec.persistable) v.set_persistable(true);
    return v;
  }
  auto v = std::make_unique<Variable>(name, spec.kind);
  if (spec.dtype) v->set_dtype(*spec.dtype);
  if (spec.shape) v->set_shape(*spec.shape);
  if (spec.lod_level) v->set_lod_level(*spec.lod_level);
  if (spec.persistable) v->set_persistable(*spec.persistable);
  if (spec.stop_gradient) v->set_stop_gradient(*spec.stop_gradient);
  index_[name] = vars_.size();
  vars_.push_back(std::move(v));
  return *vars_.back();
}

OAR_FUNC Parameter& Block::create_parameter(const std::string& name, DType dtype, Shape shape, ParamInfo info) {
  Block& g = program_->global_block();
  OAR_CHECK(shape.rank() > 0 && shape.known(), "parameter '{}' needs a known, non-empty shape; got {}", name, shape.str());
  Variable& v = g.create_var(name, VarSpec{.dtype = dtype, .shape = shape, .persistable = true});
  if (!v.is_parameter()) v.set_param(std::move(info));
  return v;
}

OAR_FUNC bool Block::remove_var(const std::string& name) {
  auto it = index_.find(name);
  if (it == index_.end()) return false;
  vars_.erase(vars_.begin() + long(it->second));
  index_.clear();
  for (size_t i = 0; i < vars_.size(); ++i) index_[vars_[i]->name()] = i;
  return true;
}

OAR_FUNC void Block::rename_var(const std::string& from, const std::string& to) {
  if (from == to) return;
  OAR_CHECK(!has_var(to), "cannot rename '{}' to '{}': block {} already has a variable '{}'", from, to, idx_, to);
  auto it = index_.find(from);
  OAR_CHECK(it != index_.end(), "cannot rename '{}': block {} has no such variable", from, idx_);
  auto& old = vars_[it->second];
  auto v = std::make_unique<Variable>(to, old->kind());
  v->set_dtype(old->dtype()).set_shape(old->shape()).set_lod_level(old->lod_level()).set_persistable(old->persistable());
  v->set_stop_gradient(old->stop_gradient()).set_origin(old->origin());
  if (old->param()) v->set_param(*old->param());
  size_t at = it->second;
  index_.erase(it);
  old = std::move(v);
  index_[to] = at;
  for (auto& op : ops_) {
    op->rename_input(from, to);
    op->rename_output(from, to);
  }
  refresh_writers();
}

OAR_FUNC Operator& Block::insert_op(size_t index, Operator op) {
  OAR_CHECK(index <= ops_.size(), "insert_op: index {} out of range ({} ops)", index, ops_.size());
  auto it = ops_.insert(ops_.begin() + long(index), std::make_unique<Operator>(std::move(op)));
  Operator& o = **it;
  if (index + 1 == ops_.size()) {
    for (auto& n : o.output_names())
      if (auto* v = find_var(n)) v->set_writer(&o);
  } else {
    refresh_writers();
  }
  return o;
}

OAR_FUNC void Block::refresh_writers() {
  for (auto& v : vars_) v->set_writer(nullptr);
  for (auto& op : ops_)
    for (auto& n : op->output_names())
      if (auto* v = find_var(n)) v->set_writer(op.get());
}

OAR_FUNC Program& Program::operator=(Program&& other) noexcept {
  blocks_ = std::move(other.blocks_);
  current_ = other.current_;
  version_ = other.version_;
  random_seed_ = other.random_seed_;
  for (auto& b : blocks_) b->program_ = this;
  other.blocks_.clear();
  other.blocks_.push_back(std::make_unique<Block>(&other, 0, -1));
  other.current_ = 0;
  return *this;
}

OAR_FUNC Block& Program::create_block(int parent_idx) {
  int parent = parent_idx == -2 ? current_ : parent_idx;
  blocks_.push_back(std::make_unique<Block>(this, int(blocks_.size()), parent));
  current_ = int(blocks_.size()) - 1;
  return *blocks_.back();
}

OAR_FUNC Program Program::clone(bool for_test) const {
  Program p(*this);
  if (for_test)
    for (auto& b : p.blocks_)
      for (auto& op : b->ops_)
        if (op->has_attr(common::is_test)) op->set_attr(common::is_test, true);
  return p;
}

OAR_FUNC void Program::copy_from(const Program& other) {
  blocks_.clear();
  for (auto& ob : other.blocks_) {
    auto b = std::make_unique<Block>(this, ob->idx_, ob->parent_idx_);
    b->forward_block_idx_ = ob->forward_block_idx_;
    for (auto& v : ob->vars_) {
      b->index_[v->name()] = b->vars_.size();
      b->vars_.push_back(std::make_unique<Variable>(*v));
    }
    for (auto& op : ob->ops_) b->ops_.push_back(std::make_unique<Operator>(*op));
    blocks_.push_back(std::move(b));
  }
  current_ = other.current_;
  version_ = other.version_;
  random_seed_ = other.random_seed_;
  for (auto& b : blocks_) b->refresh_writers();
}

OAR_FUNC Program Program::prune(const std::vector<std::string>& targets) const {
  Program p(*this);
  Block& g = p.global_block();
  std::set<std::string> needed(targets.begin(), targets.end());
  for (auto& t : targets) OAR_CHECK(g.find_var(t) != nullptr, "prune: no target variable '{}' in the global block", t);
  std::vector<bool> keep(g.ops_.size(), false);
  // Walk backwards: keep an op when it writes something needed; its inputs become needed. Ops with a
  // sub-block also need every outer variable the sub-block reads.
  std::function<void(const Block&, std::set<std::string>&)> sub_inputs = [&](const Block& b, std::set<std::string>& acc) {
    for (auto& op : b.ops_) {
      for (auto& n : op->input_names()) acc.insert(n);
      if (op->sub_block() >= 0) sub_inputs(p.block(op->sub_block()), acc);
    }
  };
  for (size_t i = g.ops_.size(); i-- > 0;) {
    const Operator& op = *g.ops_[i];
    bool k = op.is_target();
    for (auto& n : op.output_names()) k = k || needed.count(n);
    if (op.type() == common::fetch_op || op.type() == common::feed_op) k = false;
    if (!k) continue;
    keep[i] = true;
    for (auto& n : op.input_names()) needed.insert(n);
    if (op.sub_block() >= 0) sub_inputs(p.block(op.sub_block()), needed);
  }
  std::vector<std::unique_ptr<Operator>> kept;
  for (size_t i = 0; i < g.ops_.size(); ++i)
    if (keep[i]) kept.push_back(std::move(g.ops_[i]));
  g.ops_ = std::move(kept);
  std::set<std::string> used;
  for (auto& op : g.ops_) {
    for (auto& n : op->input_names()) used.insert(n);
    for (auto& n : op->output_names()) used.insert(n);
  }
  for (auto& t : targets) used.insert(t);
  for (auto& n : needed) used.insert(n);
  std::vector<std::string> drop;
  for (auto& v : g.vars_)
    if (!used.count(v->name())) drop.push_back(v->name());
  for (auto& n : drop) g.remove_var(n);
  g.refresh_writers();
  return p;
}

OAR_FUNC bool operator==(const Program& a, const Program& b) {
  if (a.blocks_.size() != b.blocks_.size()) return false;
  for (size_t i = 0; i < a.blocks_.size(); ++i) {
    const Block& x = *a.blocks_[i];
    const Block& y = *b.blocks_[i];
    if (x.parent_idx_ != y.parent_idx_ || x.forward_block_idx_ != y.forward_block_idx_) return false;
    if (x.vars_.size() != y.vars_.size() || x.ops_.size() != y.ops_.size()) return false;
    for (size_t j = 0; j < x.vars_.size(); ++j) {
      const Variable& u = *x.vars_[j];
      const Variable& v = *y.vars_[j];
      if (u.name() != v.name() || u.kind() != v.kind() || u.dtype() != v.dtype() || u.shape() != v.shape() ||
          u.lod_level() != v.lod_level() || u.persistable() != v.persistable())
        return false;
    }
    for (size_t j = 0; j < x.ops_.size(); ++j)
      if (!(*x.ops_[j] == *y.ops_[j])) return false;
  }
  return true;
}

}  // namespace oar
