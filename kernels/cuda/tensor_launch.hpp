// kernels/cuda/tensor_launch.hpp: the launchers tensor.cu defines (what they share and how they report: launch.hpp).
#pragma once
#include "kernels/cuda/launch.hpp"

namespace oar::cuda_kernels {

/// out = static_cast<To>(x) for n elements between f32, f64, i32, i64 and b8 (bool: x != 0).
int cast(Elem from, Elem to, const void* x, void* out, int64_t n, Stream s);
/// The dims of a permuted copy: out has `dims`, and out's element at index i reads the source at the sum of
/// i's coordinates times `strides` (the source's stride of each out dim).
struct Permute {
  static constexpr int max_rank = 9;
  int rank = 0;
  int64_t dims[max_rank] = {}, strides[max_rank] = {};
};
/// out = x permuted (transpose), elements of `bytes` bytes (1, 2, 4 or 8), n of them.
int permute(int bytes, const Permute& p, const void* x, void* out, int64_t n, Stream s);

}  // namespace oar::cuda_kernels
