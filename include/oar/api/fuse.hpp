// oar/api/fuse.hpp: inference-time fusion, a program transformation like Fluid's inference passes
// (conv_elementwise_add_act_fuse_pass): conv2d -> elementwise_add (channel bias) [-> relu] becomes one
// conv2d_fusion op, so the bias and the activation are applied while the convolution's output is in cache
// instead of in two more passes over memory. The fused program computes the same values (the same float
// operations in the same order); the intermediate variables disappear from it.
#pragma once
#include <set>
#include <string>
#include <vector>

#include "oar/config.hpp"
#include "oar/ir/program.hpp"

namespace oar {

/// What fuse_for_inference changed.
struct FuseReport {
  int conv_bias_act = 0;               ///< conv2d + bias [+ relu] groups turned into conv2d_fusion
  std::vector<std::string> removed;    ///< the intermediate variables that no longer exist
};

/// Fuses conv2d -> elementwise_add(X = conv output, Y = a [M] bias, axis 1) [-> relu] in `program`'s global
/// block into conv2d_fusion, where each intermediate has that one reader and is not named in `keep` (what the
/// caller will fetch or inspect). Returns what it did.
FuseReport fuse_for_inference(Program& program, const std::set<std::string>& keep = {});

}  // namespace oar

#if OAR_HEADER_ONLY
#include "oar/api/fuse-inl.hpp"
#endif
