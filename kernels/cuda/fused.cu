// kernels/cuda/fused.cu: fused_elementwise's forward on the device: the postfix program, passed in the
// launch's arguments, interpreted per output element on a stack in registers, each input read through its
// broadcast strides. The unary functions are the CPU's functors (kernels/functors.hpp), the binary operators
// fn::binary's, in the order of ops/binary_list.hpp (the host side checks that it is the grammar's).
#include "kernels/cuda/common.cuh"
#include "kernels/functors.hpp"
#include "kernels/functors_binary.hpp"

namespace oar::cuda_kernels {

namespace {

// The grammar's unary tokens, as ops/fused_elementwise.hpp numbers them: neg, then the fusable ops in list order.
#define OAR_FUSED_ENUM_U(kind, tok, ...) OAR_UNARY_IF_FUSABLE(kind, tok, )
enum class FusedUnary : uint8_t { neg, OAR_UNARY_OPS(OAR_FUSED_ENUM_U) };
#undef OAR_FUSED_ENUM_U

struct FusedArgs {
  FusedNode nodes[fused_max_nodes];
  FusedInput inputs[fused_max_inputs];
  int num_nodes;
};

template <class T>
__device__ T fused_unary(const FusedNode& nd, T a) {
  switch (FusedUnary(nd.code)) {
    case FusedUnary::neg: return -a;
#define OAR_FUSED_CASE(kind, tok, F, ...) OAR_UNARY_IF_FUSABLE(kind, case FusedUnary::tok: return fn::F{nd.p0, nd.p1}(a);)
      OAR_UNARY_OPS(OAR_FUSED_CASE)
#undef OAR_FUSED_CASE
  }
  return a;
}

template <class T>
__device__ T fused_binary(uint8_t code, T a, T b) {
  switch (Binary(code)) {
#define OAR_FUSED_CASE(op_type, Op, Functor) \
  case Binary::Functor: return fn::binary::Functor{}(a, b);
    OAR_BINARY_OPS(OAR_FUSED_CASE)
#undef OAR_FUSED_CASE
  }
  return a;
}

template <class T>
__device__ T fused_load(const FusedInput& in, int64_t i) {
  const T* x = static_cast<const T*>(in.data);
  if (in.mode == 0) return x[i];
  if (in.mode == 1) return x[0];
  int64_t off = 0, rest = i;
  for (int d = in.rank - 1; d >= 0; --d) {
    off += (rest % in.dims[d]) * in.strides[d];
    rest /= in.dims[d];
  }
  return x[off];
}

template <class T>
__global__ void fused_forward_kernel(FusedArgs a, T* out, int64_t total) {
  OAR_GRID_STRIDE(i, total) {
    T st[fused_max_depth];
    for (int k = 0; k < a.num_nodes; ++k) {
      const FusedNode& nd = a.nodes[k];
      T& top = st[nd.depth];
      switch (nd.kind) {
        case 0: top = fused_load<T>(a.inputs[nd.input], i); break;
        case 1: top = T(nd.value); break;
        case 2: top = fused_unary(nd, top); break;
        default: top = fused_binary(nd.code, top, st[nd.depth + 1]); break;
      }
    }
    out[i] = st[0];
  }
}

}  // namespace

int fused_forward(Elem t, const FusedNode* nodes, int num_nodes, const FusedInput* inputs, int num_inputs, void* out, int64_t total, Stream s) {
  if (total == 0) return 0;
  if (num_nodes < 1 || num_nodes > fused_max_nodes || num_inputs > fused_max_inputs) return int(cudaErrorInvalidValue);
  FusedArgs a{};
  for (int k = 0; k < num_nodes; ++k) a.nodes[k] = nodes[k];
  for (int k = 0; k < num_inputs; ++k) a.inputs[k] = inputs[k];
  a.num_nodes = num_nodes;
  return by_float(t, [&](auto z) {
    using T = decltype(z);
    fused_forward_kernel<T><<<blocks_for(total), kThreads, 0, s>>>(a, static_cast<T*>(out), total);
    return launched();
  });
}

}  // namespace oar::cuda_kernels
