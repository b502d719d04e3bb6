// oar/ops/registry-inl.hpp: the implementation of registry.hpp (included by it when header-only; compiled once into liboar otherwise).
#pragma once
#include "oar/ops/registry.hpp"

#include <algorithm>
#include <set>

#include "oar/ops/op_list.hpp"

namespace oar {

namespace detail {

OAR_FUNC void infer_grad_shape(InferShapeContext& c) {
  for (auto& s : c.op().outputs()) {
    const auto at = s.slot.find("@GRAD");
    if (at == std::string::npos) continue;
    const std::vector<std::string>& fwd_slot = c.op().input(std::string_view(s.slot).substr(0, at));
    for (size_t i = 0; i < s.args.size(); ++i) {
      const std::string& g = s.args[i];
      if (g == kEmptyVarName) continue;
      Variable* fwd = i < fwd_slot.size() ? c.block().find_var(fwd_slot[i]) : nullptr;
      if (!fwd) {
        auto a = g.find("@GRAD");
        if (a != std::string::npos) fwd = c.block().find_var(g.substr(0, a));
      }
      Variable* out = c.block().find_var(g);
      if (fwd && out) out->set_shape(fwd->shape()).set_dtype(fwd->dtype()).set_lod_level(fwd->lod_level());
      // The gradient of a tensor array is an array (other kinds, a sparse gradient say, are the grad op's to set).
      if (fwd && out && fwd->kind() == VarKind::lod_tensor_array) out->set_kind(VarKind::lod_tensor_array);
    }
  }
}

template <OpSchema Op>
OpDef make_def() {
  OpDef d = Op::def();
  d.infer_shape = &Op::infer_shape;
  if constexpr (requires(const GradContext& g) { { Op::grad(g) } -> std::same_as<std::vector<Operator>>; }) d.grad = &Op::grad;
  return d;
}

OAR_FUNC std::optional<OpDef> derive_grad_def(const OpDef& fwd) {
  Operator op(fwd.type);
  std::map<std::string, const SlotDef*> origin;  // probe variable -> the forward slot it stands for
  for (auto& s : fwd.inputs) {
    op.set_input(s.name, {"in:" + s.name});
    origin["in:" + s.name] = &s;
    origin[grad_var_name("in:" + s.name)] = &s;
  }
  for (auto& s : fwd.outputs) {
    op.set_output(s.name, {"out:" + s.name});
    origin["out:" + s.name] = &s;
    origin[grad_var_name("out:" + s.name)] = &s;
  }
  for (auto& a : fwd.attrs)
    if (a.dflt) op.set_attr(a.name, *a.dflt);
  Program scratch;
  GradContext ctx(op, scratch.global_block());
  std::vector<Operator> made;
  try {
    made = fwd.grad(ctx);
  } catch (const Error&) {
    return std::nullopt;  // a maker that needs real variables: its grad op stays unchecked
  }
  OpDef d(fwd.type + "_grad", "gradient of " + fwd.type);
  bool any = false;
  auto add_slots = [&](const std::vector<SlotArgs>& slots, std::vector<SlotDef>& into, bool is_output) {
    for (auto& s : slots) {
      bool dispensable = is_output, duplicable = false;
      for (auto& a : s.args)
        if (auto it = origin.find(a); it != origin.end()) {
          dispensable = dispensable || it->second->dispensable || it->second->intermediate;
          duplicable = duplicable || it->second->duplicable;
        }
      auto same = std::find_if(into.begin(), into.end(), [&](const SlotDef& x) { return x.name == s.slot; });
      if (same == into.end()) into.push_back({s.slot, duplicable, dispensable, false, false, {}});
    }
  };
  for (auto& g : made) {
    if (g.type() != d.type) continue;
    any = true;
    add_slots(g.inputs(), d.inputs, false);
    add_slots(g.outputs(), d.outputs, true);
    for (auto& [k, v] : g.attrs()) {
      if (d.find_attr(k)) continue;
      if (const AttrDef* fa = fwd.find_attr(k)) d.attrs.push_back(*fa);
      else d.attrs.push_back({k, attr_type(v), v, nullptr, {}});
    }
  }
  if (!any) return std::nullopt;
  return d;
}

}  // namespace detail

OAR_FUNC const OpRegistry& OpRegistry::instance() {
  static const OpRegistry r;
  return r;
}

OAR_FUNC const OpDef& OpRegistry::get(std::string_view type) const {
  if (auto* d = find(type)) return *d;
  std::string near;
  for (auto& [k, v] : defs_)
    if (!v.is_grad && (k.find(type) != std::string::npos || (type.size() >= 3 && k.starts_with(type.substr(0, 3)))))
      near += (near.empty() ? "" : ", ") + k;
  throw Error(fmt::format("unknown op type '{}'{}", type, near.empty() ? std::string() : "; similar: " + near));
}

OAR_FUNC std::vector<const OpDef*> OpRegistry::all(bool with_grads) const {
  std::vector<const OpDef*> out;
  for (auto& [k, v] : defs_)
    if (with_grads || !v.is_grad) out.push_back(&v);
  return out;
}

OAR_FUNC OpRegistry::OpRegistry() {
  for_each_op(AllOps{}, [&]<class Op>() { add(detail::make_def<Op>()); });
}

OAR_FUNC void OpRegistry::add(OpDef d) {
  if (defs_.count(d.type)) throw Error(fmt::format("op type '{}' is listed twice in op_list.hpp", d.type));
  if (d.grad) {
    OpDef g = detail::derive_grad_def(d).value_or(OpDef(d.type + "_grad", "gradient of " + d.type));
    g.is_grad = true;
    g.infer_shape = &detail::infer_grad_shape;
    defs_.emplace(g.type, std::move(g));
  }
  std::string t = d.type;
  defs_.emplace(std::move(t), std::move(d));
}

OAR_FUNC const OpDef& op_def(std::string_view type) { return OpRegistry::instance().get(type); }

OAR_FUNC void validate_op(Operator& op) {
  const OpDef& d = op_def(op.type());
  auto fail = [&](std::string msg) { throw Error(fmt::format("{}: {}", op.type(), msg), op.origin()); };
  if (d.is_grad && d.inputs.empty()) return;  // a grad op whose schema could not be derived
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
  // A grad op copies every attribute of its forward op, Fluid's framework ones (op_role, ...) included.
  if (!d.is_grad)
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

OAR_FUNC Operator& add_op(Block& block, Operator op) {
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

OAR_FUNC void validate_program(Program& p) {
  for (size_t b = 0; b < p.num_blocks(); ++b)
    for (auto* op : p.block(int(b)).ops()) validate_op(*op);
}

OAR_FUNC void infer_program_shapes(Program& p) {
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
