// oar/ops/registry.hpp: the op registry, built on first use from op_list.hpp (no static-initializer
// registration), and `add_op`, which validates an op against its schema, appends it and infers shapes.
#pragma once
#include <algorithm>
#include <map>
#include <unordered_map>

#include "oar/ops/op_list.hpp"

namespace oar {

namespace detail {

/// Shape inference shared by every derived `<op>_grad`: each output `X@GRAD` gets the shape and dtype of X.
inline void infer_grad_shape(InferShapeContext& c) {
  for (auto& s : c.op().outputs())
    for (size_t i = 0; i < s.args.size(); ++i) {
      const std::string& g = s.args[i];
      if (g == kEmptyVarName) continue;
      auto at = g.find("@GRAD");
      if (at == std::string::npos) continue;
      Variable* fwd = c.block().find_var(g.substr(0, at));
      Variable* out = c.block().find_var(g);
      if (fwd && out) out->set_shape(fwd->shape()).set_dtype(fwd->dtype()).set_lod_level(fwd->lod_level());
    }
}

template <OpSchema Op>
OpDef make_def() {
  OpDef d = Op::def();
  d.infer_shape = &Op::infer_shape;
  if constexpr (requires(const GradContext& g) { { Op::grad(g) } -> std::same_as<std::vector<Operator>>; }) d.grad = &Op::grad;
  return d;
}

}  // namespace detail

/// All op schemas by type. Grad ops `<op>_grad` are derived for every op that has a grad maker.
class OpRegistry {
 public:
  static const OpRegistry& instance() {
    static const OpRegistry r;
    return r;
  }
  const OpDef* find(std::string_view type) const {
    auto it = defs_.find(std::string(type));
    return it == defs_.end() ? nullptr : &it->second;
  }
  /// The schema of `type`; an oar::Error listing similar op types when unknown.
  const OpDef& get(std::string_view type) const {
    if (auto* d = find(type)) return *d;
    std::string near;
    for (auto& [k, v] : defs_)
      if (!v.is_grad && (k.find(type) != std::string::npos || (type.size() >= 3 && k.starts_with(type.substr(0, 3)))))
        near += (near.empty() ? "" : ", ") + k;
    throw Error(fmt::format("unknown op type '{}'{}", type, near.empty() ? std::string() : "; similar: " + near));
  }
  /// Every schema, sorted by type.
  std::vector<const OpDef*> all(bool with_grads = false) const {
    std::vector<const OpDef*> out;
    for (auto& [k, v] : defs_)
      if (with_grads || !v.is_grad) out.push_back(&v);
    return out;
  }

 private:
  OpRegistry() {
    for_each_op(AllOps{}, [&]<class Op>() { add(detail::make_def<Op>()); });
  }
  void add(OpDef d) {
    if (defs_.count(d.type)) throw Error(fmt::format("op type '{}' is listed twice in op_list.hpp", d.type));
    if (d.grad) {
      OpDef g(d.type + "_grad", "gradient of " + d.type);
      g.is_grad = true;
      g.infer_shape = &detail::infer_grad_shape;
      defs_.emplace(g.type, std::move(g));
    }
    std::string t = d.type;
    defs_.emplace(std::move(t), std::move(d));
  }
  std::map<std::string, OpDef> defs_;
};

inline const OpDef& op_def(std::string_view type) { return OpRegistry::instance().get(type); }

/// Checks `op` against its schema: known type, required inputs present, one variable per non-duplicable
/// slot, no unknown slots or attributes, attribute types and checks; fills attribute defaults.
inline void validate_op(Operator& op) {
  const OpDef& d = op_def(op.type());
  auto fail = [&](std::string msg) { throw Error(fmt::format("{}: {}", op.type(), msg), op.origin()); };
  if (d.is_grad) return;  // derived grad ops are built by their makers, which know the slots
  for (auto& s : d.inputs) {
    size_t n = op.input(s.name).size();
    if (n == 0 && !s.dispensable) fail(fmt::format("input {} is required", s.name));
    if (n > 1 && !s.duplicable) fail(fmt::format("input {} takes one variable, got {}", s.name, n));
  }
  for (auto& s : op.inputs())
    if (!d.find_input(s.slot)) fail(fmt::format("unknown input slot {}", s.slot));
  for (auto& s : d.outputs) {
    size_t n = op.output(s.name).size();
    if (n == 0 && !s.dispensable && !s.intermediate) fail(fmt::format("output {} is required", s.name));
    if (n > 1 && !s.duplicable) fail(fmt::format("output {} takes one variable, got {}", s.name, n));
  }
  for (auto& s : op.outputs())
    if (!d.find_output(s.slot)) fail(fmt::format("unknown output slot {}", s.slot));
  for (auto& [k, v] : op.attrs())
    if (!d.find_attr(k)) fail(fmt::format("unknown attribute '{}'", k));
  for (auto& a : d.attrs) {
    if (!op.has_attr(a.name)) {
      if (!a.dflt) fail(fmt::format("attribute '{}' ({}) is required", a.name, attr_type_name(a.type)));
      op.set_attr(a.name, *a.dflt);
      continue;
    }
    Attribute v = op.attr(a.name);
    if (attr_type(v) != a.type) {
      // Convert among the numeric alternatives (an int literal for a float attr, INTS for LONGS, ...).
      try {
        switch (a.type) {
          case AttrType::INT: v = attr_as<int32_t>(v, a.name); break;
          case AttrType::LONG: v = attr_as<int64_t>(v, a.name); break;
          case AttrType::FLOAT: v = attr_as<float>(v, a.name); break;
          case AttrType::INTS: v = attr_as<std::vector<int32_t>>(v, a.name); break;
          case AttrType::LONGS: v = attr_as<std::vector<int64_t>>(v, a.name); break;
          default: attr_as<int32_t>(Attribute(std::string()), a.name);  // throws the type error
        }
      } catch (const Error&) {
        fail(fmt::format("attribute '{}' must be {}, got {} {}", a.name, attr_type_name(a.type), attr_type_name(attr_type(v)), attr_str(v)));
      }
      op.set_attr(a.name, v);
    }
    if (a.check) {
      std::string why = a.check(v);
      if (!why.empty()) fail(fmt::format("attribute {} = {}: {}", a.name, attr_str(v), why));
    }
  }
}

/// Validates `op`, creates missing output variables in `block`, appends the op and runs its shape inference.
/// On error nothing is left behind and the oar::Error names the op's origin.
inline Operator& add_op(Block& block, Operator op) {
  validate_op(op);
  const OpDef& d = op_def(op.type());
  std::vector<std::string> created;
  for (auto& n : op.output_names())
    if (n != kEmptyVarName && !block.find_var(n)) {
      block.create_var(n);
      created.push_back(n);
    }
  Operator& added = block.append_op(std::move(op));
  if (d.infer_shape) {
    try {
      InferShapeContext ctx(added, block);
      d.infer_shape(ctx);
    } catch (...) {
      block.remove_op(block.num_ops() - 1);
      for (auto& n : created) block.remove_var(n);
      throw;
    }
  }
  return added;
}

/// Re-runs shape inference of every op of every block (after a program was loaded or edited).
inline void infer_program_shapes(Program& p) {
  for (size_t b = 0; b < p.num_blocks(); ++b) {
    Block& blk = p.block(int(b));
    for (auto* op : blk.ops()) {
      const OpDef& d = op_def(op->type());
      if (!d.infer_shape) continue;
      InferShapeContext ctx(*op, blk);
      d.infer_shape(ctx);
    }
  }
}

}  // namespace oar
