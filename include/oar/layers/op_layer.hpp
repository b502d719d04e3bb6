// oar/layers/op_layer.hpp: record_op_layer, the generic builder for layers that emit exactly one op:
// inputs by slot, attributes (overridable with `.set(...)`), one temporary per output slot. Bodies in op_layer-inl.hpp.
#pragma once
#include <map>
#include <optional>
#include <source_location>
#include <string>
#include <string_view>
#include <vector>

#include "oar/tape/tape.hpp"

namespace oar {

/// One input slot of an op layer and the Vars bound to it.
struct SlotVars {
  std::string slot;
  std::vector<Var> vars;
};

/// Output dtype of an op layer: the first input's, or a fixed one.
struct OutSpec {
  std::string slot;
  std::optional<DType> dtype;
  bool stop_gradient = false;
};

/// Records layer `kind` emitting op `op_type` (an op struct's `type`); returns one Var per entry of `outs`.
/// Slots and attribute keys are the op's constants: `{{ops::Concat::x, xs}}`, `{{ops::Concat::axis, axis}}`.
/// With `with_act`, the layer's `.act(...)` applies to the first output.
std::vector<Var> record_op_layer(std::string kind, std::string_view op_type, std::vector<SlotVars> ins, std::map<std::string, Attribute> attrs,
                                 std::vector<OutSpec> outs, std::source_location loc, bool with_act = false);

/// The common case: layer `op_type` emitting that op, input `in_slot`, one output `out_slot`.
Var record_unary_layer(std::string_view op_type, const Var& x, std::map<std::string, Attribute> attrs, std::source_location loc,
                       std::string_view in_slot, std::string_view out_slot);
/// The same with the activations' slots (the unary element-wise ops, softmax and log_softmax are all named as relu is).
Var record_unary_layer(std::string_view op_type, const Var& x, std::map<std::string, Attribute> attrs, std::source_location loc);
/// The same for op struct `Op` (its `type`, `x` and `out`): `record_unary_layer<ops::Mean>(x, {}, loc)`.
template <class Op>
Var record_unary_layer(const Var& x, std::map<std::string, Attribute> attrs, std::source_location loc) {
  return record_unary_layer(Op::type, x, std::move(attrs), loc, Op::x, Op::out);
}

}  // namespace oar

#if OAR_HEADER_ONLY
#include "oar/layers/op_layer-inl.hpp"
#endif
