// oar/layers/control_flow.hpp: layers whose body is a lambda recorded as a sub-tape and replayed into a
// sub-block: `oar::cond(pred, [&] { return ...; })` and `oar::while_loop(vars, cond, body)`. The replays are
// in control_flow-inl.hpp.
#pragma once
#include <memory>
#include <source_location>
#include <type_traits>
#include <vector>

#include "oar/tape/tape.hpp"

namespace oar {

namespace detail {
/// Records cond's creation; `*result` (the body's result, set once the body is recorded) is copied to its output.
Var record_cond(const Var& pred, std::shared_ptr<Var> result, std::source_location loc);

/// For the replay of a creation whose body became sub-block `sub`: assigns each of `results` (variables of the
/// sub-block) to a new variable of the enclosing block, inside the sub-block, then appends the conditional_block
/// op that runs the sub-block when `cond` holds (one bool when `scalar_condition`; otherwise when every cond
/// tensor has rows), reading the outer variables the sub-block reads. Returns the new variables, in order.
std::vector<std::string> append_conditional_block(LayerHelper& h, int sub, const std::vector<std::string>& results, const std::vector<std::string>& cond,
                                                  bool scalar_condition);

/// What a while loop's replay needs from the recording of its body.
struct WhileState {
  std::vector<Var> init;  ///< the loop variables' initial values (outer)
  std::vector<Var> ex;    ///< the loop variables as the body sees them: creations of the body
  std::vector<Var> next;  ///< what the body returned: their values at the next step
  Var next_cond;          ///< the condition on `next`, recorded in the body
  int64_t max_iterations = 0;
  bool closed = false;  ///< the body has returned (a shape query inside it sees a partial loop)
};
/// Records the loop's creation (inputs: the first condition, then the initial values); its replay emits `while`.
std::vector<Var> record_while(std::shared_ptr<WhileState> w, const Var& first_cond, std::source_location loc);
/// Records, inside the body, the loop variables as the body reads them.
std::vector<Var> record_loop_vars(const std::shared_ptr<WhileState>& w, std::source_location loc);
}  // namespace detail

/// How a while loop runs.
struct LoopOptions {
  /// More steps than this is an oar::Error at the loop's line (a condition that never turns false).
  int64_t max_iterations = int64_t(1) << 20;
};

/// A while loop over loop variables (Fluid's While op, in the functional form of TensorFlow's and JAX's
/// while_loop): while `cond(v)` (one bool) holds, `v = body(v)`; returns the last `v`. `cond` and `body` take
/// `std::vector<oar::Var>` (the loop variables, in order) and return an `oar::Var` and a `std::vector<oar::Var>`
/// of the same length, dtypes and shapes, except in the batch (dim 0) and in dims declared -1 (any other change is
/// an oar::Error when the program is built). `cond` is recorded twice: on the initial values (outside the loop) and
/// on the body's results (inside it). Layers in `body` create their parameters in the global block, the same at
/// every step; the body may read any outer variable and write tensor arrays (`oar::array_write`). Gradients flow
/// through the steps to the initial values, the parameters and the arrays the body reads.
///   auto out = oar::while_loop({i, h},
///       [&](std::vector<oar::Var> v) { return oar::less_than(v[0], n); },
///       [&](std::vector<oar::Var> v) { return std::vector<oar::Var>{oar::increment(v[0]), oar::fc(v[1], 16).act(oar::tanh)}; });
template <class C, class B>
std::vector<Var> while_loop(std::vector<Var> loop_vars, C&& cond, B&& body, LoopOptions options = {},
                            std::source_location loc = std::source_location::current()) {
  static_assert(std::is_invocable_r_v<Var, C&, std::vector<Var>>, "while_loop's cond takes std::vector<oar::Var> and returns an oar::Var (one bool)");
  static_assert(std::is_invocable_r_v<std::vector<Var>, B&, std::vector<Var>>,
                "while_loop's body takes std::vector<oar::Var> and returns std::vector<oar::Var> (the next loop variables)");
  auto w = std::make_shared<detail::WhileState>();
  w->init = std::move(loop_vars);
  w->max_iterations = options.max_iterations;
  Var first = cond(w->init);
  std::vector<Var> outs = detail::record_while(w, first, loc);
  Tape::current().record_body(outs[0], [&] {
    std::vector<Var> ex = detail::record_loop_vars(w, loc);
    w->next = body(ex);
    if (w->next.size() == w->init.size()) w->next_cond = cond(w->next);
    w->closed = true;
  });
  return outs;
}

/// Runs `body` only when `pred` (bool [1]) is true; the body's result is copied to the returned Var.
/// The body is recorded as a sub-tape and becomes a sub-block (conditional_block).
///   auto y = oar::cond(flag, [&] { return oar::fc(x, 10); });
template <class F>
Var cond(const Var& pred, F&& body, std::source_location loc = std::source_location::current()) {
  auto result = std::make_shared<Var>();
  Var owner = detail::record_cond(pred, result, loc);
  *result = Tape::current().record_body(owner, std::forward<F>(body));
  return owner;
}

}  // namespace oar

#if OAR_HEADER_ONLY
#include "oar/layers/control_flow-inl.hpp"
#endif
