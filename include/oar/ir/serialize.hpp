// oar/ir/serialize.hpp: Program <-> framework.proto bytes (binary and text form), and program files.
// The only header that includes the generated framework.pb.h.
#pragma once
#include <google/protobuf/text_format.h>

#include <filesystem>
#include <string>

#include "oar/core/file.hpp"
#include "oar/ir/framework.pb.h"
#include "oar/ir/program.hpp"

namespace oar {

namespace detail {

inline void to_proto(const Attribute& a, const std::string& name, proto::OpDesc::Attr& out) {
  out.set_name(name);
  out.set_type(proto::AttrType(a.index()));
  std::visit(
      [&](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, int32_t>) out.set_i(v);
        else if constexpr (std::is_same_v<T, float>) out.set_f(v);
        else if constexpr (std::is_same_v<T, std::string>) out.set_s(v);
        else if constexpr (std::is_same_v<T, std::vector<int32_t>>) for (auto x : v) out.add_ints(x);
        else if constexpr (std::is_same_v<T, std::vector<float>>) for (auto x : v) out.add_floats(x);
        else if constexpr (std::is_same_v<T, std::vector<std::string>>) for (auto& x : v) out.add_strings(x);
        else if constexpr (std::is_same_v<T, bool>) out.set_b(v);
        else if constexpr (std::is_same_v<T, std::vector<bool>>) for (bool x : v) out.add_bools(x);
        else if constexpr (std::is_same_v<T, BlockRef>) out.set_block_idx(v.idx);
        else if constexpr (std::is_same_v<T, int64_t>) out.set_l(v);
        else if constexpr (std::is_same_v<T, BlockRefs>) for (auto x : v.idx) out.add_blocks_idx(x);
        else if constexpr (std::is_same_v<T, std::vector<int64_t>>) for (auto x : v) out.add_longs(x);
      },
      a);
}

inline Attribute from_proto(const proto::OpDesc::Attr& a) {
  switch (a.type()) {
    case proto::INT: return a.i();
    case proto::FLOAT: return a.f();
    case proto::STRING: return a.s();
    case proto::INTS: return std::vector<int32_t>(a.ints().begin(), a.ints().end());
    case proto::FLOATS: return std::vector<float>(a.floats().begin(), a.floats().end());
    case proto::STRINGS: return std::vector<std::string>(a.strings().begin(), a.strings().end());
    case proto::BOOLEAN: return a.b();
    case proto::BOOLEANS: return std::vector<bool>(a.bools().begin(), a.bools().end());
    case proto::BLOCK: return BlockRef{a.block_idx()};
    case proto::LONG: return a.l();
    case proto::BLOCKS: return BlockRefs{std::vector<int32_t>(a.blocks_idx().begin(), a.blocks_idx().end())};
    case proto::LONGS: return std::vector<int64_t>(a.longs().begin(), a.longs().end());
  }
  throw Error(fmt::format("attribute '{}' has an unknown type {}", a.name(), int(a.type())));
}

inline void to_proto(const Variable& v, proto::VarDesc& out) {
  out.set_name(v.name());
  out.set_persistable(v.persistable());
  auto* t = out.mutable_type();
  t->set_type(proto::VarType::Type(int(v.kind())));
  auto fill = [&](proto::VarType::TensorDesc* td) {
    td->set_data_type(proto::VarType::Type(int(v.dtype())));
    for (auto d : v.shape()) td->add_dims(d);
  };
  switch (v.kind()) {
    case VarKind::lod_tensor: {
      auto* l = t->mutable_lod_tensor();
      fill(l->mutable_tensor());
      l->set_lod_level(v.lod_level());
      break;
    }
    case VarKind::selected_rows: fill(t->mutable_selected_rows()); break;
    case VarKind::lod_tensor_array: {
      auto* l = t->mutable_tensor_array();
      fill(l->mutable_tensor());
      l->set_lod_level(v.lod_level());
      break;
    }
    default: break;
  }
}

inline void check_dtype(int v, const std::string& var) {
  if (!is_valid_dtype(v)) throw Error(fmt::format("variable '{}' has an unknown data type {}", var, v));
}

inline void from_proto(const proto::VarDesc& in, Block& b) {
  const auto& t = in.type();
  int kind = int(t.type());
  static const int kinds[] = {7, 8, 9, 10, 11, 12, 13, 14, 15, 17};
  if (std::find(std::begin(kinds), std::end(kinds), kind) == std::end(kinds))
    throw Error(fmt::format("variable '{}' has an unsupported kind {}", in.name(), kind));
  VarSpec spec{.persistable = in.persistable(), .kind = VarKind(kind)};
  auto read = [&](const proto::VarType::TensorDesc& td, int lod) {
    check_dtype(int(td.data_type()), in.name());
    spec.dtype = DType(int(td.data_type()));
    spec.shape = Shape(std::vector<int64_t>(td.dims().begin(), td.dims().end()));
    spec.lod_level = lod;
  };
  if (t.has_lod_tensor()) read(t.lod_tensor().tensor(), t.lod_tensor().lod_level());
  else if (t.has_selected_rows()) read(t.selected_rows(), 0);
  else if (t.has_tensor_array()) read(t.tensor_array().tensor(), t.tensor_array().lod_level());
  if (b.has_var(in.name())) throw Error(fmt::format("variable '{}' is defined twice in block {}", in.name(), b.idx()));
  b.create_var(in.name(), spec);
}

inline void to_proto(const Operator& op, proto::OpDesc& out) {
  out.set_type(op.type());
  for (auto& s : op.inputs()) {
    auto* v = out.add_inputs();
    v->set_parameter(s.slot);
    for (auto& a : s.args) v->add_arguments(a);
  }
  for (auto& s : op.outputs()) {
    auto* v = out.add_outputs();
    v->set_parameter(s.slot);
    for (auto& a : s.args) v->add_arguments(a);
  }
  for (auto& [k, a] : op.attrs()) to_proto(a, k, *out.add_attrs());
  // Fluid's convention for where an op came from: the op_callstack attribute.
  if (op.origin().known()) {
    auto* a = out.add_attrs();
    a->set_name("op_callstack");
    a->set_type(proto::STRINGS);
    a->add_strings(fmt::format("{}:{}", op.origin().file, op.origin().line));
    a->add_strings(op.origin().what);
  }
  if (op.is_target()) out.set_is_target(true);
}

inline Operator from_proto(const proto::OpDesc& in) {
  Operator op(in.type());
  for (auto& v : in.inputs()) op.set_input(v.parameter(), {v.arguments().begin(), v.arguments().end()});
  for (auto& v : in.outputs()) op.set_output(v.parameter(), {v.arguments().begin(), v.arguments().end()});
  for (auto& a : in.attrs()) {
    if (a.name() == "op_callstack" && a.type() == proto::STRINGS && a.strings_size() == 2) {
      const std::string& loc = a.strings(0);
      auto colon = loc.rfind(':');
      int line = colon == std::string::npos ? 0 : std::atoi(loc.c_str() + colon + 1);
      op.set_origin(Origin(loc.substr(0, colon), line, a.strings(1)));
      continue;
    }
    op.set_attr(a.name(), from_proto(a));
  }
  op.set_is_target(in.is_target());
  return op;
}

}  // namespace detail

inline proto::ProgramDesc to_proto(const Program& p) {
  proto::ProgramDesc out;
  for (size_t i = 0; i < p.num_blocks(); ++i) {
    const Block& b = p.block(int(i));
    auto* bd = out.add_blocks();
    bd->set_idx(b.idx());
    bd->set_parent_idx(b.parent_idx());
    bd->set_forward_block_idx(b.forward_block_idx());
    for (auto* v : b.vars()) detail::to_proto(*v, *bd->add_vars());
    for (auto* op : b.ops()) detail::to_proto(*op, *bd->add_ops());
  }
  out.mutable_version()->set_version(p.version());
  return out;
}

/// Builds a Program from a decoded message, checking block indices and parent links.
inline Program from_proto(const proto::ProgramDesc& in) {
  if (in.blocks_size() == 0) throw Error("program has no blocks");
  Program p;
  for (int i = 0; i < in.blocks_size(); ++i) {
    const auto& bd = in.blocks(i);
    if (bd.idx() != i) throw Error(fmt::format("block {} is stored at position {}", bd.idx(), i));
    if (i == 0 ? bd.parent_idx() != -1 : (bd.parent_idx() < 0 || bd.parent_idx() >= i))
      throw Error(fmt::format("block {} has an invalid parent {}", i, bd.parent_idx()));
    Block& b = i == 0 ? p.global_block() : p.create_block(bd.parent_idx());
    b.set_forward_block_idx(bd.forward_block_idx());
    for (auto& v : bd.vars()) detail::from_proto(v, b);
  }
  for (int i = 0; i < in.blocks_size(); ++i)
    for (auto& od : in.blocks(i).ops()) {
      Operator op = detail::from_proto(od);
      for (auto& [k, a] : op.attrs()) {
        if (auto* r = std::get_if<BlockRef>(&a); r && (r->idx < 0 || r->idx >= in.blocks_size()))
          throw Error(fmt::format("op '{}' refers to block {} of a {}-block program", op.type(), r->idx, in.blocks_size()));
      }
      p.block(i).append_op(std::move(op));
    }
  p.set_current_block(0);
  if (in.has_version()) p.set_version(in.version().version());
  return p;
}

/// The program as framework.proto bytes.
inline std::string serialize(const Program& p) {
  std::string s;
  to_proto(p).SerializeToString(&s);
  return s;
}

/// Parses framework.proto bytes; truncated or garbage input is an oar::Error, never a crash.
inline Program parse_program(std::string_view bytes) {
  proto::ProgramDesc d;
  if (!d.ParseFromArray(bytes.data(), int(bytes.size())))
    throw Error(fmt::format("not a valid program: {} bytes do not decode as a ProgramDesc (truncated or not a program file?)", bytes.size()));
  return from_proto(d);
}

/// The protobuf text form of the program.
inline std::string to_text(const Program& p) {
  std::string s;
  google::protobuf::TextFormat::PrintToString(to_proto(p), &s);
  return s;
}

inline Program parse_program_text(const std::string& text) {
  proto::ProgramDesc d;
  if (!google::protobuf::TextFormat::ParseFromString(text, &d)) throw Error("not a valid program in protobuf text form");
  return from_proto(d);
}

/// Writes the program (binary) atomically: a crash leaves the old file or the new one.
inline void save_program(const Program& p, const std::filesystem::path& path) { detail::write_file_atomic(path, serialize(p)); }

inline Program load_program(const std::filesystem::path& path) {
  try {
    return parse_program(detail::read_file(path));
  } catch (Error& e) {
    e.add_context(fmt::format("while loading program file '{}'", path.string()));
    throw;
  }
}

}  // namespace oar
