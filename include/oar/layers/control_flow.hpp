// oar/layers/control_flow.hpp: layers whose body is a lambda recorded as a sub-tape and replayed into a
// sub-block: `oar::cond(pred, [&] { return ...; })`. The replay is in control_flow-inl.hpp.
#pragma once
#include <memory>
#include <source_location>

#include "oar/tape/tape.hpp"

namespace oar {

namespace detail {
/// Records cond's creation; `*result` (the body's result, set once the body is recorded) is copied to its output.
Var record_cond(const Var& pred, std::shared_ptr<Var> result, std::source_location loc);
}  // namespace detail

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
