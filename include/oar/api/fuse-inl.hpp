// oar/api/fuse-inl.hpp: the implementation of fuse.hpp (included by it when header-only; compiled once into liboar otherwise).
#pragma once
#include "oar/api/fuse.hpp"

#include <map>

#include "oar/ops/conv2d.hpp"
#include "oar/ops/conv2d_fusion.hpp"
#include "oar/ops/elementwise.hpp"
#include "oar/ops/elementwise_binary.hpp"
#include "oar/ops/registry.hpp"

namespace oar {

namespace detail {

/// Readers and writers of each variable of `p`, counted over every block (a sub-block may read an outer
/// variable). A fusion leaves the counts of every variable it does not remove as they were (the fused op
/// reads the bias and writes the last output, as the ops it replaces did), so one count serves a whole pass.
struct VarUses {
  std::map<std::string, int> readers, writers;
  explicit VarUses(const Program& p) {
    for (size_t bi = 0; bi < p.num_blocks(); ++bi)
      for (auto* op : p.block(int(bi)).ops()) {
        for (auto& n : op->input_names()) ++readers[n];
        for (auto& n : op->output_names()) ++writers[n];
      }
  }
  bool written_once(const std::string& n) const {
    auto w = writers.find(n);
    return w != writers.end() && w->second == 1;
  }
  /// Read by exactly one op, written by exactly one.
  bool single(const std::string& n) const {
    auto r = readers.find(n);
    return r != readers.end() && r->second == 1 && written_once(n);
  }
};

/// The index of the op of `b` after `from` that reads `name`, or -1.
inline int reader_of(const Block& b, size_t from, const std::string& name) {
  for (size_t i = from + 1; i < b.num_ops(); ++i)
    for (auto& n : b.op(i).input_names())
      if (n == name) return int(i);
  return -1;
}

}  // namespace detail

OAR_FUNC FuseReport fuse_for_inference(Program& program, const std::set<std::string>& keep) {
  FuseReport report;
  Block& b = program.global_block();
  const detail::VarUses uses(program);
  for (size_t i = 0; i < b.num_ops(); ++i) {
    Operator& conv = b.op(i);
    if (conv.type() != ops::Conv2d::type || conv.output(ops::Conv2d::output).size() != 1) continue;
    const std::string conv_out = conv.output(ops::Conv2d::output)[0];
    if (keep.count(conv_out) || !uses.single(conv_out)) continue;
    const int ai = detail::reader_of(b, i, conv_out);
    if (ai < 0) continue;
    using Add = ops::ElementwiseAdd;
    const Operator& add = b.op(size_t(ai));
    if (add.type() != Add::type || add.input(Add::x) != std::vector<std::string>{conv_out} || add.attr_or(Add::axis, -1) != 1) continue;
    const std::string bias = add.input(Add::y)[0], add_out = add.output(Add::out)[0];
    const Variable* bv = b.find_var(bias);
    const Variable* fv = b.find_var(conv.input(ops::Conv2d::filter)[0]);
    if (!bv || !fv || bv->shape().rank() != 1 || bv->shape()[0] < 0 || bv->shape()[0] != fv->shape()[0] || bv->dtype() != fv->dtype()) continue;
    if (!uses.written_once(add_out)) continue;
    std::vector<size_t> drop{size_t(ai)};
    std::vector<std::string> gone{conv_out};
    std::string out = add_out, act = "identity";
    if (!keep.count(add_out) && uses.single(add_out)) {
      const int ri = detail::reader_of(b, size_t(ai), add_out);
      if (ri >= 0 && b.op(size_t(ri)).type() == ops::ReluOp::type && uses.written_once(b.op(size_t(ri)).output(ops::ReluOp::out)[0])) {
        drop.push_back(size_t(ri));
        gone.push_back(add_out);
        out = b.op(size_t(ri)).output(ops::ReluOp::out)[0];
        act = "relu";
      }
    }
    conv.set_type(std::string(ops::Conv2dFusion::type));
    conv.set_input(ops::Conv2dFusion::bias, {bias});
    conv.set_output(ops::Conv2dFusion::output, {out});
    conv.set_attr(ops::Conv2dFusion::activation, act);
    validate_op(conv);
    for (auto it = drop.rbegin(); it != drop.rend(); ++it) b.remove_op(*it);  // later index first (each refreshes writers)
    for (auto& n : gone) b.remove_var(n);
    ++report.conv_bias_act;
    report.removed.insert(report.removed.end(), gone.begin(), gone.end());
  }
  return report;
}

}  // namespace oar
