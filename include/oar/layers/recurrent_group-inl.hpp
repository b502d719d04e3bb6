// oar/layers/recurrent_group-inl.hpp: the implementation of recurrent_group.hpp (included by it when header-only; compiled once into liboar otherwise).
#pragma once
#include "oar/layers/recurrent_group.hpp"

#include <algorithm>

#include "oar/ops/recurrent.hpp"
#include "oar/tape/replay.hpp"

namespace oar {

namespace detail {
/// The names the ops of `b` and of the blocks nested in it read (or write) that no block from theirs up to `b`
/// declares, in first-use order.
inline std::vector<std::string> outer_names(const Program& p, const Block& b, bool written) {
  std::vector<std::string> out;
  auto inside = [&](const Block* blk, const std::string& n) {
    for (; blk; blk = blk->parent()) {
      if (blk->has_var(n)) return true;
      if (blk == &b) return false;
    }
    return false;
  };
  for (size_t k = 0; k < p.num_blocks(); ++k) {
    const Block& blk = p.block(int(k));
    const Block* a = &blk;
    while (a && a != &b) a = a->parent();
    if (!a) continue;  // not b nor nested in it
    for (auto* op : blk.ops())
      for (auto& n : written ? op->output_names() : op->input_names())
        if (n != kEmptyVarName && !inside(&blk, n) && std::find(out.begin(), out.end(), n) == out.end()) out.push_back(n);
  }
  return out;
}
}  // namespace detail

OAR_FUNC std::vector<std::string> detail::outer_reads(const Program& p, const Block& b) { return outer_names(p, b, false); }
OAR_FUNC std::vector<std::string> detail::outer_writes(const Program& p, const Block& b) { return outer_names(p, b, true); }

OAR_FUNC std::vector<Var> detail::record_step_inputs(const std::shared_ptr<GroupState>& g, std::source_location loc) {
  std::vector<Var> xs;
  for (const Var& x : g->inputs) {
    auto replay = [](LayerHelper& h) {
      const Variable& x = h.input_var(0);
      Shape s = x.shape();
      if (s.rank() > 0) s[0] = -1;  // k_t rows: the sequences still running at step t
      Variable& v = h.block().create_var(h.name(), {.dtype = x.dtype(), .shape = s});
      return std::vector<std::string>{v.name()};
    };
    xs.push_back(record_layer("step_input", {x}, std::move(replay), loc)[0]);
  }
  g->step_inputs = xs;
  return xs;
}

OAR_FUNC Var detail::record_recurrent_group(std::shared_ptr<GroupState> g, std::source_location loc) {
  auto replay = [g](LayerHelper& h) -> std::vector<std::string> {
    if (g->inputs.empty()) throw Error("recurrent_group: needs at least one input sequence", h.origin());
    for (size_t i = 0; i < h.num_inputs(); ++i) {
      const Variable& x = h.input_var(i);
      if (x.lod_level() < 1)
        throw Error(fmt::format("recurrent_group: input '{}' has no LoD (lod_level 0): a recurrent group steps over sequences; give it one "
                                "(data(...).lod_level(1))",
                                x.name()),
                    h.origin());
      if (x.shape().rank() < 2)
        throw Error(fmt::format("recurrent_group: input '{}' must be [T, ...], one row per time step, got {}", x.name(), x.shape().str()), h.origin());
    }
    int sub = h.replay_body();
    // While the step function is still being recorded (a shape query inside it), the step block is partial.
    if (!g->closed) return {};
    Block& sb = h.main().block(sub);
    if (!g->output.valid()) throw Error("recurrent_group: the step function returned an empty oar::Var", h.origin());
    const std::string& inner = h.name_of(g->output);
    if (!sb.has_var(inner))
      throw Error(fmt::format("recurrent_group: the step function must return a layer computed in the step, but it returned '{}' ({} recorded at {})", inner,
                              g->output.kind(), g->output.origin().str()),
                  h.origin());
    const Variable& iv = sb.var(inner);

    using R = ops::Recurrent;
    std::vector<std::string> ex_states, states, boots;
    std::vector<int32_t> boot_index;
    for (auto& m : g->memories) {
      const std::string& pre = h.name_of(m.var);
      if (!sb.has_var(m.target))
        throw Error(fmt::format("memory: '{}' names no layer of the recurrent group's step (name the layer the memory follows with .name(\"{}\"))",
                                m.target, m.target),
                    m.var.origin());
      if (!sb.has_var(pre))
        throw Error(fmt::format("memory('{}'): call memory() in the step function itself, not in a cond or loop body nested in it", m.target),
                    m.var.origin());
      const Variable& st = sb.var(m.target);
      const Variable& pv = sb.var(pre);
      if (st.shape().rank() != 2 || (st.shape()[1] >= 0 && st.shape()[1] != m.size) || st.dtype() != pv.dtype())
        throw Error(fmt::format("memory: '{}' is {} {}, but the memory is {} [?, {}]", m.target, oar::name(st.dtype()), st.shape().str(), oar::name(pv.dtype()),
                                m.size),
                    m.var.origin());
      ex_states.push_back(pre);
      states.push_back(m.target);
      if (m.has_boot) {
        boot_index.push_back(int32_t(boots.size()));
        boots.push_back(h.context().topo.name_of(m.var.creation().inputs[0]));
      } else {
        boot_index.push_back(-1);
      }
    }
    std::vector<std::string> ins;
    for (size_t i = 0; i < h.num_inputs(); ++i) ins.push_back(h.input(i));
    std::vector<std::string> outer;
    for (auto& n : detail::outer_reads(h.main(), sb))
      if (std::find(ins.begin(), ins.end(), n) == ins.end() && std::find(boots.begin(), boots.end(), n) == boots.end()) outer.push_back(n);

    const Variable& x0 = h.input_var(0);
    Variable& out = h.create_tmp(iv.dtype());
    Shape os = iv.shape();
    if (os.rank() > 0) os[0] = x0.shape()[0];
    out.set_shape(os).set_lod_level(x0.lod_level());
    Variable& scopes = h.block().create_var(h.name() + ".step_scopes", {.kind = VarKind::step_scopes});
    Operator op{std::string(R::type)};
    op.set_input(R::inputs, ins).set_input(R::initial_states, boots).set_input(R::parameters, outer);
    op.set_output(R::outputs, {out.name()}).set_output(R::step_scopes, {scopes.name()});
    op.set_attr(R::sub_block, BlockRef{sub});
    std::vector<std::string> sins;
    for (auto& v : g->step_inputs) sins.push_back(h.name_of(v));
    op.set_attr(R::step_inputs, sins).set_attr(R::step_outputs, std::vector<std::string>{inner});
    op.set_attr(R::ex_states, ex_states).set_attr(R::states, states).set_attr(R::boot_states, boot_index);
    h.append_op(std::move(op));
    return std::vector<std::string>{out.name()};
  };
  return record_layer("recurrent_group", g->inputs, std::move(replay), loc)[0];
}

namespace detail {
Var record_memory(const std::string& layer, int64_t size, Var boot, std::optional<DType> dtype, std::source_location loc);
}

OAR_FUNC Var memory(const std::string& layer, int64_t size, Var boot, std::source_location loc) { return detail::record_memory(layer, size, boot, {}, loc); }
OAR_FUNC Var memory(const std::string& layer, int64_t size, DType dtype, std::source_location loc) { return detail::record_memory(layer, size, {}, dtype, loc); }

OAR_FUNC Var detail::record_memory(const std::string& layer, int64_t size, Var boot, std::optional<DType> dtype, std::source_location loc) {
  if (detail::group_stack.empty())
    throw Error(fmt::format("memory('{}'): a memory belongs to a recurrent group: call it inside recurrent_group's step function", layer), Origin(loc, "memory"));
  if (size <= 0) throw Error(fmt::format("memory('{}'): size must be positive, got {}", layer, size), Origin(loc, "memory"));
  detail::GroupState* g = detail::group_stack.back();
  const bool has_boot = boot.valid();
  auto replay = [size, has_boot, dtype, first = g->inputs.at(0)](LayerHelper& h) {
    DType t;
    if (has_boot) {
      const Variable& b = h.input_var(0);
      if (b.shape().rank() != 2 || (b.shape()[1] >= 0 && b.shape()[1] != size))
        throw Error(fmt::format("memory: the boot '{}' must be [sequences, {}], got {}", b.name(), size, b.shape().str()), h.origin());
      t = b.dtype();
    } else if (dtype) {
      t = *dtype;
    } else {
      t = h.block().var_recursive(h.name_of(first)).dtype();
      if (!is_float(t)) t = f32;
    }
    Variable& v = h.block().create_var(h.name(), {.dtype = t, .shape = Shape{-1, size}});
    return std::vector<std::string>{v.name()};
  };
  std::vector<Var> ins;
  if (has_boot) ins.push_back(boot);
  Var v = record_layer("memory", std::move(ins), std::move(replay), loc)[0];
  g->memories.push_back({layer, size, v, has_boot});
  return v;
}

}  // namespace oar
