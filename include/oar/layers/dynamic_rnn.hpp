// oar/layers/dynamic_rnn.hpp: DynamicRNN, Fluid's RNN builder over LoD sequences of any lengths, made the way
// Fluid makes it: a rank table sorts the sequences by length, the inputs become tensor arrays of time steps,
// and a `while` op runs the step, whose memories shrink to the sequences still running. The replay is in
// dynamic_rnn-inl.hpp.
#pragma once
#include <memory>
#include <source_location>
#include <type_traits>

#include "oar/layers/rnn_builder.hpp"
#include "oar/tape/tape.hpp"

namespace oar {

namespace detail {
/// What a DynamicRNN's replay needs from the recording of its step, and the names its replay hands from the
/// loop's creation to the step's creations (set by the owner before the step is replayed).
struct DynamicRnnState : StepRecording {
  struct Input {
    Var x;    ///< the outer LoD tensor [N, ...]
    Var x_t;  ///< its rows at step t, [k_t, ...]: a creation of the step
  };
  std::vector<Input> inputs;
  std::vector<Var> statics;  ///< static inputs (outer [S, ...]), in the order of `static_views`
  std::vector<Var> static_views;

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
class DynamicRNN : public RnnBuilder {
 public:
  DynamicRNN() : DynamicRNN(std::make_shared<detail::DynamicRnnState>()) {}
  /// Row t of every sequence of `x` ([N, ...], one LoD level, computed outside the step) still running.
  Var step_input(const Var& x, std::source_location loc = std::source_location::current());
  /// The rows of `v` ([S, ...], one per sequence in LoD order, computed outside the step) of the sequences
  /// still running, in the step's order.
  Var static_input(const Var& v, std::source_location loc = std::source_location::current());
  /// A memory that starts from `init` ([S, ...], one row per sequence in LoD order).
  Var memory(const Var& init, std::source_location loc = std::source_location::current());
  /// A memory that starts as `shape` ([-1, dims...], dims known) filled with `value`.
  Var memory(Shape shape, double value = 0.0, DType dtype = DType::f32, std::source_location loc = std::source_location::current());
  /// Collects `value` (a Var of the step, [k_t, ...]) at every step: one output.
  void output(const Var& value, std::source_location loc = std::source_location::current());

 private:
  explicit DynamicRNN(std::shared_ptr<detail::DynamicRnnState> s) : RnnBuilder("DynamicRNN", "dynamic_rnn", s), s_(std::move(s)) {}
  Var record_owner(std::source_location loc) override;
  Var record_output(size_t i) override;
  void check_outer(const Var& v, const char* what, std::source_location loc) const;
  std::shared_ptr<detail::DynamicRnnState> s_;
};

}  // namespace oar

#if OAR_HEADER_ONLY
#include "oar/layers/dynamic_rnn-inl.hpp"
#endif
