// kernels/cuda/sequence_shape.cu: the device kernels of the ops that move whole rows of a LoD tensor
// (sequence_concat, sequence_pad / unpad, sequence_slice, sequence_expand and the gradients that copy) and of
// sequence_mask (kernels/cuda/sequence_shape.hpp is the host side). Which row goes where is a plan made on the
// host from the LoD and uploaded; the device only copies. Launched through kernels/cuda/sequence_shape_launch.hpp.
#include <cstdint>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/sequence_shape_launch.hpp"

namespace oar::cuda_kernels {

namespace {

// Row i of the plan: out row (dst ? dst[i] : i) = x row (src ? src[i] : i), or the fill row where src[i] < 0
// (fill[d % fill_D], zeros without a fill); D units of U per row.
template <class U>
__global__ void copy_rows_kernel(const U* x, const int64_t* src, U* out, const int64_t* dst, int64_t rows, int64_t D, const U* fill, int64_t fill_D) {
  OAR_GRID_STRIDE(k, rows * D) {
    const int64_t i = k / D, d = k % D, from = src ? src[i] : i, to = dst ? dst[i] : i;
    out[to * D + d] = from >= 0 ? x[from * D + d] : (fill ? fill[d % fill_D] : U{});
  }
}

// y[i, j] = j < len[i] ? one : 0, units of U.
template <class L, class U>
__global__ void mask_kernel(const L* len, U one, U* y, int64_t n, int64_t m) {
  OAR_GRID_STRIDE(k, n * m) y[k] = k % m < int64_t(len[k / m]) ? one : U{};
}

inline bool aligned(const void* p, int unit) { return reinterpret_cast<uintptr_t>(p) % uintptr_t(unit) == 0; }

}  // namespace

int copy_rows(int bytes, const void* x, const int64_t* src_rows, void* out, const int64_t* dst_rows, int64_t rows, int64_t D, const void* fill,
              int64_t fill_D, Stream s) {
  if (bytes != 1 && bytes != 2 && bytes != 4 && bytes != 8) return bad_type();
  if (rows * D == 0) return 0;
  // NOTE: a row is moved in the widest unit (up to 16 bytes) that divides it and the pointers' alignment; a
  // one-value fill is a pattern of one element, so it keeps the element's width.
  int unit = bytes;
  if (!fill || fill_D != 1 || D == 1) {
    const int64_t row = D * bytes;
    for (int u = 16; u > bytes; u /= 2)
      if (row % u == 0 && aligned(x, u) && aligned(out, u) && (!fill || aligned(fill, u))) {
        unit = u;
        break;
      }
  }
  const int64_t Du = D * bytes / unit, fill_Du = fill_D == 1 && D > 1 ? 1 : Du;
  auto go = [&](auto z) {
    using U = decltype(z);
    copy_rows_kernel<<<blocks_for(rows * Du), kThreads, 0, s>>>(static_cast<const U*>(x), src_rows, static_cast<U*>(out), dst_rows, rows, Du,
                                                                static_cast<const U*>(fill), fill_Du);
    return launched();
  };
  switch (unit) {
    case 1: return go(uint8_t{});
    case 2: return go(uint16_t{});
    case 4: return go(uint32_t{});
    case 8: return go(uint64_t{});
    default: return go(uint4{});
  }
}

int sequence_mask(Elem len_type, const void* len, int bytes, uint64_t one, void* y, int64_t n, int64_t m, Stream s) {
  if (n * m == 0) return 0;
  auto go = [&](auto l, auto z) {
    using L = decltype(l);
    using U = decltype(z);
    mask_kernel<<<blocks_for(n * m), kThreads, 0, s>>>(static_cast<const L*>(len), U(one), static_cast<U*>(y), n, m);
    return launched();
  };
  auto by_len = [&](auto z) {
    if (len_type == Elem::i32) return go(int32_t{}, z);
    if (len_type == Elem::i64) return go(int64_t{}, z);
    return bad_type();
  };
  switch (bytes) {
    case 1: return by_len(uint8_t{});
    case 2: return by_len(uint16_t{});
    case 4: return by_len(uint32_t{});
    case 8: return by_len(uint64_t{});
    default: return bad_type();
  }
}

}  // namespace oar::cuda_kernels
