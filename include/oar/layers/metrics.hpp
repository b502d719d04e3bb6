// oar/layers/metrics.hpp: in-graph evaluators. They stay on the tape (and in the program) even when no
// output depends on them. Bodies in metrics-inl.hpp.
#pragma once
#include <source_location>

#include "oar/tape/tape.hpp"

namespace oar {

/// Fraction of rows whose label is among the k highest scores: top_k then accuracy. input [N, D], label i64 [N, 1] -> [1].
Var accuracy(const Var& input, const Var& label, int k = 1, std::source_location loc = std::source_location::current());

}  // namespace oar

#if OAR_HEADER_ONLY
#include "oar/layers/metrics-inl.hpp"
#endif
