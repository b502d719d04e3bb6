// oar/optim/regularizer.hpp: weight decay as ops added to the gradient before the update (Fluid's
// append_regularization_ops): L2: g' = g + coeff * p; L1: g' = g + coeff * sign(p).
#pragma once
#include <optional>
#include <vector>

#include "oar/autodiff/backward.hpp"
#include "oar/config.hpp"
#include "oar/ops/param_attr.hpp"

namespace oar::optim {

/// For each (param, grad): the parameter's own regularizer (ParamAttr) or else `global`; appends the decay ops
/// to `b` and returns the pairs with the regularized gradient names.
std::vector<ParamGrad> append_regularization(Block& b, const std::vector<ParamGrad>& pg, const std::optional<Regularizer>& global);

}  // namespace oar::optim

#if OAR_HEADER_ONLY
#include "oar/optim/regularizer-inl.hpp"
#endif
