// oar/ir/dot-inl.hpp: the implementation of dot.hpp (included by it when header-only; compiled once into liboar otherwise).
#pragma once
#include "oar/ir/dot.hpp"

#include <map>
#include <set>

namespace oar {

OAR_FUNC std::string dot_quote(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + '"';
}

namespace detail {

class DotWriter {
 public:
  explicit DotWriter(const Program& p) : p_(p) {}

  std::string run(int root) {
    const Block& b = p_.block(root);
    root_ = root;
    collect(b);
    std::string out = fmt::format("digraph {} {{\n", dot_quote(fmt::format("block {}", root)));
    out += "  compound=true;\n  rankdir=TB;\n";
    out += "  node [fontname=\"Helvetica\", fontsize=10];\n  edge [fontname=\"Helvetica\", fontsize=9, color=\"#555555\"];\n";
    // Variables of enclosing blocks first, outside every cluster.
    for (auto& [bidx, names] : outer_vars_)
      for (auto& n : names) out += "  " + var_node(bidx, n) + "\n";
    body(b, 1, out);
    out += edges_;
    return out + "}\n";
  }

 private:
  static std::string var_id(int bidx, const std::string& n) { return dot_quote(fmt::format("v{}:{}", bidx, n)); }
  static std::string op_id(int bidx, size_t i) { return dot_quote(fmt::format("op{}:{}", bidx, i)); }

  /// Which block declares `n` as seen from `b` (-1 when nobody does).
  static int owner(const Block& b, const std::string& n) {
    for (const Block* x = &b; x; x = x->parent())
      if (x->has_var(n)) return x->idx();
    return -1;
  }

  /// Walks the drawn blocks: which names some op writes, and which outer variables the ops use.
  void collect(const Block& b) {
    drawn_.insert(b.idx());
    for (auto* op : b.ops()) {
      for (auto& n : op->output_names()) written_.insert(n);
      for (auto& n : op->input_names()) {
        read_.insert(n);
        note_outer(b, n);
      }
      for (auto& n : op->output_names()) note_outer(b, n);
      for (int sb : sub_blocks_of(*op))
        if (sb >= 0 && size_t(sb) < p_.num_blocks() && !drawn_.count(sb)) collect(p_.block(sb));
    }
  }
  void note_outer(const Block& b, const std::string& n) {
    int o = owner(b, n);
    if (o < 0) undeclared_.insert(n);
    else if (!drawn_.count(o)) outer_vars_[o].insert(n);
  }

  std::string var_node(int bidx, const std::string& n) const {
    const Variable* v = bidx >= 0 ? &p_.block(bidx).var(n) : nullptr;
    std::string label = n;
    std::string style = "";
    if (!v) {
      label += "\n(undeclared)";
      style = ", style=dashed";
    } else {
      label += "\n" + var_type_str(*v);
      if (v->lod_level() > 0) label += fmt::format(" lod {}", v->lod_level());
      if (v->is_parameter()) {
        label += "\nparam";
        style = ", style=filled, fillcolor=\"#ffd8a8\", color=\"#d9480f\", penwidth=1.5";
      } else if (v->persistable()) {
        label += "\npersistable";
        style = ", style=filled, fillcolor=\"#e9ecef\"";
      } else if (!written_.count(n) && read_.count(n) && drawn_.count(bidx)) {
        label += "\ndata";
        style = ", style=filled, fillcolor=\"#d3f9d8\", color=\"#2b8a3e\"";
      }
    }
    return fmt::format("{} [label={}, shape=ellipse{}];", var_id(bidx, n), dot_quote(label), style);
  }

  void body(const Block& b, int depth, std::string& out) {
    std::string pad(size_t(depth) * 2, ' ');
    std::string first;  // a node of this block, for edges into its cluster
    for (auto* v : b.vars()) {
      out += pad + var_node(b.idx(), v->name()) + "\n";
      if (first.empty()) first = var_id(b.idx(), v->name());
    }
    for (auto& n : undeclared_)
      if (b.idx() == root_) out += pad + var_node(-1, n) + "\n";
    auto ops = b.ops();
    for (size_t i = 0; i < ops.size(); ++i) {
      const Operator& op = *ops[i];
      std::string id = op_id(b.idx(), i);
      if (first.empty()) first = id;
      std::string label = op.type();
      // The layer that made the op ("fc"), when it says more than the op type.
      if (const Origin& o = op.origin(); !o.what.empty() && o.what != op.type()) label += "\n" + o.what;
      out += fmt::format("{}{} [label={}, shape=box, style=\"rounded,filled\", fillcolor=\"#dbe4ff\", color=\"#364fc7\"];\n", pad, id,
                         dot_quote(label));
      for (auto& s : op.inputs())
        for (auto& n : s.args) edges_ += fmt::format("  {} -> {} [label={}];\n", var_id(owner(b, n), n), id, dot_quote(s.slot));
      for (auto& s : op.outputs())
        for (auto& n : s.args) edges_ += fmt::format("  {} -> {} [label={}];\n", id, var_id(owner(b, n), n), dot_quote(s.slot));
      for (int sb : sub_blocks_of(op)) {
        if (sb < 0 || size_t(sb) >= p_.num_blocks() || emitted_.count(sb) || sb == b.idx()) continue;
        emitted_.insert(sb);
        const Block& sub = p_.block(sb);
        out += fmt::format("{}subgraph {} {{\n", pad, dot_quote(fmt::format("cluster_{}", sb)));
        out += fmt::format("{}  label={}; style=dashed; color=\"#868e96\"; fontname=\"Helvetica\"; fontsize=10;\n", pad,
                           dot_quote(fmt::format("block {} ({})", sb, op.type())));
        std::string anchor = body_anchor(sub, depth + 1, out);
        out += pad + "}\n";
        edges_ += fmt::format("  {} -> {} [lhead={}, style=dashed, label=\"sub_block\"];\n", id, anchor, dot_quote(fmt::format("cluster_{}", sb)));
      }
    }
    last_anchor_ = first;
  }
  /// Writes a sub-block's body and returns a node inside it (a placeholder when the block is empty).
  std::string body_anchor(const Block& b, int depth, std::string& out) {
    body(b, depth, out);
    if (!last_anchor_.empty()) return last_anchor_;
    std::string id = dot_quote(fmt::format("empty{}", b.idx()));
    out += fmt::format("{}{} [label=\"(empty)\", shape=plaintext];\n", std::string(size_t(depth) * 2, ' '), id);
    return id;
  }
  const Program& p_;
  std::set<int> drawn_, emitted_;
  std::set<std::string> written_, read_, undeclared_;
  std::map<int, std::set<std::string>> outer_vars_;
  std::string edges_, last_anchor_;
  int root_ = 0;
};

}  // namespace detail

OAR_FUNC std::string to_dot(const Program& p, int block) { return detail::DotWriter(p).run(block); }

}  // namespace oar
