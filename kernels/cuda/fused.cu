// kernels/cuda/fused.cu: fused_elementwise and its gradient on the device: the postfix program, passed in the
// launch's arguments, interpreted per output element on a stack in registers, each input read through its
// broadcast strides. The unary functions are the CPU's functors (kernels/functors.hpp), the binary operators
// fn::binary's, in the order of ops/binary_list.hpp (the host side checks that it is the grammar's).
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/fused_launch.hpp"
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

// The adjoint of a unary node's operand: the functor's derivative, as the CPU kernel's unary_grad.
template <class T>
__device__ T fused_unary_grad(const FusedNode& nd, T x, T y, T dy) {
  switch (FusedUnary(nd.code)) {
    case FusedUnary::neg: return -dy;
#define OAR_FUSED_CASE(kind, tok, F, ...) OAR_UNARY_IF_FUSABLE(kind, case FusedUnary::tok: return fn::F{nd.p0, nd.p1}.grad(x, y, dy);)
      OAR_UNARY_OPS(OAR_FUSED_CASE)
#undef OAR_FUSED_CASE
  }
  return dy;
}

// The adjoints of a binary node's operands a, b (value y, adjoint dy), as the CPU kernel's binary_grad:
// max and min send ties to b; pow's db is 0 where y is.
template <class T>
__device__ void fused_binary_grad(uint8_t code, T a, T b, T y, T dy, T& da, T& db) {
  switch (Binary(code)) {
    case Binary::Add: da = dy, db = dy; return;
    case Binary::Sub: da = dy, db = -dy; return;
    case Binary::Mul: da = dy * b, db = dy * a; return;
    case Binary::Div: da = dy / b, db = -dy * y / b; return;
    case Binary::Max: da = a > b ? dy : T(0), db = a > b ? T(0) : dy; return;
    case Binary::Min: da = a < b ? dy : T(0), db = a < b ? T(0) : dy; return;
    case Binary::Pow: da = dy * b * T(pow(a, b - T(1))), db = y == T(0) ? T(0) : dy * y * T(log(a)); return;
  }
}

struct FusedGradArgs {
  FusedArgs f;
  void* grads[fused_max_inputs];
  int8_t target[fused_max_inputs];
  int num_grads;
};

template <class T>
__global__ void fused_backward_kernel(FusedGradArgs a, const T* dout, int64_t total) {
  const FusedNode* nodes = a.f.nodes;
  const int nn = a.f.num_nodes;
  OAR_GRID_STRIDE(i, total) {
    T val[fused_max_nodes], adj[fused_max_nodes];
    int8_t operand_a[fused_max_nodes], operand_b[fused_max_nodes];
    int8_t stack[fused_max_depth];  // the node whose value each stack slot holds
    for (int k = 0; k < nn; ++k) {
      const FusedNode& nd = nodes[k];
      switch (nd.kind) {
        case 0: val[k] = fused_load<T>(a.f.inputs[nd.input], i); break;
        case 1: val[k] = T(nd.value); break;
        case 2:
          operand_a[k] = stack[nd.depth];
          val[k] = fused_unary(nd, val[operand_a[k]]);
          break;
        default:
          operand_a[k] = stack[nd.depth], operand_b[k] = stack[nd.depth + 1];
          val[k] = fused_binary(nd.code, val[operand_a[k]], val[operand_b[k]]);
          break;
      }
      stack[nd.depth] = int8_t(k);
    }
    T acc[fused_max_inputs];
    for (int t = 0; t < a.num_grads; ++t) acc[t] = T(0);
    adj[nn - 1] = dout[i];
    for (int k = nn - 1; k >= 0; --k) {  // each node is the operand of exactly one later one
      const FusedNode& nd = nodes[k];
      if (nd.kind == 2) {
        adj[operand_a[k]] = fused_unary_grad(nd, val[operand_a[k]], val[k], adj[k]);
      } else if (nd.kind == 3) {
        fused_binary_grad(nd.code, val[operand_a[k]], val[operand_b[k]], val[k], adj[k], adj[operand_a[k]], adj[operand_b[k]]);
      } else if (nd.kind == 0 && a.target[nd.input] >= 0) {
        acc[a.target[nd.input]] += adj[k];
      }
    }
    for (int t = 0; t < a.num_grads; ++t) static_cast<T*>(a.grads[t])[i] = acc[t];
  }
}

}  // namespace

int fused_backward(Elem t, const FusedNode* nodes, int num_nodes, const FusedInput* inputs, int num_inputs, const int8_t* target,
                   void* const* grads, int num_grads, const void* dout, int64_t total, Stream s) {
  if (total == 0) return 0;
  if (num_nodes < 1 || num_nodes > fused_max_nodes || num_inputs > fused_max_inputs || num_grads > fused_max_inputs) return int(cudaErrorInvalidValue);
  FusedGradArgs a{};
  for (int k = 0; k < num_nodes; ++k) a.f.nodes[k] = nodes[k];
  for (int k = 0; k < num_inputs; ++k) a.f.inputs[k] = inputs[k], a.target[k] = target[k];
  for (int k = 0; k < num_grads; ++k) a.grads[k] = grads[k];
  a.f.num_nodes = num_nodes;
  a.num_grads = num_grads;
  return by_float(t, [&](auto z) {
    using T = decltype(z);
    fused_backward_kernel<T><<<blocks_for(total), kThreads, 0, s>>>(a, static_cast<const T*>(dout), total);
    return launched();
  });
}

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
