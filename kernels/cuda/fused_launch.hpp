// kernels/cuda/fused_launch.hpp: the launchers fused.cu defines (what they share and how they report: launch.hpp).
#pragma once
#include "kernels/cuda/launch.hpp"

namespace oar::cuda_kernels {

// fused_elementwise's postfix program (ops/fused_elementwise.hpp) run per output element
/// One node: kind as ops::fused::Kind (0 input, 1 constant, 2 unary, 3 binary); code as ops::fused::Unary or
/// Binary; the stack slot its value lives in; the input it reads; a unary's parameters; a constant's value.
struct FusedNode {
  uint8_t kind = 0, code = 0, depth = 0;
  int8_t input = -1;
  float p0 = 0, p1 = 0;
  double value = 0;
};
/// How an input is read along the flat output (kernels/common/fused_elementwise.hpp's InputMap): mode 0 the same
/// layout, 1 one value, 2 through the strides of the collapsed output dims (0 where broadcast).
inline constexpr int fused_max_rank = 9;
struct FusedInput {
  const void* data = nullptr;
  int mode = 0, rank = 0;
  int64_t dims[fused_max_rank] = {}, strides[fused_max_rank] = {};
};
/// What one launch takes in its arguments (under the 4 KiB every device accepts).
inline constexpr int fused_max_nodes = 48, fused_max_inputs = 8, fused_max_depth = 16;
/// out[i] = the program at output element i, for i in [0, total) (f32, f64).
int fused_forward(Elem t, const FusedNode* nodes, int num_nodes, const FusedInput* inputs, int num_inputs, void* out, int64_t total, Stream s);
/// The gradient: for each output element i, the nodes' values and then their adjoints from dout[i] back to
/// the inputs; input k's adjoints add up in gradient `target[k]` (-1: not wanted), whose values at element i
/// go to grads[target][i] (an output-shaped array: the caller sums a broadcast input's over its broadcast dims).
/// Every gradient array is written at every element.
int fused_backward(Elem t, const FusedNode* nodes, int num_nodes, const FusedInput* inputs, int num_inputs, const int8_t* target,
                   void* const* grads, int num_grads, const void* dout, int64_t total, Stream s);

}  // namespace oar::cuda_kernels
