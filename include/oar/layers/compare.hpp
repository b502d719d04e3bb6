// oar/layers/compare.hpp: the layer functions of the comparison and logical ops (bool results, the conditions of
// While loops and of oar::cond) and increment (a loop counter's next value). Bodies in compare-inl.hpp; the ops
// are ops/compare.hpp and ops/assign.hpp.
#pragma once
#include <source_location>

#include "oar/tape/tape.hpp"

namespace oar {

/// out = x < y element-wise, as bool. y broadcasts over x's dims as elementwise_add's does (`.set("axis", k)`
/// picks the first dim of x that y lines up with; default -1: the trailing dims). x, y: one dtype (i32, i64, f32,
/// f64) -> bool [x's shape], x's LoD. No gradient.
///   auto more = oar::less_than(i, n);   // i64 [1] each: the condition of a loop
Var less_than(const Var& x, const Var& y, std::source_location loc = std::source_location::current());
/// out = x <= y, as less_than.
Var less_equal(const Var& x, const Var& y, std::source_location loc = std::source_location::current());
/// out = x > y, as less_than.
Var greater_than(const Var& x, const Var& y, std::source_location loc = std::source_location::current());
/// out = x >= y, as less_than.
Var greater_equal(const Var& x, const Var& y, std::source_location loc = std::source_location::current());
/// out = x == y, as less_than.
Var equal(const Var& x, const Var& y, std::source_location loc = std::source_location::current());
/// out = x != y, as less_than.
Var not_equal(const Var& x, const Var& y, std::source_location loc = std::source_location::current());

/// out = x && y element-wise. x, y: bool of one shape -> bool, x's LoD.
Var logical_and(const Var& x, const Var& y, std::source_location loc = std::source_location::current());
/// out = x || y, as logical_and.
Var logical_or(const Var& x, const Var& y, std::source_location loc = std::source_location::current());
/// out = x != y (exclusive or), as logical_and.
Var logical_xor(const Var& x, const Var& y, std::source_location loc = std::source_location::current());
/// out = !x. x: bool -> bool of its shape.
Var logical_not(const Var& x, std::source_location loc = std::source_location::current());

/// out = x + step for a one-element x (any numeric dtype), in a NEW variable: x itself is not changed (Fluid's
/// in_place=False). No gradient: the result stops gradients.
///   auto next = oar::increment(i);   // i + 1
Var increment(const Var& x, double step = 1.0, std::source_location loc = std::source_location::current());

}  // namespace oar

#if OAR_HEADER_ONLY
#include "oar/layers/compare-inl.hpp"
#endif
