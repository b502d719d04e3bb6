// oar/ops/schema_dump.hpp: an op schema (OpDef) as readable text and as Fluid's OpProto message; what
// `oar ops` prints, shared with the tests.
#pragma once
#include <string>
#include <vector>

#include "oar/ir/serialize.hpp"  // framework.pb.h (proto::OpProto)
#include "oar/ops/registry.hpp"

namespace oar {

/// "duplicable, dispensable" (empty when the slot has no flag).
inline std::string slot_flags_str(const SlotDef& s) {
  std::vector<std::string> f;
  if (s.duplicable) f.push_back("duplicable");
  if (s.dispensable) f.push_back("dispensable");
  if (s.intermediate) f.push_back("intermediate");
  return fmt::format("{}", fmt::join(f, ", "));
}

/// The schema as a few lines:
///   mul: matrix product of X and Y, each flattened to 2-D
///     inputs:  X, Y
///     outputs: Out
///     attrs:   x_num_col_dims: int = 1 (checked), y_num_col_dims: int = 1 (checked)
///     grad:    mul_grad
inline std::string schema_str(const OpDef& d) {
  auto slots = [](const std::vector<SlotDef>& v) {
    std::vector<std::string> out;
    for (auto& s : v) {
      std::string f = slot_flags_str(s);
      out.push_back(f.empty() ? s.name : fmt::format("{} ({})", s.name, f));
    }
    return out.empty() ? std::string("-") : fmt::format("{}", fmt::join(out, ", "));
  };
  std::string s = d.doc.empty() ? d.type : fmt::format("{}: {}", d.type, d.doc);
  s += fmt::format("\n  inputs:  {}\n  outputs: {}\n", slots(d.inputs), slots(d.outputs));
  std::vector<std::string> attrs;
  for (auto& a : d.attrs) {
    std::string t = fmt::format("{}: {}", a.name, attr_type_name(a.type));
    t += a.dflt ? fmt::format(" = {}", attr_str(*a.dflt)) : std::string(" (required)");
    if (a.check) t += " (checked)";
    attrs.push_back(std::move(t));
  }
  if (!attrs.empty()) s += fmt::format("  attrs:   {}\n", fmt::join(attrs, ", "));
  if (d.is_grad) s += "  grad:    (is a derived grad op)\n";
  else s += fmt::format("  grad:    {}\n", d.grad ? d.type + "_grad" : std::string("none"));
  if (d.kernel_free) s += "  kernel:  none (run by the executor)\n";
  return s;
}

/// The schema as Fluid's OpProto. OpProto has no field for an attribute's default, so it goes into the
/// attribute's comment ("default: 1"), after the attribute's doc.
inline proto::OpProto to_op_proto(const OpDef& d) {
  proto::OpProto p;
  p.set_type(d.type);
  p.set_comment(d.doc);
  auto slot = [](const SlotDef& s, proto::OpProto::Var* v) {
    v->set_name(s.name);
    v->set_comment(s.doc);
    if (s.duplicable) v->set_duplicable(true);
    if (s.intermediate) v->set_intermediate(true);
    if (s.dispensable) v->set_dispensable(true);
  };
  for (auto& s : d.inputs) slot(s, p.add_inputs());
  for (auto& s : d.outputs) slot(s, p.add_outputs());
  for (auto& a : d.attrs) {
    auto* pa = p.add_attrs();
    pa->set_name(a.name);
    pa->set_type(proto::AttrType(int(a.type)));
    std::string dflt = a.dflt ? "default: " + attr_str(*a.dflt) : std::string("required");
    pa->set_comment(a.doc.empty() ? dflt : fmt::format("{} ({})", a.doc, dflt));
  }
  return p;
}

/// The OpProto in protobuf text form.
inline std::string op_proto_text(const OpDef& d) {
  std::string s;
  google::protobuf::TextFormat::PrintToString(to_op_proto(d), &s);
  return s;
}

}  // namespace oar
