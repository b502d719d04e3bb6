// kernels/cuda/launch.hpp: what the device half of the CUDA backend shares as host code calls it. Each .cu file's
// launchers are plain functions over raw device pointers, declared in `<name>_launch.hpp` beside it (nvcc
// defines them there, the eval_cuda kernels in this folder's .hpp files call them from the host compiler, inside
// liboar); this header holds the types they all take. Nothing here or there includes a CUDA or an ir header (the
// op lists are macros alone), so nvcc and the host compiler read the same declarations.
// Every launcher queues its work on `s` and returns without waiting; it returns the launch's cudaError_t as an
// int (0: none), which the host side turns into an oar::Error naming the op (kernels/cuda/host.hpp).
#pragma once
#include <cstddef>
#include <cstdint>

#include "oar/ops/binary_list.hpp"
#include "oar/ops/unary_list.hpp"

struct CUstream_st;

namespace oar::cuda_kernels {

using Stream = CUstream_st*;

/// The element types the device kernels are instantiated for (b8: bool, for cast only).
enum class Elem : int { f32, f64, i32, i64, b8, f16, bf16 };

/// The unary and binary element-wise ops, in the order of their lists.
enum class Unary : int {
#define OAR_UNARY_ENUM(kind, op_type, Functor, a0, d0, a1, d1) Functor,
  OAR_UNARY_OPS(OAR_UNARY_ENUM)
#undef OAR_UNARY_ENUM
};
enum class Binary : int {
#define OAR_BINARY_ENUM(op_type, Op, Functor) Functor,
  OAR_BINARY_OPS(OAR_BINARY_ENUM)
#undef OAR_BINARY_ENUM
};

/// X viewed as [pre, n, post] against Y as [n] (ops::BroadcastDims); `same`: equal shapes, n elements.
struct Broadcast {
  int64_t pre = 1, n = 0, post = 1;
  bool same = true;
};

/// A sum per channel of a tensor seen as [pre, c, post] runs as this many blocks per channel (about 1024 blocks
/// in all, each over at least 1024 elements), so that a few channels still fill the GPU (channel_sum.cuh).
inline int channel_splits(int64_t pre, int64_t c, int64_t post) {
  const int64_t m = pre * post, want = c > 0 ? (1024 + c - 1) / c : 1, most = (m + 1023) / 1024;
  const int64_t s = want < most ? want : most;
  return int(s < 1 ? 1 : s);
}
/// The device scratch such a sum of `values` numbers per element needs.
inline size_t channel_scratch_bytes(int64_t pre, int64_t c, int64_t post, int values) {
  return size_t(channel_splits(pre, c, post)) * size_t(c) * size_t(values) * sizeof(double);
}

}  // namespace oar::cuda_kernels
