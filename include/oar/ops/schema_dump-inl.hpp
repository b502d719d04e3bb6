// oar/ops/schema_dump-inl.hpp: the implementation of schema_dump.hpp (included by it when header-only; compiled
// once into liboar otherwise).
#pragma once
#include "oar/ops/schema_dump.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "oar/ir/wire-inl.hpp"

namespace oar {

OAR_FUNC std::string slot_flags_str(const SlotDef& s) {
  std::vector<std::string> f;
  if (s.duplicable) f.push_back("duplicable");
  if (s.dispensable) f.push_back("dispensable");
  if (s.intermediate) f.push_back("intermediate");
  if (s.state) f.push_back("state");
  return fmt::format("{}", fmt::join(f, ", "));
}

OAR_FUNC std::string schema_str(const OpDef& d) {
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
  if (d.run_by != RunBy::kernel) s += "  kernel:  none (run by the executor)\n";
  return s;
}

namespace detail {

/// The schema as Fluid's OpProto. OpProto has no field for an attribute's default, so it goes into the
/// attribute's comment ("default: 1"), after the attribute's doc.
inline std::unique_ptr<pb::Message> op_proto(const OpDef& d) {
  auto msg = WireTypes::instance().make("OpProto");
  Wire p(*msg);
  p.set_string("type", d.type).set_string("comment", d.doc);
  auto slot = [](const SlotDef& s, Wire v) {
    v.set_string("name", s.name).set_string("comment", s.doc);
    if (s.duplicable) v.set("duplicable", true);
    if (s.intermediate) v.set("intermediate", true);
    if (s.dispensable) v.set("dispensable", true);
  };
  for (auto& s : d.inputs) slot(s, p.add_message("inputs"));
  for (auto& s : d.outputs) slot(s, p.add_message("outputs"));
  for (auto& a : d.attrs) {
    Wire pa = p.add_message("attrs");
    pa.set_string("name", a.name).set("type", int(a.type));
    std::string dflt = a.dflt ? "default: " + attr_str(*a.dflt) : std::string("required");
    pa.set_string("comment", a.doc.empty() ? dflt : fmt::format("{} ({})", a.doc, dflt));
  }
  return msg;
}

}  // namespace detail

OAR_FUNC std::string op_proto_text(const OpDef& d) {
  std::string s;
  google::protobuf::TextFormat::PrintToString(*detail::op_proto(d), &s);
  return s;
}

}  // namespace oar
