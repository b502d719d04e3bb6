// oar/ops/schema_dump.hpp: an op schema (OpDef) as readable text and as Fluid's OpProto message in protobuf
// text form; what `oar ops` prints, shared with the tests.
#pragma once
#include <string>

#include "oar/config.hpp"
#include "oar/ops/registry.hpp"

namespace oar {

/// "duplicable, dispensable" (empty when the slot has no flag).
std::string slot_flags_str(const SlotDef& s);

/// The schema as a few lines:
///   mul: matrix product of X and Y, each flattened to 2-D
///     inputs:  X, Y
///     outputs: Out
///     attrs:   x_num_col_dims: int = 1 (checked), y_num_col_dims: int = 1 (checked)
///     grad:    mul_grad
std::string schema_str(const OpDef& d);

/// The schema as Fluid's OpProto message in protobuf text form. OpProto has no field for an attribute's
/// default, so it goes into the attribute's comment ("default: 1"), after the attribute's doc.
std::string op_proto_text(const OpDef& d);

}  // namespace oar

#if OAR_HEADER_ONLY
#include "oar/ops/schema_dump-inl.hpp"
#endif
