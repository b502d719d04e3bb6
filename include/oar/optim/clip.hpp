// oar/optim/clip.hpp: gradient clipping as ops (Fluid's append_gradient_clip_ops): by value (clip), by norm
// (clip_by_norm: g * c / max(|g|, c)), by global norm over every gradient that asks for it
// (g * c / max(c, sqrt(sum_i |g_i|^2))).
#pragma once
#include <optional>
#include <vector>

#include "oar/autodiff/backward.hpp"
#include "oar/config.hpp"
#include "oar/ops/param_attr.hpp"

namespace oar::optim {

/// For each (param, grad): the parameter's own clip (ParamAttr) or else `global`; appends the clip ops to `b`
/// and returns the pairs with the clipped gradient names. Global-norm clipping scales every gradient that
/// asks for it by one factor computed from all of them.
std::vector<ParamGrad> append_gradient_clip(Block& b, const std::vector<ParamGrad>& pg, const std::optional<GradientClip>& global);

}  // namespace oar::optim

#if OAR_HEADER_ONLY
#include "oar/optim/clip-inl.hpp"
#endif
