// oar/ir/serialize-inl.hpp: the implementation of serialize.hpp (included by it when header-only; compiled once
// into liboar otherwise). Programs go to and from framework.proto's messages field by field (ir/wire-inl.hpp).
#pragma once
#include "oar/ir/serialize.hpp"

#include <google/protobuf/stubs/logging.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>

#include "oar/core/file.hpp"
#include "oar/ir/wire-inl.hpp"

namespace oar {

namespace detail {

/// libprotobuf logs what it dislikes in the bytes it parses (a string field that is not UTF-8, a required field
/// missing) to stderr, beside the oar::Error that reports the same file. Its log goes instead to the parse in
/// progress on this thread, which puts it into its error; when no oar parse is in progress it goes on to the
/// handler that was installed before (the application's, or libprotobuf's stderr printer).
class ProtobufLog {
 public:
  ProtobufLog() : outer_(current()) {
    [[maybe_unused]] static const bool installed = [] {
      previous().store(pb::SetLogHandler(&handle));  // once per process, the first time oar parses
      return true;
    }();
    current() = this;
  }
  ~ProtobufLog() { current() = outer_; }
  ProtobufLog(const ProtobufLog&) = delete;
  ProtobufLog& operator=(const ProtobufLog&) = delete;
  /// What libprotobuf logged during this parse, its advice to .proto authors cut ("" when nothing).
  const std::string& text() const { return text_; }

 private:
  static ProtobufLog*& current() {
    thread_local ProtobufLog* c = nullptr;
    return c;
  }
  static std::atomic<pb::LogHandler*>& previous() {
    static std::atomic<pb::LogHandler*> h{nullptr};
    return h;
  }
  static void handle(pb::LogLevel level, const char* file, int line, const std::string& message) {
    if (ProtobufLog* c = current()) {
      std::string m = message.substr(0, message.find(" Use the 'bytes' type"));
      c->text_ += (c->text_.empty() ? "" : "; ") + m;
      return;
    }
    if (pb::LogHandler* h = previous().load()) h(level, file, line, message);
  }
  ProtobufLog* outer_;
  std::string text_;
};

// AttrType in framework.proto numbers the types in the order of Attribute's alternatives.
inline constexpr int kAttrStrings = 5;

inline void attr_to_wire(const Attribute& a, const std::string& name, Wire out) {
  out.set_string("name", name).set("type", int64_t(a.index()));
  std::visit(
      [&](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, int32_t>) out.set("i", v);
        else if constexpr (std::is_same_v<T, float>) out.set_float("f", v);
        else if constexpr (std::is_same_v<T, std::string>) out.set_string("s", v);
        else if constexpr (std::is_same_v<T, std::vector<int32_t>>) for (auto x : v) out.add("ints", x);
        else if constexpr (std::is_same_v<T, std::vector<float>>) for (auto x : v) out.add_float("floats", x);
        else if constexpr (std::is_same_v<T, std::vector<std::string>>) for (auto& x : v) out.add_string("strings", x);
        else if constexpr (std::is_same_v<T, bool>) out.set("b", v);
        else if constexpr (std::is_same_v<T, std::vector<bool>>) for (bool x : v) out.add("bools", x);
        else if constexpr (std::is_same_v<T, BlockRef>) out.set("block_idx", v.idx);
        else if constexpr (std::is_same_v<T, int64_t>) out.set("l", v);
        else if constexpr (std::is_same_v<T, BlockRefs>) for (auto x : v.idx) out.add("blocks_idx", x);
        else if constexpr (std::is_same_v<T, std::vector<int64_t>>) for (auto x : v) out.add("longs", x);
      },
      a);
}

inline Attribute attr_from_wire(const Wire& a) {
  switch (a.get("type")) {
    case 0: return int32_t(a.get("i"));
    case 1: return a.get_float("f");
    case 2: return a.get_string("s");
    case 3: return wire_ints<int32_t>(a, "ints");
    case 4: {
      std::vector<float> v(size_t(a.size("floats")));
      for (int i = 0; i < int(v.size()); ++i) v[size_t(i)] = a.get_float("floats", i);
      return v;
    }
    case kAttrStrings: {
      std::vector<std::string> v(size_t(a.size("strings")));
      for (int i = 0; i < int(v.size()); ++i) v[size_t(i)] = a.get_string("strings", i);
      return v;
    }
    case 6: return a.get("b") != 0;
    case 7: return wire_ints<bool>(a, "bools");
    case 8: return BlockRef{int32_t(a.get("block_idx"))};
    case 9: return a.get("l");
    case 10: return BlockRefs{wire_ints<int32_t>(a, "blocks_idx")};
    case 11: return wire_ints<int64_t>(a, "longs");
  }
  throw Error(fmt::format("attribute '{}' has an unknown type {}", a.get_string("name"), a.get("type")));
}

inline void tensor_desc_to_wire(const Variable& v, Wire td) {
  td.set("data_type", int(v.dtype()));
  for (auto d : v.shape()) td.add("dims", d);
}

inline void var_to_wire(const Variable& v, Wire out) {
  out.set_string("name", v.name()).set("persistable", v.persistable());
  Wire t = out.mutable_message("type");
  t.set("type", int(v.kind()));
  switch (v.kind()) {
    case VarKind::lod_tensor: {
      Wire l = t.mutable_message("lod_tensor");
      tensor_desc_to_wire(v, l.mutable_message("tensor"));
      l.set("lod_level", v.lod_level());
      break;
    }
    case VarKind::selected_rows: tensor_desc_to_wire(v, t.mutable_message("selected_rows")); break;
    case VarKind::lod_tensor_array: {
      Wire l = t.mutable_message("tensor_array");
      tensor_desc_to_wire(v, l.mutable_message("tensor"));
      l.set("lod_level", v.lod_level());
      break;
    }
    default: break;
  }
}

inline void check_dtype(int v, const std::string& var) {
  if (!is_valid_dtype(v)) throw Error(fmt::format("variable '{}' has an unknown data type {}", var, v));
}

inline void var_from_wire(const Wire& in, Block& b) {
  const std::string name = in.get_string("name");
  const Wire t = in.message("type");
  int kind = int(t.get("type"));
  static const int kinds[] = {7, 8, 9, 10, 11, 12, 13, 14, 15, 17};
  if (std::find(std::begin(kinds), std::end(kinds), kind) == std::end(kinds))
    throw Error(fmt::format("variable '{}' has an unsupported kind {}", name, kind));
  VarSpec spec{.persistable = in.get("persistable") != 0, .kind = VarKind(kind)};
  auto read = [&](const Wire& td, int lod) {
    check_dtype(int(td.get("data_type")), name);
    spec.dtype = DType(int(td.get("data_type")));
    const auto dims = wire_ints<int64_t>(td, "dims");
    if (std::string why = dims_error(dims); !why.empty()) throw Error(fmt::format("variable '{}' has a bad shape: {}", name, why));
    spec.shape = Shape(dims);
    spec.lod_level = lod;
  };
  if (t.has("lod_tensor")) read(t.message("lod_tensor").message("tensor"), int(t.message("lod_tensor").get("lod_level")));
  else if (t.has("selected_rows")) read(t.message("selected_rows"), 0);
  else if (t.has("tensor_array")) read(t.message("tensor_array").message("tensor"), int(t.message("tensor_array").get("lod_level")));
  if (b.has_var(name)) throw Error(fmt::format("variable '{}' is defined twice in block {}", name, b.idx()));
  b.create_var(name, spec);
}

inline void op_to_wire(const Operator& op, Wire out) {
  out.set_string("type", op.type());
  auto slots = [&](const std::vector<SlotArgs>& from, std::string_view field) {
    for (auto& s : from) {
      Wire v = out.add_message(field);
      v.set_string("parameter", s.slot);
      for (auto& a : s.args) v.add_string("arguments", a);
    }
  };
  slots(op.inputs(), "inputs");
  slots(op.outputs(), "outputs");
  for (auto& [k, a] : op.attrs()) attr_to_wire(a, k, out.add_message("attrs"));
  // Fluid's convention for where an op came from: the op_callstack attribute.
  if (op.origin().known()) {
    Wire a = out.add_message("attrs");
    a.set_string("name", "op_callstack").set("type", kAttrStrings);
    a.add_string("strings", fmt::format("{}:{}", op.origin().file, op.origin().line));
    a.add_string("strings", op.origin().what);
  }
  if (op.is_target()) out.set("is_target", true);
}

inline Operator op_from_wire(const Wire& in) {
  Operator op(in.get_string("type"));
  auto slots = [&](std::string_view field, bool input) {
    for (int i = 0; i < in.size(field); ++i) {
      const Wire v = in.message(field, i);
      std::vector<std::string> args(size_t(v.size("arguments")));
      for (int j = 0; j < int(args.size()); ++j) args[size_t(j)] = v.get_string("arguments", j);
      if (input) op.set_input(v.get_string("parameter"), std::move(args));
      else op.set_output(v.get_string("parameter"), std::move(args));
    }
  };
  slots("inputs", true);
  slots("outputs", false);
  for (int i = 0; i < in.size("attrs"); ++i) {
    const Wire a = in.message("attrs", i);
    const std::string name = a.get_string("name");
    if (name == "op_callstack" && a.get("type") == kAttrStrings && a.size("strings") == 2) {
      const std::string loc = a.get_string("strings", 0);
      auto colon = loc.rfind(':');
      int line = colon == std::string::npos ? 0 : std::atoi(loc.c_str() + colon + 1);
      op.set_origin(Origin(loc.substr(0, colon), line, a.get_string("strings", 1)));
      continue;
    }
    op.set_attr(name, attr_from_wire(a));
  }
  op.set_is_target(in.get("is_target") != 0);
  return op;
}

inline std::unique_ptr<pb::Message> program_to_wire(const Program& p) {
  auto msg = WireTypes::instance().make("ProgramDesc");
  Wire out(*msg);
  for (size_t i = 0; i < p.num_blocks(); ++i) {
    const Block& b = p.block(int(i));
    Wire bd = out.add_message("blocks");
    bd.set("idx", b.idx()).set("parent_idx", b.parent_idx()).set("forward_block_idx", b.forward_block_idx());
    for (auto* v : b.vars()) var_to_wire(*v, bd.add_message("vars"));
    for (auto* op : b.ops()) op_to_wire(*op, bd.add_message("ops"));
  }
  out.mutable_message("version").set("version", p.version());
  return msg;
}

inline Program program_from_wire(const Wire& in) {
  const int nblocks = in.size("blocks");
  if (nblocks == 0) throw Error("program has no blocks");
  Program p;
  for (int i = 0; i < nblocks; ++i) {
    const Wire bd = in.message("blocks", i);
    const int64_t idx = bd.get("idx"), parent = bd.get("parent_idx");
    if (idx != i) throw Error(fmt::format("block {} is stored at position {}", idx, i));
    if (i == 0 ? parent != -1 : (parent < 0 || parent >= i)) throw Error(fmt::format("block {} has an invalid parent {}", i, parent));
    Block& b = i == 0 ? p.global_block() : p.create_block(int(parent));
    b.set_forward_block_idx(int(bd.get("forward_block_idx")));
    for (int v = 0; v < bd.size("vars"); ++v) var_from_wire(bd.message("vars", v), b);
  }
  for (int i = 0; i < nblocks; ++i) {
    const Wire bd = in.message("blocks", i);
    for (int k = 0; k < bd.size("ops"); ++k) {
      Operator op = op_from_wire(bd.message("ops", k));
      for (auto& [name, a] : op.attrs()) {
        if (auto* r = std::get_if<BlockRef>(&a); r && (r->idx < 0 || r->idx >= nblocks))
          throw Error(fmt::format("op '{}' refers to block {} of a {}-block program", op.type(), r->idx, nblocks));
      }
      p.block(i).append_op(std::move(op));
    }
  }
  p.set_current_block(0);
  if (in.has("version")) p.set_version(in.message("version").get("version"));
  return p;
}

}  // namespace detail

OAR_FUNC std::string serialize(const Program& p) {
  std::string s;
  detail::program_to_wire(p)->SerializeToString(&s);
  return s;
}

OAR_FUNC Program parse_program(std::string_view bytes) {
  auto d = detail::WireTypes::instance().make("ProgramDesc");
  const detail::ProtobufLog log;
  if (!d->ParseFromArray(bytes.data(), int(bytes.size())))
    throw Error(fmt::format("not a valid program: {} bytes do not decode as a ProgramDesc (truncated or not a program file?){}", bytes.size(),
                            log.text().empty() ? "" : " (libprotobuf: " + log.text() + ")"));
  // libprotobuf keeps a proto2 string that is not UTF-8 and only logs it; no program oar or Fluid writes has one.
  if (!log.text().empty()) throw Error(fmt::format("not a valid program: the file is damaged: {}", log.text()));
  return detail::program_from_wire(detail::Wire(*d));
}

OAR_FUNC std::string to_text(const Program& p) {
  std::string s;
  google::protobuf::TextFormat::PrintToString(*detail::program_to_wire(p), &s);
  return s;
}

OAR_FUNC Program parse_program_text(const std::string& text) {
  auto d = detail::WireTypes::instance().make("ProgramDesc");
  const detail::ProtobufLog log;
  if (!google::protobuf::TextFormat::ParseFromString(text, d.get()))
    throw Error(fmt::format("not a valid program in protobuf text form{}", log.text().empty() ? "" : ": " + log.text()));
  return detail::program_from_wire(detail::Wire(*d));
}

OAR_FUNC void save_program(const Program& p, const std::filesystem::path& path) { detail::write_file_atomic(path, serialize(p)); }

OAR_FUNC Program load_program(const std::filesystem::path& path) {
  try {
    return parse_program(detail::read_file(path));
  } catch (Error& e) {
    e.add_context(fmt::format("while loading program file '{}'", path.string()));
    throw;
  }
}

}  // namespace oar
