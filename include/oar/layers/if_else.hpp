// oar/layers/if_else.hpp: oar::if_else, Fluid's IfElse: each row (or sequence) of a batch goes through one of two
// branches by a bool mask, and the branches' results come back in the batch's order. The replay is in
// if_else-inl.hpp.
#pragma once
#include <concepts>
#include <memory>
#include <source_location>
#include <type_traits>
#include <vector>

#include "oar/tape/tape.hpp"

namespace oar {

namespace detail {
/// split_lod_tensor of each input by `mask`: {true part, false part} per input, in order.
std::vector<Var> record_if_else_split(const Var& mask, const std::vector<Var>& inputs, std::source_location loc);
/// One branch: a conditional_block that runs when its parts hold rows. `*results` (the branch function's
/// result, set once its body is recorded) is assigned to the branch's outputs in the enclosing block.
Var record_if_else_branch(bool side, const std::vector<Var>& parts, std::shared_ptr<const std::vector<Var>> results, std::source_location loc);
/// merge_lod_tensor of the branches' outputs, one per output; an oar::Error naming `loc` when the two branches
/// return different counts.
std::vector<Var> record_if_else_merge(const Var& mask, const Var& rows, const Var& on_true, const Var& on_false, size_t true_count, size_t false_count,
                                      std::source_location loc);
}  // namespace detail

/// Runs `on_true` on the items of `inputs` where `mask` is true and `on_false` on the others; each output is the
/// two branches' results put back in the items' order: out[k] item i = on_true(...)[k] item i when mask[i], else
/// on_false(...)[k] item i (Fluid's IfElse: split_lod_tensor, two conditional_blocks, merge_lod_tensor).
/// mask: bool [N, 1] (or [N]); inputs: each [N, ...] (an item is a row), or a LoD tensor whose level-0 sequences are
/// the items (one mask entry per sequence). Each branch receives its items of every input, in order, and returns
/// outputs with one row per row it received: the same count from both branches, with matching dtypes and widths.
/// A branch with no items does not run. Parameters created in a branch live in the global block.
///   auto y = oar::if_else(mask, {x}, [](std::vector<Var> in) { return std::vector<Var>{oar::fc(in[0], 4)}; },
///                         [](std::vector<Var> in) { return std::vector<Var>{oar::scale(in[0], 2)}; })[0];
template <class TrueFn, class FalseFn>
  requires std::convertible_to<std::invoke_result_t<TrueFn&, std::vector<Var>>, std::vector<Var>> &&
           std::convertible_to<std::invoke_result_t<FalseFn&, std::vector<Var>>, std::vector<Var>>
std::vector<Var> if_else(const Var& mask, std::vector<Var> inputs, TrueFn on_true, FalseFn on_false,
                         std::source_location loc = std::source_location::current()) {
  const std::vector<Var> parts = detail::record_if_else_split(mask, inputs, loc);
  std::vector<Var> sides[2];
  for (size_t k = 0; k < parts.size(); ++k) sides[k % 2].push_back(parts[k]);
  auto true_results = std::make_shared<std::vector<Var>>();
  auto false_results = std::make_shared<std::vector<Var>>();
  Var t = detail::record_if_else_branch(true, sides[0], true_results, loc);
  *true_results = Tape::current().record_body(t, [&] { return std::vector<Var>(on_true(sides[0])); });
  Var f = detail::record_if_else_branch(false, sides[1], false_results, loc);
  *false_results = Tape::current().record_body(f, [&] { return std::vector<Var>(on_false(sides[1])); });
  return detail::record_if_else_merge(mask, inputs.at(0), t, f, true_results->size(), false_results->size(), loc);
}

/// if_else with one input and one output: `on_true(x's true items)` and `on_false(x's false items)` merged.
///   auto y = oar::if_else(mask, x, [](Var v) { return oar::fc(v, 4); }, [](Var v) { return oar::scale(v, 2); });
template <class TrueFn, class FalseFn>
  requires std::convertible_to<std::invoke_result_t<TrueFn&, Var>, Var> && std::convertible_to<std::invoke_result_t<FalseFn&, Var>, Var>
Var if_else(const Var& mask, const Var& x, TrueFn on_true, FalseFn on_false, std::source_location loc = std::source_location::current()) {
  return if_else(
      mask, std::vector<Var>{x}, [&](std::vector<Var> in) { return std::vector<Var>{Var(on_true(in[0]))}; },
      [&](std::vector<Var> in) { return std::vector<Var>{Var(on_false(in[0]))}; }, loc)[0];
}

}  // namespace oar

#if OAR_HEADER_ONLY
#include "oar/layers/if_else-inl.hpp"
#endif
