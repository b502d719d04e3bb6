// oar/layers/control_flow-inl.hpp: the implementation of control_flow.hpp (included by it when header-only; compiled once into liboar otherwise).
#pragma once
#include "oar/layers/control_flow.hpp"

#include <algorithm>

#include "oar/layers/recurrent_group.hpp"
#include "oar/ops/assign.hpp"
#include "oar/ops/control_flow.hpp"
#include "oar/tape/replay.hpp"

namespace oar {

OAR_FUNC std::vector<std::string> detail::append_conditional_block(LayerHelper& h, int sub, const std::vector<std::string>& results,
                                                                  const std::vector<std::string>& cond, bool scalar_condition) {
  Block& sb = h.main().block(sub);
  // Each result is assigned, inside the sub-block, to a variable of the enclosing block that code after it reads.
  std::vector<std::string> outs;
  for (const std::string& inner : results) {
    const Variable& iv = sb.var_recursive(inner);
    Variable& out = h.create_tmp(iv.dtype());
    out.set_shape(iv.shape()).set_lod_level(iv.lod_level());
    Operator assign{std::string(ops::Assign::type)};
    assign.set_input(ops::Assign::x, {inner}).set_output(ops::Assign::out, {out.name()});
    assign.set_origin(h.origin());
    add_op(sb, std::move(assign));
    outs.push_back(out.name());
  }
  std::vector<std::string> outer;  // variables of enclosing blocks the sub-block reads
  for (auto* op : sb.ops())
    for (auto& n : op->input_names())
      if (!sb.has_var(n) && std::find(outer.begin(), outer.end(), n) == outer.end()) outer.push_back(n);
  Variable& scope = h.block().create_var(h.name() + ".scope", {.kind = VarKind::step_scopes});
  using C = ops::ConditionalBlock;
  Operator op{std::string(C::type)};
  op.set_input(C::cond, cond).set_input(C::input, outer);
  op.set_output(C::out, outs).set_output(C::scope, {scope.name()});
  op.set_attr(C::sub_block, BlockRef{sub}).set_attr(C::is_scalar_condition, scalar_condition);
  h.append_op(std::move(op));
  return outs;
}

OAR_FUNC Var detail::record_cond(const Var& pred, std::shared_ptr<Var> result, std::source_location loc) {
  auto replay = [result](LayerHelper& h) {
    const int sub = h.replay_body();
    return append_conditional_block(h, sub, {h.name_of(*result)}, {h.input()}, true);
  };
  return record_layer("cond", {pred}, std::move(replay), loc)[0];
}

OAR_FUNC std::vector<Var> detail::record_loop_vars(const std::shared_ptr<WhileState>& w, std::source_location loc) {
  std::vector<Var> ex;
  for (const Var& x : w->init) {
    auto replay = [](LayerHelper& h) {
      const Variable& x = h.input_var(0);
      Variable& v = h.block().create_var(h.name(), {.dtype = x.dtype(), .shape = x.shape(), .lod_level = x.lod_level(), .kind = x.kind()});
      return std::vector<std::string>{v.name()};
    };
    ex.push_back(record_layer("loop_var", {x}, std::move(replay), loc)[0]);
  }
  w->ex = ex;
  return ex;
}

OAR_FUNC std::vector<Var> detail::record_while(std::shared_ptr<WhileState> w, const Var& first_cond, std::source_location loc) {
  if (w->init.empty()) throw Error("while_loop: needs at least one loop variable", Origin(loc, "while_loop"));
  if (w->max_iterations <= 0)
    throw Error(fmt::format("while_loop: max_iterations must be positive, got {}", w->max_iterations), Origin(loc, "while_loop"));
  const size_t n = w->init.size();
  auto replay = [w, n](LayerHelper& h) -> std::vector<std::string> {
    const Variable& c0 = h.input_var(0);
    if (c0.dtype() != DType::boolean || (c0.shape().known() && c0.shape().numel() != 1))
      throw Error(fmt::format("while_loop: cond must return one bool, but on the initial values it gave {} {}", oar::name(c0.dtype()), c0.shape().str()),
                  h.origin());
    int sub = h.replay_body();
    if (!w->closed) return {};
    Block& sb = h.main().block(sub);
    if (w->next.size() != n)
      throw Error(fmt::format("while_loop: the body returned {} loop variable(s) for {}; it must return one per loop variable", w->next.size(), n), h.origin());
    using W = ops::While;
    std::vector<std::string> ex, next, init, finals;
    for (size_t m = 0; m < n; ++m) {
      const std::string& e = h.name_of(w->ex[m]);
      const std::string& x = h.name_of(w->next[m]);
      const Variable& ev = sb.var(e);
      const Variable* xv = sb.find_var(x);
      if (!xv) throw Error(fmt::format("while_loop: loop variable {} returned by the body ('{}') is not visible in the loop", m, x), h.origin());
      // Only the batch (dim 0) and dims declared dynamic may change from step to step: the body's layers were
      // built for the starting shape, so a second step would fail at run time, away from the line that changed it.
      const Shape &es = ev.shape(), &xs = xv->shape();
      int changed = -1;
      for (int d = 1; changed < 0 && xs.rank() == es.rank() && d < es.rank(); ++d)
        if (!dims_compatible(xs[d], es[d])) changed = d;
      if (xv->dtype() != ev.dtype() || xv->kind() != ev.kind() || xs.rank() != es.rank() || changed >= 0)
        throw Error(fmt::format("while_loop: loop variable {} starts as {} {} but the body returns {} {} ('{}', recorded at {}){}", m, oar::name(ev.dtype()),
                                es.str(), oar::name(xv->dtype()), xs.str(), x, w->next[m].origin().str(),
                                changed < 0 ? std::string()
                                            : fmt::format(": dim {} changes from {} to {}; only the batch (dim 0) and dims declared -1 may change "
                                                          "in the body",
                                                          changed, es[changed], xs[changed])),
                    h.origin());
      ex.push_back(e);
      next.push_back(x);
      init.push_back(h.input(m + 1));
      Variable& f = h.create_tmp(ev.dtype());
      Shape fs = xv->shape();
      for (int64_t d = 0; d < fs.rank(); ++d)
        if (fs[d] != ev.shape()[d]) fs[d] = -1;  // changes from step to step
      f.set_shape(fs).set_lod_level(xv->lod_level());
      finals.push_back(f.name());
    }
    const std::string& nc = h.name_of(w->next_cond);
    const Variable& ncv = sb.var_recursive(nc);
    if (ncv.dtype() != DType::boolean)
      throw Error(fmt::format("while_loop: cond must return one bool, but on the body's results it gave {} {}", oar::name(ncv.dtype()), ncv.shape().str()),
                  h.origin());
    std::vector<std::string> reads = detail::outer_reads(h.main(), sb);
    std::vector<std::string> writes = detail::outer_writes(h.main(), sb);
    Variable& scopes = h.block().create_var(h.name() + ".step_scopes", {.kind = VarKind::step_scopes});
    Operator op{std::string(W::type)};
    op.set_input(W::x, reads).set_input(W::condition, {h.input(0)}).set_input(W::init_states, init);
    op.set_output(W::out, writes).set_output(W::final_states, finals).set_output(W::step_scopes, {scopes.name()});
    op.set_attr(W::sub_block, BlockRef{sub}).set_attr(W::ex_states, ex).set_attr(W::states, next).set_attr(W::next_condition, nc);
    op.set_attr(W::max_iterations, w->max_iterations);
    h.append_op(std::move(op));
    return finals;
  };
  std::vector<Var> ins{first_cond};
  ins.insert(ins.end(), w->init.begin(), w->init.end());
  return record_layer("while_loop", std::move(ins), std::move(replay), loc, int(n));
}

}  // namespace oar
