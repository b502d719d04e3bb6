// oar/layers/dynamic_rnn-inl.hpp: the implementation of dynamic_rnn.hpp (included by it when header-only; compiled once into liboar otherwise).
#pragma once
#include "oar/layers/dynamic_rnn.hpp"

#include <algorithm>

#include "oar/layers/control_flow.hpp"
#include "oar/layers/recurrent_group.hpp"
#include "oar/layers/static_rnn.hpp"
#include "oar/ops/assign.hpp"
#include "oar/ops/compare.hpp"
#include "oar/ops/control_flow.hpp"
#include "oar/ops/fill_constant.hpp"
#include "oar/ops/lod_rank_table.hpp"
#include "oar/ops/tensor_array.hpp"
#include "oar/tape/replay.hpp"

namespace oar {

namespace detail {

/// An op of the tensor-array family, `Op`, by its slots (`ins` / `outs`: slot, variable).
template <class Op>
Operator array_op(std::vector<std::pair<Slot, std::string>> ins, std::vector<std::pair<Slot, std::string>> outs) {
  Operator op{std::string(Op::type)};
  for (auto& [slot, v] : ins) op.set_input(std::string(slot.name), {v});
  for (auto& [slot, v] : outs) op.set_output(std::string(slot.name), {v});
  return op;
}

/// The creation that owns the step. Its replay emits, in the enclosing block, the rank table of the first step
/// input, the longest length, each step input as a tensor array of steps, the boots in rank order and the first
/// condition; then the step block (the step's creations emit their array reads and memory shrinks there), the
/// counter's increment and the next condition at its end, and the `while` op over it.
inline Var record_dynamic_rnn(const std::shared_ptr<DynamicRnnState>& s, std::source_location loc) {
  auto replay = [s](LayerHelper& h) -> std::vector<std::string> {
    if (s->inputs.empty())
      throw Error("DynamicRNN: the step has no step_input, so nothing says which sequences to run: call rnn.step_input(x) with x a LoD tensor", h.origin());
    for (auto& in : s->inputs) {
      const Variable& x = h.block().var_recursive(h.name_of(in.x));
      if (x.lod_level() != 1 || x.shape().rank() < 1)
        throw Error(fmt::format("step_input: '{}' must be [N, ...] with one LoD level (the sequences), got {} with lod_level {}", x.name(), x.shape().str(),
                                x.lod_level()),
                    in.x_t.origin());
    }
    const std::string x0 = h.name_of(s->inputs[0].x);
    Block& outer = h.block();
    s->table = outer.create_var(h.name() + ".rank_table", {.dtype = DType::i64, .shape = Shape{-1, 2}, .kind = VarKind::lod_rank_table}).name();
    using Rank = ops::LoDRankTable;
    h.append_op(array_op<Rank>({{Rank::x, x0}}, {{Rank::out, s->table}}));
    s->max_len = h.create_tmp(DType::i64, true).name();
    using MaxLen = ops::MaxSequenceLen;
    h.append_op(array_op<MaxLen>({{MaxLen::rank_table, s->table}}, {{MaxLen::out, s->max_len}}));
    s->arrays.clear();
    for (auto& in : s->inputs) {
      const Variable& x = outer.var_recursive(h.name_of(in.x));
      Variable& a = outer.create_var(h.name() + ".input_" + std::to_string(s->arrays.size()), {.dtype = x.dtype(), .kind = VarKind::lod_tensor_array});
      using ToArray = ops::LoDTensorToArray;
      h.append_op(array_op<ToArray>({{ToArray::x, x.name()}, {ToArray::rank_table, s->table}}, {{ToArray::out, a.name()}}));
      s->arrays.push_back(a.name());
    }
    s->sorted_statics.clear();
    for (auto& v : s->statics) {
      const Variable& x = outer.var_recursive(h.name_of(v));
      Variable& r = h.create_tmp(x.dtype());
      using Reorder = ops::ReorderLoDTensorByRank;
      h.append_op(array_op<Reorder>({{Reorder::x, x.name()}, {Reorder::rank_table, s->table}}, {{Reorder::out, r.name()}}));
      s->sorted_statics.push_back(r.name());
    }
    const std::string i0 = h.create_tmp(DType::i64, true).name();
    {
      using F = ops::FillConstant;
      Operator f{std::string(F::type)};
      f.set_output(F::out, {i0}).set_attr(F::shape, std::vector<int64_t>{1}).set_attr(F::dtype, int32_t(DType::i64)).set_attr(F::value, 0.0f);
      h.append_op(std::move(f));
    }
    const std::string cond0 = h.create_tmp(DType::boolean, true).name();
    using Less = ops::LessThan;
    h.append_op(array_op<Less>({{Less::x, i0}, {Less::y, s->max_len}}, {{Less::out, cond0}}));
    s->boots.clear();
    for (auto& m : s->memories) {
      if (m.init.valid()) {
        const Variable& b = outer.var_recursive(h.name_of(m.init));
        if (b.shape().rank() < 1)
          throw Error(fmt::format("memory: the boot '{}' must be [S, ...], one row per sequence, got {}", b.name(), b.shape().str()), m.var.origin());
        Variable& r = h.create_tmp(b.dtype());
        using Reorder = ops::ReorderLoDTensorByRank;
        h.append_op(array_op<Reorder>({{Reorder::x, b.name()}, {Reorder::rank_table, s->table}}, {{Reorder::out, r.name()}}));
        s->boots.push_back(r.name());
      } else {
        using F = ops::FillConstantBatchSizeLike;
        Variable& v = h.create_tmp(m.dtype, true);
        std::vector<int64_t> dims(m.shape.begin(), m.shape.end());
        dims[0] = -1;
        Operator f{std::string(F::type)};
        f.set_input(F::input, {s->table}).set_output(F::out, {v.name()});
        f.set_attr(F::shape, dims).set_attr(F::dtype, int32_t(m.dtype)).set_attr(F::value, float(m.value));
        f.set_attr(F::input_dim_idx, int32_t(0)).set_attr(F::output_dim_idx, int32_t(0));
        h.append_op(std::move(f));
        s->boots.push_back(v.name());
      }
    }
    s->counter = h.name() + ".i";
    s->ex_memories.assign(s->memories.size(), "");
    s->out_arrays.assign(s->outputs.size(), "");

    int sub = h.replay_body();
    if (!s->closed) return {};
    Block& sb = h.main().block(sub);
    if (!sb.has_var(s->counter)) sb.create_var(s->counter, {.dtype = DType::i64, .shape = Shape{1}, .stop_gradient = true});
    const std::string i_next = s->counter + ".next", cond_next = h.name() + ".cond";
    sb.create_var(i_next, {.dtype = DType::i64, .shape = Shape{1}, .stop_gradient = true});
    sb.create_var(cond_next, {.dtype = DType::boolean, .shape = Shape{1}, .stop_gradient = true});
    {
      using Inc = ops::Increment;
      Operator inc = array_op<Inc>({{Inc::x, s->counter}}, {{Inc::out, i_next}});
      inc.set_attr(ops::Increment::step, 1.0f).set_origin(h.origin());
      add_op(sb, std::move(inc));
      using Less = ops::LessThan;
      Operator lt = array_op<Less>({{Less::x, i_next}, {Less::y, s->max_len}}, {{Less::out, cond_next}});
      lt.set_origin(h.origin());
      add_op(sb, std::move(lt));
    }
    std::vector<std::string> ex{s->counter}, next{i_next}, init{i0}, finals;
    for (size_t k = 0; k < s->memories.size(); ++k) {
      auto& m = s->memories[k];
      if (!m.next.valid()) throw Error(std::string(kNeverUpdated), m.var.origin());
      const std::string& nn = h.name_of(m.next);
      const Variable* nv = sb.find_var(nn);
      if (!nv || !sb.has_var(nn))
        throw Error(fmt::format("update_memory: '{}' ({} recorded at {}) is not computed in the DynamicRNN's step", nn, m.next.kind(), m.next.origin().str()),
                    m.updated);
      const Variable& pre = sb.var(h.name_of(m.var));
      // Checked here, as StaticRNN and recurrent_group do: a width that differs would otherwise surface only
      // when the run reaches the next step's first layer, at that layer's line.
      const Shape &ns = nv->shape(), &ps = pre.shape();
      int wrong = -1;  // the first dim after the batch known on both sides and different
      for (int d = 1; wrong < 0 && ns.rank() == ps.rank() && d < ps.rank(); ++d)
        if (!dims_compatible(ns[d], ps[d])) wrong = d;
      if (nv->dtype() != pre.dtype() || ns.rank() != ps.rank() || wrong >= 0) {
        std::string dim;
        if (wrong >= 0) {
          const std::string which = wrong == ps.rank() - 1 ? std::string("width") : fmt::format("dim {}", wrong);
          dim = fmt::format(": {} {} where the memory has {} {}", which, ns[wrong], which, ps[wrong]);
        }
        throw Error(fmt::format("update_memory: the new value '{}' is {} {}, but the memory '{}' ({}) is {} {}{}", nn, oar::name(nv->dtype()), ns.str(),
                                pre.name(), m.var.origin().str(), oar::name(pre.dtype()), ps.str(), dim),
                    m.updated);
      }
      ex.push_back(s->ex_memories[k]);
      next.push_back(nn);
      init.push_back(s->boots[k]);
    }
    for (size_t k = 0; k < ex.size(); ++k) {
      const Variable& e = sb.var(ex[k]);
      Variable& f = h.create_tmp(e.dtype(), true);
      f.set_shape(e.shape());
      finals.push_back(f.name());
    }
    using W = ops::While;
    Variable& scopes = outer.create_var(h.name() + ".step_scopes", {.kind = VarKind::step_scopes});
    Operator op{std::string(W::type)};
    op.set_input(W::x, outer_reads(h.main(), sb)).set_input(W::condition, {cond0}).set_input(W::init_states, init);
    op.set_output(W::out, outer_writes(h.main(), sb)).set_output(W::final_states, finals).set_output(W::step_scopes, {scopes.name()});
    op.set_attr(W::sub_block, BlockRef{sub}).set_attr(W::ex_states, ex).set_attr(W::states, next).set_attr(W::next_condition, cond_next);
    h.append_op(std::move(op));
    return {finals[0]};
  };
  return record_layer("dynamic_rnn", {}, std::move(replay), loc)[0];
}

/// Records output `i`: the tensor array the step wrote, back to the step inputs' sequences.
inline Var record_dynamic_rnn_output(const std::shared_ptr<DynamicRnnState>& s, size_t i) {
  auto replay = [s, i](LayerHelper& h) -> std::vector<std::string> {
    if (!h.creation().opts.act.empty())
      throw Error("output: a DynamicRNN output takes no .act(...): apply the activation in the step", h.origin());
    const std::string& arr = s->out_arrays.at(i);
    const Variable& a = h.block().var_recursive(arr);
    Variable& out = h.create_tmp(a.dtype());
    using FromArray = ops::ArrayToLoDTensor;
    h.append_op(array_op<FromArray>({{FromArray::x, arr}, {FromArray::rank_table, s->table}}, {{FromArray::out, out.name()}}));
    return {out.name()};
  };
  return record_layer("dynamic_rnn_output", {s->owner}, std::move(replay), s->outputs[i].loc)[0];
}

}  // namespace detail

OAR_FUNC void DynamicRNN::check_outer(const Var& v, const char* what, std::source_location loc) const {
  Tape& tape = Tape::current(Origin(loc, what));
  if (!v.valid()) throw Error(fmt::format("{}: an empty oar::Var", what), Origin(loc, what));
  if (tape.owns(v) && v.index() > s_->owner.index())
    throw Error(fmt::format("{}: its argument ({} recorded at {}) is computed in the step; it must be computed before the DynamicRNN", what, v.kind(),
                            v.origin().str()),
                Origin(loc, what));
}

OAR_FUNC Var DynamicRNN::record_owner(std::source_location loc) { return detail::record_dynamic_rnn(s_, loc); }

OAR_FUNC Var DynamicRNN::record_output(size_t i) { return detail::record_dynamic_rnn_output(s_, i); }

OAR_FUNC Var DynamicRNN::step_input(const Var& x, std::source_location loc) {
  check_in_step("step_input", loc);
  check_outer(x, "step_input", loc);
  const size_t k = s_->inputs.size();
  auto replay = [s = s_, k](LayerHelper& h) {
    const Variable& x = h.input_var(0);
    if (!h.block().has_var(s->counter)) h.block().create_var(s->counter, {.dtype = DType::i64, .shape = Shape{1}, .stop_gradient = true});
    Shape sh = x.shape();
    sh[0] = -1;
    Variable& v = h.block().create_var(h.name(), {.dtype = x.dtype(), .shape = sh});
    using Read = ops::ReadFromArray;
    h.append_op(detail::array_op<Read>({{Read::x, s->arrays.at(k)}, {Read::i, s->counter}}, {{Read::out, v.name()}}));
    return std::vector<std::string>{v.name()};
  };
  Var xt = record_layer("step_input", {x}, std::move(replay), loc)[0];
  Tape::current().mutable_creation(s_->owner).inputs.push_back(x);
  s_->inputs.push_back({x, xt});
  return xt;
}

OAR_FUNC Var DynamicRNN::static_input(const Var& v, std::source_location loc) {
  check_in_step("static_input", loc);
  check_outer(v, "static_input", loc);
  const size_t k = s_->statics.size();
  auto replay = [s = s_, k](LayerHelper& h) {
    const Variable& x = h.input_var(0);
    if (!h.block().has_var(s->counter)) h.block().create_var(s->counter, {.dtype = DType::i64, .shape = Shape{1}, .stop_gradient = true});
    Shape sh = x.shape();
    if (sh.rank() > 0) sh[0] = -1;
    Variable& out = h.block().create_var(h.name(), {.dtype = x.dtype(), .shape = sh});
    using Shrink = ops::ShrinkRNNMemory;
    h.append_op(detail::array_op<Shrink>({{Shrink::x, s->sorted_statics.at(k)}, {Shrink::i, s->counter}, {Shrink::rank_table, s->table}}, {{Shrink::out, out.name()}}));
    return std::vector<std::string>{out.name()};
  };
  Var view = record_layer("static_input", {v}, std::move(replay), loc)[0];
  Tape::current().mutable_creation(s_->owner).inputs.push_back(v);
  s_->statics.push_back(v);
  s_->static_views.push_back(view);
  return view;
}

OAR_FUNC Var DynamicRNN::memory(const Var& init, std::source_location loc) {
  check_in_step("memory", loc);
  check_outer(init, "memory", loc);
  const size_t k = s_->memories.size();
  auto replay = [s = s_, k](LayerHelper& h) {
    const Variable& b = h.input_var(0);
    if (!h.block().has_var(s->counter)) h.block().create_var(s->counter, {.dtype = DType::i64, .shape = Shape{1}, .stop_gradient = true});
    Shape sh = b.shape();
    if (sh.rank() > 0) sh[0] = -1;
    Variable& ex = h.block().create_var(h.name() + ".ex", {.dtype = b.dtype(), .shape = sh});
    s->ex_memories.at(k) = ex.name();
    Variable& v = h.block().create_var(h.name(), {.dtype = b.dtype(), .shape = sh});
    using Shrink = ops::ShrinkRNNMemory;
    h.append_op(detail::array_op<Shrink>({{Shrink::x, ex.name()}, {Shrink::i, s->counter}, {Shrink::rank_table, s->table}}, {{Shrink::out, v.name()}}));
    return std::vector<std::string>{v.name()};
  };
  Var v = record_layer("memory", {init}, std::move(replay), loc)[0];
  Tape::current().mutable_creation(s_->owner).inputs.push_back(init);
  s_->memories.push_back({.var = v, .init = init});
  return v;
}

OAR_FUNC Var DynamicRNN::memory(Shape shape, double value, DType dtype, std::source_location loc) {
  check_in_step("memory", loc);
  bool ok = shape.rank() >= 1;
  for (int i = 1; ok && i < shape.rank(); ++i) ok = shape[i] >= 0;
  if (!ok) throw Error(fmt::format("memory: the shape must be [-1, dims...] with the dims after the batch known, got {}", shape.str()), Origin(loc, "memory"));
  const size_t k = s_->memories.size();
  auto replay = [s = s_, k, shape, dtype](LayerHelper& h) {
    if (!h.block().has_var(s->counter)) h.block().create_var(s->counter, {.dtype = DType::i64, .shape = Shape{1}, .stop_gradient = true});
    Shape sh = shape;
    sh[0] = -1;
    Variable& ex = h.block().create_var(h.name() + ".ex", {.dtype = dtype, .shape = sh});
    s->ex_memories.at(k) = ex.name();
    Variable& v = h.block().create_var(h.name(), {.dtype = dtype, .shape = sh});
    using Shrink = ops::ShrinkRNNMemory;
    h.append_op(detail::array_op<Shrink>({{Shrink::x, ex.name()}, {Shrink::i, s->counter}, {Shrink::rank_table, s->table}}, {{Shrink::out, v.name()}}));
    return std::vector<std::string>{v.name()};
  };
  Var v = record_layer("memory", {}, std::move(replay), loc)[0];
  s_->memories.push_back({.var = v, .shape = shape, .value = value, .dtype = dtype});
  return v;
}

OAR_FUNC void DynamicRNN::output(const Var& value, std::source_location loc) {
  check_in_step("output", loc);
  if (!value.valid()) throw Error("output: an empty oar::Var", Origin(loc, "output"));
  const size_t k = s_->outputs.size();
  // The write into the output's tensor array is a creation of the step, at this line.
  auto replay = [s = s_, k](LayerHelper& h) {
    const Variable& v = h.input_var(0);
    if (!h.block().has_var(v.name()))
      throw Error(fmt::format("output: '{}' is not computed in the DynamicRNN's step", v.name()), h.origin());
    Block& outer = *const_cast<Block*>(h.block().parent());
    Variable& a = outer.create_var(h.name() + ".array", {.dtype = v.dtype(), .shape = v.shape(), .kind = VarKind::lod_tensor_array});
    s->out_arrays.at(k) = a.name();
    using Write = ops::WriteToArray;
    h.append_op(detail::array_op<Write>({{Write::x, v.name()}, {Write::i, s->counter}}, {{Write::out, a.name()}}));
    return std::vector<std::string>{a.name()};
  };
  record_layer("dynamic_rnn_write", {value}, std::move(replay), loc);
  s_->outputs.push_back({value, loc, {}});
}

}  // namespace oar
