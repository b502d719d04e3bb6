// oar/layers/static_rnn.hpp: StaticRNN, Fluid's fixed-length RNN builder over time-major tensors [T, N, ...].
// The step is recorded as a sub-tape and replayed into the step block of one `recurrent` op (ops/recurrent.hpp),
// the op a recurrent group records: each step input becomes N sequences of T rows on the way in and the outputs
// become [T, N, ...] again on the way out. The replay is in static_rnn-inl.hpp.
#pragma once
#include <algorithm>
#include <memory>
#include <source_location>
#include <type_traits>

#include "oar/layers/rnn_builder.hpp"
#include "oar/tape/tape.hpp"

namespace oar {

namespace detail {
/// What a StaticRNN's replay needs from the recording of its step.
struct StaticRnnState : StepRecording {
  struct Input {
    Var x;    ///< the outer [T, N, ...] tensor
    Var x_t;  ///< its step view [N, ...], a creation of the step
  };
  std::vector<Input> inputs;
};
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
///   auto out = rnn();  // [T, N, 32]; rnn.outputs() when the step gives several
/// Gradients flow to the parameters, to the step inputs and to the boots.
class StaticRNN : public RnnBuilder {
 public:
  StaticRNN() : StaticRNN(std::make_shared<detail::StaticRnnState>()) {}

  /// Step t of `x` ([T, N, ...], computed outside the step): [N, ...]. All step inputs share T and N.
  Var step_input(const Var& x, std::source_location loc = std::source_location::current());
  /// A memory that starts from `init` ([N, ...], computed outside the step; row n for batch item n).
  Var memory(const Var& init, std::source_location loc = std::source_location::current());
  /// A memory that starts as `shape` filled with `init_value`: shape is [batch, dims...] with the dims known; the
  /// batch is the step inputs' N, whatever dim 0 of `shape` says. Its dtype is the first step input's.
  Var memory(Shape shape, double init_value = 0.0, std::source_location loc = std::source_location::current());
  /// Collects `value` (a Var of the step, [N, ...]) at every step: one output of the StaticRNN.
  void output(const Var& value, std::source_location loc = std::source_location::current());
  void output(std::initializer_list<Var> values, std::source_location loc = std::source_location::current());

 private:
  explicit StaticRNN(std::shared_ptr<detail::StaticRnnState> s) : RnnBuilder("StaticRNN", "static_rnn", s), s_(std::move(s)) {}
  Var record_owner(std::source_location loc) override;
  Var record_output(size_t i) override;
  std::shared_ptr<detail::StaticRnnState> s_;
};

}  // namespace oar

#if OAR_HEADER_ONLY
#include "oar/layers/static_rnn-inl.hpp"
#endif
