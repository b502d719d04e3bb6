// oar/layers/static_rnn.hpp: StaticRNN, Fluid's fixed-length RNN builder over time-major tensors [T, N, ...].
// The step is recorded as a sub-tape and replayed into the step block of one `recurrent` op (ops/recurrent.hpp),
// the op a recurrent group records: each step input becomes N sequences of T rows on the way in and the outputs
// become [T, N, ...] again on the way out. The replay is in static_rnn-inl.hpp.
#pragma once
#include <algorithm>
#include <memory>
#include <source_location>
#include <type_traits>

#include "oar/tape/tape.hpp"

namespace oar {

namespace detail {
/// What a StaticRNN's replay needs from the recording of its step.
struct StaticRnnState {
  struct Input {
    Var x;    ///< the outer [T, N, ...] tensor
    Var x_t;  ///< its step view [N, ...], a creation of the step
  };
  struct Memory {
    Var var;    ///< the memory as the step reads it (the state of the previous step)
    Var init;   ///< the boot [N, ...], or empty: `shape` filled with `value`
    Shape shape;
    float value = 0;
    Var next;   ///< what update_memory gave it
    Origin updated;
  };
  struct Output {
    Var value;  ///< a Var of the step, [N, ...]
    std::source_location loc;
    Var result;  ///< [T, N, ...], recorded when the step closes
  };
  Var owner;  ///< the creation whose body is the step; its replay emits the recurrent op
  std::vector<Input> inputs;
  std::vector<Memory> memories;
  std::vector<Output> outputs;
  bool in_step = false;
  bool closed = false;  ///< the step function has returned (a shape query inside it sees a partial step)
};
/// `update_memory(mem, value)` of a StaticRNN or DynamicRNN (`who`): the memory of `memories` that `mem` is
/// takes `value` as its next state, once.
template <class Memory>
void set_memory_update(std::vector<Memory>& memories, const Var& mem, const Var& value, const Origin& at, std::string_view who) {
  auto it = std::find_if(memories.begin(), memories.end(), [&](const auto& m) { return m.var == mem; });
  if (it == memories.end())
    throw Error(fmt::format("update_memory: the first argument ({}) is not a memory of this {}: make it with rnn.memory(...)",
                            mem.valid() ? fmt::format("{} recorded at {}", mem.kind(), mem.origin().str()) : std::string("an empty oar::Var"), who),
                at);
  if (it->next.valid()) throw Error(fmt::format("update_memory: this memory is already updated at {}", it->updated.str()), at);
  if (!value.valid()) throw Error("update_memory: the new value is an empty oar::Var", at);
  it->next = value;
  it->updated = at;
}
}  // namespace detail

/// A recurrent network that runs a fixed number of steps T over time-major inputs (Fluid's StaticRNN): the step
/// function is recorded once and run at every t = 0 .. T-1; layers in it create their parameters in the global
/// block, the same at every step. Inside the step:
///   - `step_input(x)`: x is [T, N, ...] with T known when building; gives x[t], [N, ...].
///   - `memory(init)` / `memory(shape, value)`: the state of the previous step; at t = 0 the boot `init`
///     ([N, ...]) or `shape` ([batch, dims...], the batch dim taken from the step inputs' N) filled with `value`.
///   - `update_memory(mem, v)`: the state that `mem` holds at the next step is v.
///   - `output(v)`: v ([N, ...]) at every step, stacked by `rnn()` into [T, N, ...].
///   oar::StaticRNN rnn;
///   rnn.step([&] {
///     auto h_prev = rnn.memory(h0);
///     auto h = oar::fc({rnn.step_input(x), h_prev}, 32).act(oar::tanh);
///     rnn.update_memory(h_prev, h);
///     rnn.output(h);
///   });
///   auto out = rnn();  // [T, N, 32]
/// Gradients flow to the parameters, to the step inputs and to the boots.
class StaticRNN {
 public:
  StaticRNN() : s_(std::make_shared<detail::StaticRnnState>()) {}

  /// Records the step: `body` (no arguments) runs once, now; every layer it calls belongs to the step. Once per
  /// StaticRNN.
  template <class F>
  void step(F&& body, std::source_location loc = std::source_location::current()) {
    static_assert(std::is_invocable_v<F&>, "StaticRNN::step takes a function of no arguments: rnn.step([&] { ... })");
    Var owner = begin_step(loc);
    Tape::current().record_body(owner, [&] {
      struct Leave {
        detail::StaticRnnState* s;
        ~Leave() { s->in_step = false; }
      } leave{s_.get()};
      body();
    });
    end_step();
  }

  /// Step t of `x` ([T, N, ...], computed outside the step): [N, ...]. All step inputs share T and N.
  Var step_input(const Var& x, std::source_location loc = std::source_location::current());
  /// A memory that starts from `init` ([N, ...], computed outside the step; row n for batch item n).
  Var memory(const Var& init, std::source_location loc = std::source_location::current());
  /// A memory that starts as `shape` filled with `init_value`: shape is [batch, dims...] with the dims known; the
  /// batch is the step inputs' N, whatever dim 0 of `shape` says. Its dtype is the first step input's.
  Var memory(Shape shape, double init_value = 0.0, std::source_location loc = std::source_location::current());
  /// `mem` (a memory of this StaticRNN) holds `value` (a Var of the step, shaped like the memory) at the next step.
  void update_memory(const Var& mem, const Var& value, std::source_location loc = std::source_location::current());
  /// Collects `value` (a Var of the step, [N, ...]) at every step: one output of the StaticRNN.
  void output(const Var& value, std::source_location loc = std::source_location::current());
  void output(std::initializer_list<Var> values, std::source_location loc = std::source_location::current());

  /// The output [T, N, ...] when the step gave one (an oar::Error otherwise: use outputs()).
  Var operator()(std::source_location loc = std::source_location::current()) const;
  /// The outputs [T, N, ...], in the order output() was called.
  std::vector<Var> outputs(std::source_location loc = std::source_location::current()) const;

 private:
  Var begin_step(std::source_location loc);
  void end_step();
  void check_in_step(const char* what, std::source_location loc) const;
  std::shared_ptr<detail::StaticRnnState> s_;
};

}  // namespace oar

#if OAR_HEADER_ONLY
#include "oar/layers/static_rnn-inl.hpp"
#endif
