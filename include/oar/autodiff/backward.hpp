// oar/autodiff/backward.hpp: append_backward, a program transformation that appends the gradient ops of a
// scalar loss: grad makers of each op on the path (in reverse), `X@GRAD` names, a `sum` where a variable
// feeds several ops, `fill_zeros_like` where a gradient is missing, and stop_gradient / no_grad_set.
#pragma once
#include <set>
#include <string>
#include <vector>

#include "oar/config.hpp"
#include "oar/ir/program.hpp"

namespace oar {

/// A parameter and the name of its gradient.
struct ParamGrad {
  std::string param;
  std::string grad;
};

/// Appends the backward pass of `loss` (a variable of the global block with one element) to `program`.
/// Gradients stop at variables with stop_gradient (data), at non-trainable parameters, at integer variables
/// and at the names in `no_grad_set`. Returns (parameter, gradient) for every trainable parameter reached.
///
/// `wanted` names variables whose gradient `X@GRAD` must be written even where X stops gradients (a data
/// input, a `.stop_gradient()` activation, a name of `no_grad_set`): the ops reading X compute it, but it flows
/// no further (the op writing X still sees a zero gradient), so every other gradient is the same as without
/// it. A wanted variable the loss does not reach through differentiable ops gets no `X@GRAD`; an unknown or
/// integer one is an oar::Error naming it.
std::vector<ParamGrad> append_backward(Program& program, const std::string& loss, const std::set<std::string>& no_grad_set = {},
                                       const std::set<std::string>& wanted = {});

}  // namespace oar

#if OAR_HEADER_ONLY
#include "oar/autodiff/backward-inl.hpp"
#endif
