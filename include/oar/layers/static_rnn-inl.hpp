// oar/layers/static_rnn-inl.hpp: the implementation of static_rnn.hpp (included by it when header-only; compiled once into liboar otherwise).
#pragma once
#include "oar/layers/static_rnn.hpp"

#include <algorithm>

#include "oar/layers/recurrent_group.hpp"
#include "oar/ops/fill_constant.hpp"
#include "oar/ops/recurrent.hpp"
#include "oar/ops/sequence_pad.hpp"
#include "oar/ops/shape_ops.hpp"
#include "oar/ops/transpose.hpp"
#include "oar/tape/replay.hpp"

namespace oar {

namespace detail {

/// [1, 0, 2, 3, ...]: swaps time and batch, which is its own inverse.
inline std::vector<int32_t> swap_first_two(int rank) {
  std::vector<int32_t> perm;
  for (int i = 0; i < rank; ++i) perm.push_back(i < 2 ? 1 - i : i);
  return perm;
}

/// The step inputs' T and N (N may be -1), checked: each input [T, N, ...] with T known, all alike. Errors name
/// the step_input line.
inline std::pair<int64_t, int64_t> static_rnn_steps(LayerHelper& h, const StaticRnnState& s) {
  if (s.inputs.empty())
    throw Error("StaticRNN: the step has no step_input, so nothing says how many steps to run: call rnn.step_input(x) with x [T, N, ...]", h.origin());
  int64_t T = -1, N = -1;
  for (size_t i = 0; i < s.inputs.size(); ++i) {
    const Variable& x = h.block().var_recursive(h.name_of(s.inputs[i].x));
    const Shape& xs = x.shape();
    const Origin& at = s.inputs[i].x_t.origin();
    if (xs.rank() < 3)
      throw Error(fmt::format("step_input: '{}' must be time-major [T, N, ...] (rank >= 3), got {}", x.name(), xs.str()), at);
    if (xs[0] < 1)
      throw Error(fmt::format("step_input: '{}' is {}: a StaticRNN runs a fixed number of steps, so T (dim 0) must be known and positive", x.name(), xs.str()),
                  at);
    if (i > 0 && xs[0] != T)
      throw Error(fmt::format("step_input: '{}' has {} time steps, but the first step input has {} ({})", x.name(), xs[0], T, xs.str()), at);
    if (!dims_compatible(xs[1], N))
      throw Error(fmt::format("step_input: '{}' has a batch of {}, but the first step input has {} ({})", x.name(), xs[1], N, xs.str()), at);
    T = xs[0];
    if (N < 0) N = xs[1];
  }
  return {T, N};
}

inline Var record_static_rnn(const std::shared_ptr<StaticRnnState>& s, std::source_location loc) {
  // The replay, in the current block: each step input [T, N, ...] becomes N sequences of T rows (transpose to
  // [N, T, ...], then sequence_unpad with every length T), the boots given by a value are filled, then the step
  // block and the recurrent op over it. Its outputs are the step outputs as sequences; the output creations
  // turn them back into [T, N, ...].
  auto replay = [s](LayerHelper& h) -> std::vector<std::string> {
    auto [T, N] = static_rnn_steps(h, *s);
    const std::string& x0 = h.name_of(s->inputs[0].x);
    const DType dtype0 = h.block().var_recursive(x0).dtype();

    using F = ops::FillConstantBatchSizeLike;
    auto fill_like_batch = [&](Shape shape, DType t, float value) -> std::string {
      Variable& v = h.create_tmp(t, true);
      std::vector<int64_t> dims(shape.begin(), shape.end());
      dims[0] = -1;
      Operator op{std::string(F::type)};
      op.set_input(F::input, {x0}).set_output(F::out, {v.name()});
      op.set_attr(F::shape, dims).set_attr(F::dtype, int32_t(t)).set_attr(F::value, value);
      op.set_attr(F::input_dim_idx, int32_t(1)).set_attr(F::output_dim_idx, int32_t(0));
      h.append_op(std::move(op));
      return v.name();
    };
    const std::string lengths = fill_like_batch(Shape{N}, DType::i64, float(T));
    std::vector<std::string> ins;
    for (auto& in : s->inputs) {
      const Variable& x = h.block().var_recursive(h.name_of(in.x));
      using Tr = ops::Transpose;
      Variable& xt = h.create_tmp(x.dtype());
      Operator tr{std::string(Tr::type)};
      tr.set_input(Tr::x, {x.name()}).set_output(Tr::out, {xt.name()}).set_attr(Tr::axis, swap_first_two(x.shape().rank()));
      h.append_op(std::move(tr));
      using U = ops::SequenceUnpad;
      Variable& seq = h.create_tmp(x.dtype());
      Operator un{std::string(U::type)};
      un.set_input(U::x, {xt.name()}).set_input(U::length, {lengths}).set_output(U::out, {seq.name()});
      h.append_op(std::move(un));
      ins.push_back(seq.name());
    }
    std::vector<std::string> boots;
    std::vector<int32_t> boot_index;
    for (auto& m : s->memories) {
      std::string boot;
      if (m.init.valid()) {
        boot = h.name_of(m.init);
        const Shape& bs = h.block().var_recursive(boot).shape();
        if (bs.rank() < 1 || !dims_compatible(bs[0], N))
          throw Error(fmt::format("memory: the boot '{}' must be [N, ...] with the step inputs' batch N = {}, got {}", boot, N, bs.str()), m.var.origin());
      } else if (m.value != 0) {
        boot = fill_like_batch(m.shape, dtype0, m.value);
      } else {
        boot_index.push_back(-1);  // the recurrent op starts such a memory at zeros
        continue;
      }
      auto it = std::find(boots.begin(), boots.end(), boot);
      boot_index.push_back(int32_t(it - boots.begin()));
      if (it == boots.end()) boots.push_back(boot);
    }

    int sub = h.replay_body();
    // While the step function is still being recorded (a shape query inside it), the step block is partial.
    if (!s->closed) return {};
    Block& sb = h.main().block(sub);
    // `v` as a variable of the step block; an outer Var is an error at `where`.
    auto of_step = [&](const Var& v, const Origin& where, std::string_view what) -> const std::string& {
      const std::string& n = h.name_of(v);
      if (!sb.has_var(n))
        throw Error(fmt::format("{}: '{}' ({} recorded at {}) is not computed in the StaticRNN's step", what, n, v.kind(), v.origin().str()), where);
      return n;
    };
    std::vector<std::string> ex_states, states;
    for (auto& m : s->memories) {
      if (!m.next.valid()) throw Error(std::string(kNeverUpdated), m.var.origin());
      const Variable& pre = sb.var(h.name_of(m.var));
      const Variable& next = sb.var(of_step(m.next, m.updated, "update_memory"));
      bool fits = next.dtype() == pre.dtype() && next.shape().rank() == pre.shape().rank();
      for (int i = 1; fits && i < pre.shape().rank(); ++i) fits = dims_compatible(next.shape()[i], pre.shape()[i]);
      if (!fits)
        throw Error(fmt::format("update_memory: the new value '{}' is {} {}, but the memory is {} {}", next.name(), oar::name(next.dtype()), next.shape().str(),
                                oar::name(pre.dtype()), pre.shape().str()),
                    m.updated);
      ex_states.push_back(pre.name());
      states.push_back(next.name());
    }
    std::vector<std::string> step_outputs, outs;
    for (auto& o : s->outputs) {
      const Origin at(o.loc, "output");
      const Variable& v = sb.var(of_step(o.value, at, "output"));
      if (v.shape().rank() < 1) throw Error(fmt::format("output: '{}' must be [N, ...], one row per batch item, got {}", v.name(), v.shape().str()), at);
      step_outputs.push_back(v.name());
      Variable& out = h.create_tmp(v.dtype());
      Shape os = v.shape();
      os[0] = N >= 0 ? N * T : -1;
      out.set_shape(os).set_lod_level(1);
      outs.push_back(out.name());
    }
    std::vector<std::string> step_inputs, outer;
    for (auto& in : s->inputs) step_inputs.push_back(h.name_of(in.x_t));
    for (auto& n : outer_reads(h.main(), sb))
      if (std::find(boots.begin(), boots.end(), n) == boots.end()) outer.push_back(n);

    using R = ops::Recurrent;
    Variable& scopes = h.block().create_var(h.name() + ".step_scopes", {.kind = VarKind::step_scopes});
    Operator op{std::string(R::type)};
    op.set_input(R::inputs, ins).set_input(R::initial_states, boots).set_input(R::parameters, outer);
    op.set_output(R::outputs, outs).set_output(R::step_scopes, {scopes.name()});
    op.set_attr(R::sub_block, BlockRef{sub});
    op.set_attr(R::step_inputs, step_inputs).set_attr(R::step_outputs, step_outputs);
    op.set_attr(R::ex_states, ex_states).set_attr(R::states, states).set_attr(R::boot_states, boot_index);
    h.append_op(std::move(op));
    return outs;
  };
  return record_layer("static_rnn", {}, std::move(replay), loc)[0];
}

/// Records output `i` of the StaticRNN: its rows (batch item n, step t) at row n * T + t become [T, N, ...].
inline Var record_static_rnn_output(const std::shared_ptr<StaticRnnState>& s, size_t i) {
  auto replay = [s, i](LayerHelper& h) -> std::vector<std::string> {
    if (!h.creation().opts.act.empty())
      throw Error("output: a StaticRNN output takes no .act(...): apply the activation in the step", h.origin());
    const std::string& seq = h.context().topo.creation_outputs.at(s->owner.index()).at(i);
    const Variable& v = h.block().var_recursive(seq);
    const int64_t T = h.block().var_recursive(h.name_of(s->inputs[0].x)).shape()[0];
    std::vector<int32_t> dims{-1, int32_t(T)};
    for (int d = 1; d < v.shape().rank(); ++d) {
      if (v.shape()[d] < 0)
        throw Error(fmt::format("output: '{}' is {}: a StaticRNN output needs its dims after the batch known", h.name_of(s->outputs[i].value), v.shape().str()),
                    h.origin());
      dims.push_back(int32_t(v.shape()[d]));
    }
    using Re = ops::Reshape;
    Variable& r = h.create_tmp(v.dtype());
    Operator re{std::string(Re::type)};
    re.set_input(Re::x, {seq}).set_output(Re::out, {r.name()}).set_attr(Re::shape, dims);
    h.append_op(std::move(re));
    using Tr = ops::Transpose;
    Variable& out = h.create_tmp(v.dtype());
    Operator tr{std::string(Tr::type)};
    tr.set_input(Tr::x, {r.name()}).set_output(Tr::out, {out.name()}).set_attr(Tr::axis, swap_first_two(int(dims.size())));
    h.append_op(std::move(tr));
    return {out.name()};
  };
  return record_layer("static_rnn_output", {s->owner}, std::move(replay), s->outputs[i].loc)[0];
}

}  // namespace detail

OAR_FUNC Var StaticRNN::record_owner(std::source_location loc) { return detail::record_static_rnn(s_, loc); }

OAR_FUNC Var StaticRNN::record_output(size_t i) { return detail::record_static_rnn_output(s_, i); }

OAR_FUNC Var StaticRNN::step_input(const Var& x, std::source_location loc) {
  check_in_step("step_input", loc);
  Tape& tape = Tape::current(Origin(loc, "step_input"));
  if (x.valid() && tape.owns(x) && x.index() > s_->owner.index())
    throw Error(fmt::format("step_input: x ({} recorded at {}) is computed in the step; a step input must be computed before the StaticRNN", x.kind(),
                            x.origin().str()),
                Origin(loc, "step_input"));
  auto replay = [](LayerHelper& h) {
    const Variable& x = h.input_var(0);
    // The StaticRNN's replay has checked x is [T, N, ...] before replaying the step.
    Variable& v = h.block().create_var(h.name(), {.dtype = x.dtype(), .shape = x.shape().slice(1, x.shape().rank())});
    return std::vector<std::string>{v.name()};
  };
  Var xt = record_layer("step_input", {x}, std::move(replay), loc)[0];
  tape.mutable_creation(s_->owner).inputs.push_back(x);
  s_->inputs.push_back({x, xt});
  return xt;
}

OAR_FUNC Var StaticRNN::memory(const Var& init, std::source_location loc) {
  check_in_step("memory", loc);
  Tape& tape = Tape::current(Origin(loc, "memory"));
  if (init.valid() && tape.owns(init) && init.index() > s_->owner.index())
    throw Error(fmt::format("memory: the boot ({} recorded at {}) is computed in the step; it must be computed before the StaticRNN", init.kind(),
                            init.origin().str()),
                Origin(loc, "memory"));
  auto replay = [](LayerHelper& h) {
    const Variable& b = h.input_var(0);
    Variable& v = h.block().create_var(h.name(), {.dtype = b.dtype(), .shape = b.shape()});
    return std::vector<std::string>{v.name()};
  };
  Var v = record_layer("memory", {init}, std::move(replay), loc)[0];
  tape.mutable_creation(s_->owner).inputs.push_back(init);
  s_->memories.push_back({.var = v, .init = init});
  return v;
}

OAR_FUNC Var StaticRNN::memory(Shape shape, double init_value, std::source_location loc) {
  check_in_step("memory", loc);
  bool ok = shape.rank() >= 1;
  for (int i = 1; ok && i < shape.rank(); ++i) ok = shape[i] >= 0;
  if (!ok)
    throw Error(fmt::format("memory: the shape must be [batch, dims...] with the dims after the batch known, got {}", shape.str()), Origin(loc, "memory"));
  auto replay = [s = s_, shape](LayerHelper& h) {
    if (s->inputs.empty())
      throw Error("memory: a memory given by its shape takes its batch and dtype from the step inputs, and the step has none", h.origin());
    const Variable& x = h.block().var_recursive(h.name_of(s->inputs[0].x));
    Shape sh = shape;
    sh[0] = x.shape().rank() >= 2 ? x.shape()[1] : -1;
    Variable& v = h.block().create_var(h.name(), {.dtype = x.dtype(), .shape = sh});
    return std::vector<std::string>{v.name()};
  };
  Var v = record_layer("memory", {}, std::move(replay), loc)[0];
  s_->memories.push_back({.var = v, .shape = shape, .value = float(init_value)});
  return v;
}

OAR_FUNC void StaticRNN::output(const Var& value, std::source_location loc) {
  check_in_step("output", loc);
  if (!value.valid()) throw Error("output: an empty oar::Var", Origin(loc, "output"));
  s_->outputs.push_back({value, loc, {}});
}

OAR_FUNC void StaticRNN::output(std::initializer_list<Var> values, std::source_location loc) {
  for (auto& v : values) output(v, loc);
}

}  // namespace oar
