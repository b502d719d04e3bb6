// oar/ops/binary_list.hpp: the list of the binary element-wise ops, alone (no includes), as ops/unary_list.hpp
// is for the unary ones: the op structs (ops/elementwise_binary.hpp), their CPU kernels
// (kernels/cpu/elementwise_binary.hpp) and the CUDA kernels (kernels/cuda/elementwise.cu, which nvcc compiles
// without the ir headers) are generated from it.
#pragma once

// X(op type, op struct, functor in oar::fn::binary (kernels/functors_binary.hpp))
#define OAR_BINARY_OPS(X)                           \
  X(elementwise_add, ElementwiseAdd, Add)           \
  X(elementwise_sub, ElementwiseSub, Sub)           \
  X(elementwise_mul, ElementwiseMul, Mul)           \
  X(elementwise_div, ElementwiseDiv, Div)           \
  X(elementwise_max, ElementwiseMax, Max)           \
  X(elementwise_min, ElementwiseMin, Min)           \
  X(elementwise_pow, ElementwisePow, Pow)
