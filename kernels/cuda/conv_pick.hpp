// kernels/cuda/conv_pick.hpp: which of the convolution algorithms cuDNN offers oar keeps. Plain host code over
// cuDNN's result structs, apart from the descriptors and calls around it (kernels/cuda/conv.hpp), so that a
// machine without a GPU tests it too.
#pragma once
#include <cudnn.h>

#include <cstddef>
#include <cstdint>

namespace oar::cuda_kernels {

/// Whether cuDNN's WINOGRAD_NONFUSED algorithms are left out: in full f32 math (no set_cuda_tf32) for filters
/// past 3x3. Their transforms work on tiles that grow with the filter (9x9 for 5x5), and their f32 error grows
/// with the tiles beyond what f32 math promises: on an H100, the data gradient of a 5x5 convolution over 20 input
/// and 50 output channels was off by 5e-3 of the output's largest magnitude, where every other algorithm cuDNN
/// chose stayed within 1e-3 of each element. A search keeps them whenever they are the fastest, so the answer
/// then depended on timing. TF32, where allowed,
/// already trades that much precision; 16-bit data runs on tensor cores, not through them.
inline bool coarse_winograd_excluded(bool f32, bool tf32, int64_t kh, int64_t kw) { return f32 && !tf32 && (kh > 3 || kw > 3); }

/// Each pass's WINOGRAD_NONFUSED, by the type of its result list.
constexpr int winograd_nonfused(const cudnnConvolutionFwdAlgoPerf_t*) { return CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED; }
constexpr int winograd_nonfused(const cudnnConvolutionBwdDataAlgoPerf_t*) { return CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED; }
constexpr int winograd_nonfused(const cudnnConvolutionBwdFilterAlgoPerf_t*) { return CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED; }

/// The algorithm a cuDNN result list offers, never `excluded` (-1: none): from heuristics (`timed` false), the
/// first in the math type `math`, else the first that works (`prefer_deterministic`: deterministic ones first in
/// both); from a timed search (fastest first), the first that ran in that math type, is deterministic and needs
/// at most `limit` bytes. -1 when none qualifies.
template <class Perf>
int conv_pick(const Perf* perf, int got, cudnnMathType_t math, bool timed, size_t limit, bool prefer_deterministic, int excluded) {
  const bool deterministic = timed || prefer_deterministic;
  for (int i = 0; i < got; ++i)
    if (perf[i].status == CUDNN_STATUS_SUCCESS && int(perf[i].algo) != excluded && perf[i].mathType == math &&
        (!deterministic || perf[i].determinism == CUDNN_DETERMINISTIC) && (!timed || perf[i].memory <= limit))
      return int(perf[i].algo);
  for (int pass = prefer_deterministic ? 0 : 1; !timed && pass < 2; ++pass)
    for (int i = 0; i < got; ++i)
      if (perf[i].status == CUDNN_STATUS_SUCCESS && int(perf[i].algo) != excluded && (pass == 1 || perf[i].determinism == CUDNN_DETERMINISTIC))
        return int(perf[i].algo);
  return -1;
}

}  // namespace oar::cuda_kernels
