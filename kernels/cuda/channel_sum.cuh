// kernels/cuda/channel_sum.cuh: sums per channel of a tensor seen as [pre, c, post] (a bias gradient, batch
// norm's statistics), fast however few the channels: each channel's pre * post elements are cut into
// channel_splits() pieces, one block each, whose partial sums (double) land in a scratch buffer; a second kernel
// adds each channel's pieces in a fixed order, so the result does not depend on scheduling.
#pragma once
#include <cub/block/block_reduce.cuh>

#include "kernels/cuda/common.cuh"

namespace oar::cuda_kernels {

/// partial[(s c + j) K + q] = the sum over piece s of channel j of what add(idx, j, acc) adds to acc[q].
template <int K, class Add>
__global__ void channel_partials(int64_t pre, int64_t c, int64_t post, int splits, Add add, double* partial) {
  using Reduce = cub::BlockReduce<double, kThreads>;
  __shared__ typename Reduce::TempStorage tmp;
  const int64_t m = pre * post, s = blockIdx.y;
  const int64_t e0 = m * s / splits, e1 = m * (s + 1) / splits;
  const bool narrow = m <= int64_t(UINT32_MAX);  // 32-bit division where it suffices
  for (int64_t j = blockIdx.x; j < c; j += gridDim.x) {
    double acc[K] = {};
    for (int64_t e = e0 + threadIdx.x; e < e1; e += blockDim.x) {
      const int64_t i = narrow ? int64_t(uint32_t(e) / uint32_t(post)) : e / post;
      add((i * c + j) * post + (e - i * post), j, acc);
    }
    for (int q = 0; q < K; ++q) {
      const double t = Reduce(tmp).Sum(acc[q]);
      if (threadIdx.x == 0) partial[(s * c + j) * K + q] = t;
      __syncthreads();  // tmp is reused
    }
  }
}

/// finish(j, sums) with sums[q] = channel j's total of value q, one thread per channel.
template <int K, class Finish>
__global__ void channel_finish(const double* partial, int64_t c, int splits, Finish finish) {
  OAR_GRID_STRIDE(j, c) {
    double sums[K] = {};
    for (int s = 0; s < splits; ++s)
      for (int q = 0; q < K; ++q) sums[q] += partial[(s * c + j) * K + q];
    finish(j, sums);
  }
}

/// Both kernels: `scratch` holds channel_scratch_bytes(pre, c, post, K) bytes.
template <int K, class Add, class Finish>
void channel_sum(int64_t pre, int64_t c, int64_t post, void* scratch, Add add, Finish finish, Stream st) {
  const int splits = channel_splits(pre, c, post);
  double* partial = static_cast<double*>(scratch);
  const dim3 grid(unsigned(c < 65536 ? c : 65536), unsigned(splits));
  channel_partials<K><<<grid, kThreads, 0, st>>>(pre, c, post, splits, add, partial);
  channel_finish<K><<<blocks_for(c), kThreads, 0, st>>>(partial, c, splits, finish);
}

}  // namespace oar::cuda_kernels
