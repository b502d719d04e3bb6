// oar/layers/rnn_builder.hpp: what StaticRNN and DynamicRNN share. Both record one step function as a sub-tape
// whose owner creation replays it; both keep memories (a boot, the value update_memory gives for the next
// step) and outputs collected at every step. This base holds that recording and the calls that only touch it
// (step, update_memory, the outputs); each builder adds its inputs and its replay. Implemented in
// rnn_builder-inl.hpp.
#pragma once
#include <memory>
#include <source_location>
#include <string_view>
#include <type_traits>
#include <vector>

#include "oar/tape/tape.hpp"

namespace oar {

namespace detail {

inline constexpr std::string_view kNeverUpdated = "memory: this memory is never updated: call rnn.update_memory(mem, new_value) in the step";

/// The part of an RNN builder's recording that both builders keep; each builder's state derives from it.
struct StepRecording {
  struct Memory {
    Var var;   ///< the memory as the step reads it (the state of the previous step)
    Var init;  ///< the boot (one row per batch item or sequence), or empty: `shape` filled with `value`
    Shape shape;
    double value = 0;
    DType dtype = DType::f32;  ///< of a memory made from `shape` (a StaticRNN's takes the step inputs')
    Var next;                  ///< what update_memory gave it
    Origin updated;
  };
  struct Output {
    Var value;  ///< a Var of the step
    std::source_location loc;
    Var result;  ///< the collected output, recorded when the step closes
  };
  Var owner;  ///< the creation whose body is the step; its replay emits the loop
  std::vector<Memory> memories;
  std::vector<Output> outputs;
  bool in_step = false;
  bool closed = false;  ///< the step function has returned (a shape query inside it sees a partial step)
};

}  // namespace detail

/// The calls StaticRNN and DynamicRNN share: record the step once, update a memory, take the outputs.
class RnnBuilder {
 public:
  /// Records the step: `body` (no arguments) runs once, now; every layer it calls belongs to the step. Once per
  /// builder.
  template <class F>
  void step(F&& body, std::source_location loc = std::source_location::current()) {
    static_assert(std::is_invocable_v<F&>, "an RNN's step takes a function of no arguments: rnn.step([&] { ... })");
    Var owner = begin_step(loc);
    Tape::current().record_body(owner, [&] {
      struct Leave {
        detail::StepRecording* r;
        ~Leave() { r->in_step = false; }
      } leave{rec_.get()};
      body();
    });
    end_step();
  }
  /// `mem` (a memory of this builder) holds `value` (a Var of the step, shaped like the memory) at the next step.
  void update_memory(const Var& mem, const Var& value, std::source_location loc = std::source_location::current());
  /// The output when the step gave one (an oar::Error otherwise: use outputs()).
  Var operator()(std::source_location loc = std::source_location::current()) const;
  /// The outputs, in the order output() was called.
  std::vector<Var> outputs(std::source_location loc = std::source_location::current()) const;

 protected:
  /// `name` is the builder's class ("StaticRNN"), `layer` its layer's name in errors ("static_rnn").
  RnnBuilder(const char* name, const char* layer, std::shared_ptr<detail::StepRecording> rec)
      : name_(name), layer_(layer), rec_(std::move(rec)) {}
  RnnBuilder(const RnnBuilder&) = default;
  RnnBuilder& operator=(const RnnBuilder&) = default;
  virtual ~RnnBuilder() = default;
  /// An oar::Error naming `what` unless the step is being recorded now.
  void check_in_step(const char* what, std::source_location loc) const;

 private:
  /// Records the creation that owns the step (its replay emits the loop).
  virtual Var record_owner(std::source_location loc) = 0;
  /// Records output `i`'s collected value once the step has closed.
  virtual Var record_output(size_t i) = 0;
  Var begin_step(std::source_location loc);
  void end_step();

  const char* name_;
  const char* layer_;
  std::shared_ptr<detail::StepRecording> rec_;
};

}  // namespace oar

#if OAR_HEADER_ONLY
#include "oar/layers/rnn_builder-inl.hpp"
#endif
