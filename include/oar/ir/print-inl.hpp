// oar/ir/print-inl.hpp: the implementation of print.hpp (included by it when header-only; compiled once into liboar otherwise).
#pragma once
#include "oar/ir/print.hpp"

#include <algorithm>
#include <filesystem>
#include <set>

namespace oar {

OAR_FUNC const char* kind_name(VarKind k) {
  switch (k) {
    case VarKind::lod_tensor: return "lod_tensor";
    case VarKind::selected_rows: return "selected_rows";
    case VarKind::feed_minibatch: return "feed_minibatch";
    case VarKind::fetch_list: return "fetch_list";
    case VarKind::step_scopes: return "step_scopes";
    case VarKind::lod_rank_table: return "lod_rank_table";
    case VarKind::lod_tensor_array: return "lod_tensor_array";
    case VarKind::place_list: return "place_list";
    case VarKind::reader: return "reader";
    case VarKind::raw: return "raw";
  }
  return "?";
}

namespace detail {

/// Attribute vectors longer than this print their first `kPrintMaxElems / 2` values and a count.
inline constexpr size_t kPrintMaxElems = 16;

/// attr_str, with long lists shortened: `[0, 1, 2, 3, 4, 5, 6, 7, ... (100 values)]`.
inline std::string print_attr(const Attribute& a) {
  return std::visit(
      [&](const auto& v) -> std::string {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::vector<int32_t>> || std::is_same_v<T, std::vector<int64_t>> ||
                      std::is_same_v<T, std::vector<float>> || std::is_same_v<T, std::vector<std::string>> ||
                      std::is_same_v<T, std::vector<bool>>) {
          if (v.size() > kPrintMaxElems) {
            T head(v.begin(), v.begin() + long(kPrintMaxElems / 2));
            std::string s = attr_str(Attribute(std::move(head)));
            s.pop_back();  // the closing ']'
            return fmt::format("{}, ... ({} values)]", s, v.size());
          }
        }
        return attr_str(a);
      },
      a);
}

/// `x` or `[a, b]` (a duplicable slot bound to several or no variables).
inline std::string print_args(const std::vector<std::string>& args) {
  if (args.size() == 1) return args[0];
  return fmt::format("[{}]", fmt::join(args, ", "));
}

OAR_FUNC std::vector<int> sub_blocks_of(const Operator& op) {
  std::vector<int> out;
  for (auto& [k, a] : op.attrs()) {
    if (auto* r = std::get_if<BlockRef>(&a)) out.push_back(r->idx);
    else if (auto* rs = std::get_if<BlockRefs>(&a)) out.insert(out.end(), rs->idx.begin(), rs->idx.end());
  }
  return out;
}

OAR_FUNC std::string var_type_str(const Variable& v) {
  std::string t = fmt::format("{}{}", name(v.dtype()), v.shape().str());
  switch (v.kind()) {
    case VarKind::lod_tensor: return t;
    case VarKind::selected_rows: return fmt::format("selected_rows<{}>", t);
    case VarKind::lod_tensor_array: return fmt::format("lod_tensor_array<{}>", t);
    default: return kind_name(v.kind());
  }
}

/// `name : type` followed by the markers; `width` pads the name so a block's colons line up.
inline std::string print_var(const Variable& v, size_t width) {
  std::string s = fmt::format("var {:<{}} : {}", v.name(), width, var_type_str(v));
  if (v.lod_level() > 0) s += fmt::format(" lod_level={}", v.lod_level());
  if (const ParamInfo* pi = v.param()) {
    std::vector<std::string> extra;
    if (!pi->trainable) extra.push_back("trainable=false");
    if (pi->learning_rate != 1.0f) extra.push_back(fmt::format("lr={}", pi->learning_rate));
    if (!pi->regularizer.empty()) extra.push_back(fmt::format("regularizer={}({})", pi->regularizer, pi->regularizer_coeff));
    if (pi->gradient_clip == "value") extra.push_back(fmt::format("clip=value({}, {})", pi->clip_a, pi->clip_b));
    else if (!pi->gradient_clip.empty()) extra.push_back(fmt::format("clip={}({})", pi->gradient_clip, pi->clip_a));
    s += extra.empty() ? std::string(" param") : fmt::format(" param({})", fmt::join(extra, ", "));
  } else if (v.persistable()) {
    s += " persistable";
  }
  return s;
}

inline std::string print_op(const Operator& op) {
  std::string s;
  const auto& outs = op.outputs();
  if (outs.size() == 1) {
    s = fmt::format("{} = ", fmt::join(outs[0].args, ", "));
  } else if (outs.size() > 1) {
    std::vector<std::string> parts;
    for (auto& o : outs) parts.push_back(fmt::format("{}={}", o.slot, print_args(o.args)));
    s = fmt::format("({}) = ", fmt::join(parts, ", "));
  }
  std::vector<std::string> ins;
  for (auto& i : op.inputs()) ins.push_back(fmt::format("{}={}", i.slot, print_args(i.args)));
  s += fmt::format("{}({})", op.type(), fmt::join(ins, ", "));
  if (!op.attrs().empty()) {
    std::vector<std::string> attrs;
    for (auto& [k, a] : op.attrs()) attrs.push_back(fmt::format("{}={}", k, print_attr(a)));
    s += fmt::format(" {{{}}}", fmt::join(attrs, ", "));
  }
  if (op.is_target()) s += " [target]";
  if (const Origin& o = op.origin(); o.known() || !o.what.empty()) {
    // NOTE: only the file's base name: source_location paths are absolute and would drown the line.
    Origin shown = o;
    shown.file = std::filesystem::path(o.file).filename().string();
    s += "  # " + shown.str();
  }
  return s;
}

inline void print_block(const Block& b, size_t indent, std::set<int>& printed, std::string& out) {
  printed.insert(b.idx());
  std::string pad(indent, ' ');
  out += fmt::format("{}block {} (parent {})", pad, b.idx(), b.parent_idx());
  if (b.forward_block_idx() >= 0) out += fmt::format(" (grad of block {})", b.forward_block_idx());
  out += '\n';
  size_t width = 0;
  for (auto* v : b.vars()) width = std::max(width, v->name().size());
  width = std::min<size_t>(width, 32);  // one very long name must not push every other line right
  for (auto* v : b.vars()) out += fmt::format("{}  {}\n", pad, print_var(*v, width));
  for (auto* op : b.ops()) {
    out += fmt::format("{}  {}\n", pad, print_op(*op));
    for (int sb : sub_blocks_of(*op))
      if (sb >= 0 && size_t(sb) < b.program().num_blocks() && !printed.count(sb)) print_block(b.program().block(sb), indent + 4, printed, out);
  }
}

}  // namespace detail

OAR_FUNC std::string to_string(const Program& p) {
  std::string out;
  std::set<int> printed;
  for (size_t i = 0; i < p.num_blocks(); ++i)
    if (!printed.count(int(i))) detail::print_block(p.block(int(i)), 0, printed, out);
  return out;
}

OAR_FUNC std::string to_string(const Block& b) {
  std::string out;
  std::set<int> printed;
  detail::print_block(b, 0, printed, out);
  return out;
}

OAR_FUNC std::string to_string(const Operator& op) { return detail::print_op(op); }

OAR_FUNC std::string to_string(const Variable& v) { return detail::print_var(v, 0); }

}  // namespace oar
