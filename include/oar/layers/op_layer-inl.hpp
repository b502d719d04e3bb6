// oar/layers/op_layer-inl.hpp: the implementation of op_layer.hpp (included by it when header-only; compiled once into liboar otherwise).
#pragma once
#include "oar/layers/op_layer.hpp"

#include "oar/ops/elementwise.hpp"
#include "oar/tape/replay.hpp"

namespace oar {

OAR_FUNC std::vector<Var> record_op_layer(std::string kind, std::string_view op_type, std::vector<SlotVars> ins, std::map<std::string, Attribute> attrs,
                                          std::vector<OutSpec> outs, std::source_location loc, bool with_act) {
  std::vector<Var> inputs;
  std::vector<std::pair<std::string, size_t>> slots;  // slot, count
  for (auto& s : ins) {
    slots.push_back({s.slot, s.vars.size()});
    inputs.insert(inputs.end(), s.vars.begin(), s.vars.end());
  }
  int n = int(outs.size());
  auto replay = [op_type = std::string(op_type), slots, attrs, outs, with_act](LayerHelper& h) {
    Operator op(op_type);
    size_t k = 0;
    for (auto& [slot, count] : slots) {
      std::vector<std::string> names;
      for (size_t i = 0; i < count; ++i) names.push_back(h.input(k++));
      op.set_input(slot, names);
    }
    DType dflt = h.num_inputs() ? h.input_var(0).dtype() : DType::f32;
    std::vector<std::string> out_names;
    for (auto& o : outs) {
      Variable& v = h.create_tmp(o.dtype ? *o.dtype : dflt, o.stop_gradient);
      op.set_output(o.slot, {v.name()});
      out_names.push_back(v.name());
    }
    for (auto& [key, v] : attrs) op.set_attr(key, v);
    h.apply_options(op);
    h.append_op(std::move(op));
    if (with_act) out_names[0] = h.append_activation(out_names[0]);
    return out_names;
  };
  return record_layer(std::move(kind), std::move(inputs), std::move(replay), loc, n);
}

OAR_FUNC Var record_unary_layer(std::string_view op_type, const Var& x, std::map<std::string, Attribute> attrs, std::source_location loc,
                                std::string_view in_slot, std::string_view out_slot) {
  std::string kind(op_type);
  return record_op_layer(std::move(kind), op_type, {{std::string(in_slot), {x}}}, std::move(attrs), {{std::string(out_slot)}}, loc)[0];
}

OAR_FUNC Var record_unary_layer(std::string_view op_type, const Var& x, std::map<std::string, Attribute> attrs, std::source_location loc) {
  return record_unary_layer(op_type, x, std::move(attrs), loc, ops::ReluOp::x, ops::ReluOp::out);
}

}  // namespace oar
