// oar/layers/dynamic_rnn.hpp: DynamicRNN, Fluid's RNN builder over LoD sequences of any lengths, made the way
// Fluid makes it: a rank table sorts the sequences by length, the inputs become tensor arrays of time steps,
// and a `while` op runs the step, whose memories shrink to the sequences still running. The replay is in
// dynamic_rnn-inl.hpp.
#pragma once
#include <memory>
#include <source_location>
#include <type_traits>

#include "oar/tape/tape.hpp"

namespace oar {

namespace detail {
/// What a DynamicRNN's replay needs from the recording of its step, and the names its replay hands from the
/// loop's creation to the step's creations (set by the owner before the step is replayed).
struct DynamicRnnState {
  struct Input {
    Var x;    ///< the outer LoD tensor [N, ...]
    Var x_t;  ///< its rows at step t, [k_t, ...]: a creation of the step
  };
  struct Memory {
    Var var;     ///< the memory as the step reads it: the state of the previous step, [k_t, ...]
    Var init;    ///< the boot [S, ...] (one row per sequence), or empty: `shape` filled with `value`
    Shape shape;
    double value = 0;
    DType dtype = DType::f32;
    Var next;  ///< what update_memory gave it
    Origin updated;
  };
  struct Output {
    Var value;
    std::source_location loc;
    Var result;  ///< [N, ...] with the inputs' LoD, recorded when the step closes
  };
  Var owner;
  std::vector<Input> inputs;
  std::vector<Var> statics;  ///< static inputs (outer [S, ...]), in the order of `static_views`
  std::vector<Var> static_views;
  std::vector<Memory> memories;
  std::vector<Output> outputs;
  bool in_step = false;
  bool closed = false;

  // Set during a replay.
  std::string table, max_len, counter;                     ///< rank table, longest length, the step's counter i
  std::vector<std::string> arrays, boots, sorted_statics;  ///< per input, memory, static input
  std::vector<std::string> ex_memories;                    ///< per memory: the loop variable the step shrinks
  std::vector<std::string> out_arrays;                     ///< per output
};
}  // namespace detail

/// An RNN over LoD sequences of any lengths (Fluid's DynamicRNN). The step function is recorded once and runs
/// at every time step t = 0 .. T-1 (T the longest sequence) over the sequences longer than t, longest first;
/// layers in it create their parameters in the global block, the same at every step. Inside the step:
///   - `step_input(x)`: x is [N, ...] with one LoD level (all step inputs with the same LoD); gives row t of
///     every running sequence, [k_t, ...].
///   - `static_input(v)`: v is [S, ...], one row per sequence (LoD order); gives the running sequences' rows.
///   - `memory(init)` / `memory(shape, value, dtype)`: the state of the previous step, [k_t, ...]; at t = 0 the
///     boot `init` ([S, ...], row s for sequence s) or `shape` ([-1, dims...]) filled with `value`.
///   - `update_memory(mem, v)`: the state that `mem` holds at the next step is v.
///   - `output(v)`: v ([k_t, ...]) at every step; `rnn()` gives [N, ...] with x's LoD.
///   oar::DynamicRNN rnn;
///   rnn.step([&] {
///     auto h_prev = rnn.memory(oar::Shape{-1, 32});
///     auto h = oar::fc({rnn.step_input(x), h_prev}, 32).act(oar::tanh);
///     rnn.update_memory(h_prev, h);
///     rnn.output(h);
///   });
///   auto out = rnn();  // [N, 32], x's LoD
/// The program is Fluid's: lod_rank_table, max_sequence_len, lod_tensor_to_array, reorder_lod_tensor_by_rank
/// before the loop; read_from_array, shrink_rnn_memory, write_to_array, increment and less_than in the step
/// block of a `while` op; array_to_lod_tensor after it. Gradients flow to the parameters, the step inputs,
/// the static inputs and the boots.
class DynamicRNN {
 public:
  DynamicRNN() : s_(std::make_shared<detail::DynamicRnnState>()) {}
  /// Records the step: `body` (no arguments) runs once, now. Once per DynamicRNN.
  template <class F>
  void step(F&& body, std::source_location loc = std::source_location::current()) {
    static_assert(std::is_invocable_v<F&>, "DynamicRNN::step takes a function of no arguments: rnn.step([&] { ... })");
    Var owner = begin_step(loc);
    Tape::current().record_body(owner, [&] {
      struct Leave {
        detail::DynamicRnnState* s;
        ~Leave() { s->in_step = false; }
      } leave{s_.get()};
      body();
    });
    end_step();
  }
  /// Row t of every sequence of `x` ([N, ...], one LoD level, computed outside the step) still running.
  Var step_input(const Var& x, std::source_location loc = std::source_location::current());
  /// The rows of `v` ([S, ...], one per sequence in LoD order, computed outside the step) of the sequences
  /// still running, in the step's order.
  Var static_input(const Var& v, std::source_location loc = std::source_location::current());
  /// A memory that starts from `init` ([S, ...], one row per sequence in LoD order).
  Var memory(const Var& init, std::source_location loc = std::source_location::current());
  /// A memory that starts as `shape` ([-1, dims...], dims known) filled with `value`.
  Var memory(Shape shape, double value = 0.0, DType dtype = DType::f32, std::source_location loc = std::source_location::current());
  /// `mem` (a memory of this DynamicRNN) holds `value` (a Var of the step, shaped like the memory) at the next step.
  void update_memory(const Var& mem, const Var& value, std::source_location loc = std::source_location::current());
  /// Collects `value` (a Var of the step, [k_t, ...]) at every step: one output.
  void output(const Var& value, std::source_location loc = std::source_location::current());

  /// The output [N, ...] with the step inputs' LoD when the step gave one (an oar::Error otherwise).
  Var operator()(std::source_location loc = std::source_location::current()) const;
  /// The outputs, in the order output() was called.
  std::vector<Var> outputs(std::source_location loc = std::source_location::current()) const;

 private:
  Var begin_step(std::source_location loc);
  void end_step();
  void check_in_step(const char* what, std::source_location loc) const;
  void check_outer(const Var& v, const char* what, std::source_location loc) const;
  std::shared_ptr<detail::DynamicRnnState> s_;
};

}  // namespace oar

#if OAR_HEADER_ONLY
#include "oar/layers/dynamic_rnn-inl.hpp"
#endif
