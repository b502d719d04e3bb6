// oar/layers/recurrent_group.hpp: the seeds' recurrent group over LoD sequences. The step function is recorded
// as a sub-tape and replayed into the step block of one `recurrent` op (ops/recurrent.hpp); `oar::memory(name)`
// inside it is the named layer's output at the previous step. The replay is in recurrent_group-inl.hpp.
#pragma once
#include <memory>
#include <source_location>
#include <type_traits>

#include "oar/tape/tape.hpp"

namespace oar {

namespace detail {
/// A memory recorded in a group's step: the layer it names, its width, its creation, whether it has a boot.
struct GroupMemory {
  std::string target;
  int64_t size = 0;
  Var var;
  bool has_boot = false;
};
/// What the group's replay needs from the recording of its step function.
struct GroupState {
  std::vector<Var> inputs;
  std::vector<Var> step_inputs;  ///< x_t of each input: creations of the body
  std::vector<GroupMemory> memories;
  Var output;
  bool closed = false;  ///< the step function has returned (a shape query inside it sees a partial group)
};
/// The groups whose step functions are being recorded on this thread, innermost last: where memory() goes.
inline thread_local std::vector<GroupState*> group_stack;

/// The names the ops of `b` and of the blocks nested in it read from outside `b` (parameters, outer
/// activations), in first-use order: a recurrent op's `parameters`.
std::vector<std::string> outer_reads(const Program& p, const Block& b);
/// The same for the names they write: a while op's Out (tensor arrays the body writes in place).
std::vector<std::string> outer_writes(const Program& p, const Block& b);
/// Records the group's creation, whose replay emits the recurrent op.
Var record_recurrent_group(std::shared_ptr<GroupState> g, std::source_location loc);
/// Records, inside the group's body, the per-step view of each input (x_t).
std::vector<Var> record_step_inputs(const std::shared_ptr<GroupState>& g, std::source_location loc);
}  // namespace detail

/// A recurrent group: `step` runs once per time step over the sequences of `inputs` (each [T, D] with one LoD
/// level, all with the same LoD). It receives the rows of step t of every sequence still running (longest
/// sequences first) and returns the step's output, one row per such sequence; the result holds those rows in
/// the inputs' order and LoD. Layers called in `step` are recorded into the step block; their parameters live
/// in the global block and are the same at every step.
///   auto out = oar::recurrent_group({x}, [&](std::vector<oar::Var> in) {
///     auto h_prev = oar::memory("h", 32);
///     return oar::fc({in[0], h_prev}, 32).act(oar::tanh).name("h");
///   });
/// `step` may also take one `oar::Var` when there is one input.
template <class F>
Var recurrent_group(std::vector<Var> inputs, F&& step, std::source_location loc = std::source_location::current()) {
  auto g = std::make_shared<detail::GroupState>();
  g->inputs = std::move(inputs);
  Var owner = detail::record_recurrent_group(g, loc);
  Tape::current().record_body(owner, [&] {
    std::vector<Var> xs = detail::record_step_inputs(g, loc);
    detail::group_stack.push_back(g.get());
    struct Pop {
      ~Pop() { detail::group_stack.pop_back(); }
    } pop;
    if constexpr (std::is_invocable_v<F&, std::vector<Var>>) {
      g->output = step(std::move(xs));
    } else {
      static_assert(std::is_invocable_v<F&, Var>, "recurrent_group's step takes std::vector<oar::Var> (one per input) or one oar::Var");
      if (xs.size() != 1)
        throw Error(fmt::format("recurrent_group: a step function taking one oar::Var needs one input, got {}", xs.size()), Origin(loc, "recurrent_group"));
      g->output = step(xs[0]);
    }
    g->closed = true;
  });
  return owner;
}
template <class F>
Var recurrent_group(const Var& input, F&& step, std::source_location loc = std::source_location::current()) {
  return recurrent_group(std::vector<Var>{input}, std::forward<F>(step), loc);
}

/// Inside a recurrent group's step: the output of the step's layer named `layer` (`.name(layer)`, created
/// anywhere in the step, before or after this call) at the previous time step, [k_t, size]. At step 0 it is
/// `boot` (one row per sequence, in LoD order: [S, size]) or zeros. A memory belongs to the group even when
/// nothing reads it; naming a layer the step never creates is an oar::Error at this line. Without a boot its
/// dtype is the first input's when that is floating point (else f32); the second form names it (a group over
/// integer ids feeding an f64 net).
Var memory(const std::string& layer, int64_t size, Var boot = {}, std::source_location loc = std::source_location::current());
Var memory(const std::string& layer, int64_t size, DType dtype, std::source_location loc = std::source_location::current());

}  // namespace oar

#if OAR_HEADER_ONLY
#include "oar/layers/recurrent_group-inl.hpp"
#endif
