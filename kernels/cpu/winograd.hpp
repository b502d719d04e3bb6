// kernels/cpu/winograd.hpp: Winograd (Toom-Cook) minimal-filtering convolution for stride-1, undilated,
// ungrouped convolutions with 3x3 or 5x5 windows, on large 8 x 8 tiles (F(6x6, 3x3), F(4x4, 5x5)) or small
// 6 x 6 ones (F(4x4, 3x3), F(2x2, 5x5)): the forward pass and, as its exact adjoint on the same tiles, both
// gradients. 4-6x fewer multiplications than im2col + GEMM on large tiles, 2.8-4x on small ones, which waste
// less of a small image (a 7 x 7 or 14 x 14 output fills 8 x 8 or 16 x 16 of small tiles, 12 x 12 or 18 x 18
// of large ones); the products of a batch are one GEMM per tile position.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/cpu/gemm.hpp"
#include "kernels/cpu/im2col.hpp"

namespace oar::cpu_kernels {

/// The 1-D transforms of F(m, r): for d of length alpha = m + r - 1 and g of length r,
/// y = AT [(G g) .* (BT d)] is the correlation y[i] = sum_k g[k] d[i + k], i < m.
/// Built by Toom-Cook from the points 0, 1, -1, 2, -2, 1/2, -1/2, 3, -3 (the first alpha - 1 of them) and
/// the point at infinity; G carries the interpolation weights so that BT is small integers and quarters.
/// Computed at compile time, so the transforms below fold BT's zeros and ones away.
template <int M, int R>
struct WinogradMatrices {
  static constexpr int m = M, r = R, alpha = M + R - 1;
  double at[M][alpha] = {}, g[alpha][R] = {}, bt[alpha][alpha] = {};
};

template <int M, int R>
constexpr WinogradMatrices<M, R> make_winograd_matrices();

/// Whether Winograd tiles can compute a convolution over `g` with m output channels in `groups` groups:
/// stride 1, no dilation, one group, an r x r window with r = 3 or 5 and padding below r. Whether they pay is
/// for kernels/cpu/conv_choice.hpp to find out.
inline bool winograd_applies(const ConvGeom& g, int64_t m, int64_t groups) {
  if (groups != 1 || m < 1 || g.sh != 1 || g.sw != 1 || g.dh != 1 || g.dw != 1) return false;
  return g.kh == g.kw && (g.kh == 3 || g.kh == 5) && g.ph < g.kh && g.pw < g.kw && g.ph >= 0 && g.pw >= 0;
}

/// The tile sizes: `large` 8 x 8 (F(6x6, 3x3), F(4x4, 5x5)), `small` 6 x 6 (F(4x4, 3x3), F(2x2, 5x5)).
enum class WinoTiles { large, small };

/// The output size of one tile of `tiles` for an r x r window.
inline int64_t wino_tile_out(WinoTiles tiles, int64_t r) { return tiles == WinoTiles::large ? 9 - r : 7 - r; }

/// out[n, o, i, j] = act(bias[o] + sum_{ci, a, b} in[n, ci, i - ph + a, j - pw + b] * filter[o, ci, a, b]) with
/// zeros outside `in`, for i < oh, j < ow; the window is r x r, r = 3 or 5; bias may be null.
/// requires: in [n, c, h, w], filter [o, c, r, r], out [n, o, oh, ow], no overlap; 0 <= ph, pw < r.
template <class T>
void winograd_conv2d(WinoTiles tiles, const T* in, int64_t n, int64_t c, int64_t h, int64_t w, const T* filter, int64_t o, int64_t r,
                     int64_t ph, int64_t pw, int64_t oh, int64_t ow, T* out, const T* bias, bool relu);

/// The gradients of winograd_conv2d (no bias, identity) for the output gradient dy [n, o, oh, ow]: dx [n, c, h, w]
/// and dw [o, c, r, r] (either may be null), written, not accumulated. They are the exact adjoint of the forward
/// algorithm on the same tiles: one transform of each dy tile serves both, dx = sum over tiles of
/// B (U^T P) B^T scattered back, dw = G^T (sum over tiles of P V^T) G.
template <class T>
void winograd_conv2d_grad(WinoTiles tiles, const T* x, int64_t n, int64_t c, int64_t h, int64_t w, const T* filter, int64_t o, int64_t r,
                          int64_t ph, int64_t pw, int64_t oh, int64_t ow, const T* dy, T* dx, T* dw);

// ---- implementation

template <int M, int R>
constexpr WinogradMatrices<M, R> make_winograd_matrices() {
  constexpr double pts[] = {0, 1, -1, 2, -2, 0.5, -0.5, 3, -3};
  constexpr int a = M + R - 1, nf = a - 1;  // nf finite points, then infinity
  static_assert(nf <= int(sizeof(pts) / sizeof(pts[0])));
  WinogradMatrices<M, R> wm;
  auto pw = [](double x, int e) {
    double v = 1;
    while (e-- > 0) v *= x;
    return v;
  };
  auto abs = [](double v) { return v < 0 ? -v : v; };
  double f[a] = {};
  for (int j = 0; j < nf; ++j) {
    f[j] = 1;
    for (int l = 0; l < nf; ++l)
      if (l != j) f[j] *= pts[j] - pts[l];
  }
  for (int i = 0; i < M; ++i) {
    for (int j = 0; j < nf; ++j) wm.at[i][j] = pw(pts[j], i);
    wm.at[i][nf] = i == M - 1 ? 1 : 0;
  }
  for (int j = 0; j < nf; ++j)
    for (int k = 0; k < R; ++k) wm.g[j][k] = pw(pts[j], k) / f[j];
  for (int k = 0; k < R; ++k) wm.g[nf][k] = k == R - 1 ? 1 : 0;
  // sum_j AT[i][j] G[j][k] BT[j][l] must be [l == i + k]; AT[i][j] G[j][k] depends on s = i + k only, as
  // E[s][j] = p_j^s / f_j (E[s][inf] = [s == a - 1]), so BT = E^-1 (Gauss-Jordan with partial pivoting).
  double e[a][a] = {}, inv[a][a] = {};
  for (int s = 0; s < a; ++s) {
    for (int j = 0; j < nf; ++j) e[s][j] = pw(pts[j], s) / f[j];
    e[s][nf] = s == a - 1 ? 1 : 0;
    inv[s][s] = 1;
  }
  for (int col = 0; col < a; ++col) {
    int piv = col;
    for (int row = col + 1; row < a; ++row)
      if (abs(e[row][col]) > abs(e[piv][col])) piv = row;
    for (int k = 0; k < a; ++k) {
      double t = e[col][k];
      e[col][k] = e[piv][k], e[piv][k] = t;
      t = inv[col][k];
      inv[col][k] = inv[piv][k], inv[piv][k] = t;
    }
    const double d = e[col][col];
    for (int k = 0; k < a; ++k) e[col][k] /= d, inv[col][k] /= d;
    for (int row = 0; row < a; ++row) {
      const double fct = e[row][col];
      if (row == col || fct == 0) continue;
      for (int k = 0; k < a; ++k) e[row][k] -= fct * e[col][k], inv[row][k] -= fct * inv[col][k];
    }
  }
  for (int i = 0; i < a; ++i)
    for (int j = 0; j < a; ++j) wm.bt[i][j] = abs(inv[i][j]) < 1e-12 ? 0 : inv[i][j];  // exact zeros
  return wm;
}

namespace detail {

inline constexpr int wino_lanes = 8;  // tiles transformed side by side (one AVX2 register of floats)

/// The matrices of F(M, R), computed once at compile time; the transforms read them through WinoAT, WinoG
/// and WinoBT (entry (i, j) as a constant, so a zero entry drops out of the unrolled loops).
template <int M, int R>
inline constexpr WinogradMatrices<M, R> wino_def = make_winograd_matrices<M, R>();

template <int M, int R>
struct WinoAT {
  static constexpr int rows = M, cols = M + R - 1;
  static constexpr double get(int i, int j) { return wino_def<M, R>.at[i][j]; }
};
template <int M, int R>
struct WinoG {
  static constexpr int rows = M + R - 1, cols = R;
  static constexpr double get(int i, int j) { return wino_def<M, R>.g[i][j]; }
};
template <int M, int R>
struct WinoBT {
  static constexpr int rows = M + R - 1, cols = M + R - 1;
  static constexpr double get(int i, int j) { return wino_def<M, R>.bt[i][j]; }
};

template <class Mat>
struct Transposed {
  static constexpr int rows = Mat::cols, cols = Mat::rows;
  static constexpr double get(int i, int j) { return Mat::get(j, i); }
};

/// L lanes of T as one value (GCC vector extension: one AVX2 register of floats, two of doubles), used only
/// inside a function (passing it by value would depend on the vector ABI). NOTE: a typedef in a class, since
/// GCC ignores vector_size on a dependent alias template (such an alias is plain T).
template <class T>
struct WinoLanes {
  typedef T type __attribute__((vector_size(sizeof(T) * wino_lanes)));
};
template <class T>
using WinoVec = typename WinoLanes<T>::type;
static_assert(sizeof(WinoVec<float>) == sizeof(float) * wino_lanes);

/// out = Mat * in * Mat^T on L independent lanes: in [S][S][L], out [RO][RO][L] with Mat RO x S. Every loop
/// unrolls, so the matrix entries are constants: its zeros cost nothing and its ones are plain adds.
template <class Mat, class T>
inline void sandwich(const T* __restrict in, T* __restrict out) {
  constexpr int RO = Mat::rows, S = Mat::cols;
  using V = WinoVec<T>;
  V tmp[RO][S];
#pragma GCC unroll 8
  for (int i = 0; i < RO; ++i)
#pragma GCC unroll 8
    for (int q = 0; q < S; ++q) {
      V acc = {};
#pragma GCC unroll 8
      for (int k = 0; k < S; ++k) {
        const T mv = T(Mat::get(i, k));
        if (mv == T(0)) continue;
        V x;
        std::memcpy(&x, in + (k * S + q) * wino_lanes, sizeof x);
        acc += mv * x;
      }
      tmp[i][q] = acc;
    }
#pragma GCC unroll 8
  for (int i = 0; i < RO; ++i)
#pragma GCC unroll 8
    for (int j = 0; j < RO; ++j) {
      V acc = {};
#pragma GCC unroll 8
      for (int q = 0; q < S; ++q) {
        const T mv = T(Mat::get(j, q));
        if (mv != T(0)) acc += mv * tmp[i][q];
      }
      std::memcpy(out + (i * RO + j) * wino_lanes, &acc, sizeof acc);
    }
}

// Moves between L tiles' rows in memory and the lane-interleaved [row][col][lane] buffers of the transforms, for
// groups of whole tiles; edge tiles take clipped per-lane loops beside each call. Whole tiles keep these
// fixed-size loops, faster than the clipped ones; plain loops, as in-register transposes gain nothing in them.

/// d[(p * C + q) * L + l] = src[l][p * ld + q] for p < R, q < C.
template <int R, int C, class T>
inline void gather_rows(const T* const* src, int64_t ld, T* __restrict d) {
  for (int p = 0; p < R; ++p)
    for (int q = 0; q < C; ++q)
      for (int l = 0; l < wino_lanes; ++l) d[(p * C + q) * wino_lanes + l] = src[l][p * ld + q];
}

/// dst[l][p * ld + q] += s[(p * C + q) * L + l] for p < R, q < C, lane after lane (the lanes' windows may overlap).
template <int R, int C, class T>
inline void scatter_add_rows(const T* __restrict s, T* const* dst, int64_t ld) {
  for (int l = 0; l < wino_lanes; ++l)
    for (int p = 0; p < R; ++p)
      for (int q = 0; q < C; ++q) dst[l][p * ld + q] += s[(p * C + q) * wino_lanes + l];
}

/// dst[l][p * ld + q] = act(s[(p * C + q) * L + l] + bias) for p < R, q < C (act: relu or identity).
template <int R, int C, class T>
inline void store_rows(const T* __restrict s, T* const* dst, int64_t ld, T bias, bool relu) {
  for (int l = 0; l < wino_lanes; ++l)
    for (int p = 0; p < R; ++p)
      for (int q = 0; q < C; ++q) {
        T val = s[(p * C + q) * wino_lanes + l] + bias;
        if (relu) val = val > T(0) ? val : T(0);  // NaN -> 0, as fn::Relu
        dst[l][p * ld + q] = val;
      }
}

/// Channels per chunk of a transform loop over `tp` tiles a channel: about 2048 tiles' transforms.
inline int64_t wino_channel_grain(int64_t tp) { return std::max<int64_t>(1, 2048 / std::max<int64_t>(tp, 1)); }

/// Whether a batch of `tiles` tiles splits over the pool by images (each thread then runs its own GEMMs, at least
/// 128 tiles wide) or runs as one chunk whose GEMMs and transforms spread over the pool themselves: with few
/// tiles (ResNet's 7 x 7 layers: 4 an image) a split by images gives each thread narrow GEMMs and a private copy
/// of the transformed filter gradient, so a second thread adds little.
inline bool wino_split_by_images(int64_t tiles) { return tiles >= 128 * int64_t(oar::num_threads()); }

/// The tiles of a sub-batch of nb images: tile t = (b * th + ty) * tw + tx has its window at row
/// y0 = ty * step - ph, column x0 = tx * step - pw of image b; the table is padded with empty tiles
/// (b = -1) to a multiple of the lane count.
struct WinoTile {
  int64_t b, y0, x0, ty, tx;
};

inline const WinoTile* wino_tile_table(int64_t nb, int64_t th, int64_t tw, int64_t step, int64_t ph, int64_t pw, int64_t tp) {
  WinoTile* tab = thread_scratch<WinoTile, 0>(size_t(tp));
  int64_t t = 0;
  for (int64_t b = 0; b < nb; ++b)
    for (int64_t ty = 0; ty < th; ++ty)
      for (int64_t tx = 0; tx < tw; ++tx) tab[t++] = WinoTile{b, ty * step - ph, tx * step - pw, ty, tx};
  for (; t < tp; ++t) tab[t] = WinoTile{-1, 0, 0, 0, 0};
  return tab;
}

/// Fills pad [nb][ph_ * pw_] with the planes (b, ci) of `img` (images [c, h, w]) shifted by (top, left) and zeros
/// around them: a tile's window at (y0, x0) of the image lies at (y0 + top, x0 + left) of its padded plane.
template <class T>
inline void wino_pad_planes(const T* img, int64_t nb, int64_t c, int64_t ci, int64_t h, int64_t w, int64_t top, int64_t left, int64_t hp, int64_t wp,
                            T* pad) {
  for (int64_t b = 0; b < nb; ++b) {
    const T* plane = img + (b * c + ci) * h * w;
    T* dst = pad + b * hp * wp;
    for (int64_t r = 0; r < hp; ++r) {
      T* row = dst + r * wp;
      const int64_t ir = r - top;
      if (ir < 0 || ir >= h) {
        std::fill(row, row + wp, T(0));
        continue;
      }
      const int64_t c0 = std::min(left, wp), c1 = std::min(left + w, wp);
      std::fill(row, row + c0, T(0));
      std::copy(plane + ir * w, plane + ir * w + (c1 - c0), row + c0);
      std::fill(row + c1, row + wp, T(0));
    }
  }
}

/// Where the transforms find one channel's windows of a sub-batch: the images themselves when every window lies
/// inside them (`in_place`: no padding, whole tiles), else zero-padded copies of the planes, hp x wp each with the
/// image at (top, left) (wino_pad_planes). Image b's plane starts `step` after image 0's, its rows `ld` apart,
/// and holds `plane` elements; a scratch buffer of `scratch(nb, rows)` elements holds the copies and, after
/// them, `rows` zero rows for the empty tiles of a last group.
struct WinoPlanes {
  bool in_place;
  int64_t hp, wp, ld, step, plane;
  int64_t scratch(int64_t nb, int64_t rows) const { return (in_place ? 0 : nb * plane) + rows * ld; }
  int64_t tail(int64_t nb) const { return in_place ? 0 : nb * plane; }
};

inline WinoPlanes wino_planes(int64_t c, int64_t h, int64_t w, int64_t top, int64_t left, int64_t hp, int64_t wp) {
  const bool in_place = top == 0 && left == 0 && hp <= h && wp <= w;
  return {in_place, hp, wp, in_place ? w : wp, in_place ? c * h * w : hp * wp, in_place ? h * w : hp * wp};
}

/// V[pos][ci][t] = (BT d_t BT^T)[pos] for the A x A windows d_t of `img` (nb images [c, h, w]) at the tiles of
/// `tab` (tp of them, a multiple of the lane count; th x tw an image, M apart, the first at (-ph, -pw)), zeros
/// outside the image and for empty tiles. Each plane is first copied into a zero-padded one, so that every
/// window is read by the same fixed-size loop: read straight from the image, a group of tiles with one edge
/// tile in it (most groups of a padded image, all of a 7 x 7 one) would need per-lane clipped loops.
template <class BT, int M, class T>
inline void wino_input_transform(const T* img, int64_t nb, int64_t c, int64_t h, int64_t w, int64_t ph, int64_t pw, int64_t th, int64_t tw,
                                 const WinoTile* tab, T* v, int64_t tp) {
  constexpr int A = BT::cols, L = wino_lanes;
  const WinoPlanes pl = wino_planes(c, h, w, ph, pw, (th - 1) * M + A, (tw - 1) * M + A);
  oar::parallel_for(0, c, wino_channel_grain(tp), [&](int64_t c0, int64_t c1) {
  alignas(64) T d[A * A * L];
  alignas(64) T out[A * A * L];
  T* pad = thread_scratch<T, 6>(size_t(pl.scratch(nb, A)));
  T* zero = pad + pl.tail(nb);
  std::fill(zero, zero + A * pl.ld, T(0));
  for (int64_t ci = c0; ci < c1; ++ci) {
    const T* base = pl.in_place ? img + ci * h * w : pad;
    if (!pl.in_place) wino_pad_planes(img, nb, c, ci, h, w, ph, pw, pl.hp, pl.wp, pad);
    for (int64_t t0 = 0; t0 < tp; t0 += L) {
      const T* rows[L];
      for (int l = 0; l < L; ++l) {
        const WinoTile& tl = tab[t0 + l];
        rows[l] = tl.b < 0 ? zero : base + tl.b * pl.step + (tl.y0 + ph) * pl.ld + tl.x0 + pw;
      }
      gather_rows<A, A>(rows, pl.ld, d);
      sandwich<BT>(d, out);
      for (int pos = 0; pos < A * A; ++pos) std::memcpy(v + (pos * c + ci) * tp + t0, out + pos * L, sizeof(T) * L);
    }
  }
  });
}

/// Pairs of channels a block of the filter transforms handles: each tile position's row of u is then written
/// (or read) in runs of this many, not of one lane group: runs of 8 over 36-64 rows a megabyte apart (512 x 512
/// channels) are too short for the hardware prefetchers.
inline constexpr int64_t wino_pair_block = 64;

/// The r x r filters transformed: u[pos][o][ci] = (G g G^T)[pos] for g = filter[o, ci], in blocks of pairs
/// spread over the pool (at 512 x 512 channels this is 0.26 M pairs, too many to leave to one thread).
template <class T, int M, int R>
inline void wino_filter_transform(const T* filter, int64_t o, int64_t c, T* u) {
  constexpr int A = M + R - 1, L = wino_lanes;
  constexpr int64_t PB = wino_pair_block;
  const int64_t pairs = o * c, blocks = (pairs + PB - 1) / PB;
  oar::parallel_for(0, blocks, 16, [&](int64_t b0, int64_t b1) {
    alignas(64) T g[R * R * L];
    alignas(64) T out[A * A * L];
    alignas(64) T blk[A * A * PB];  // [pos][pair in block]
    for (int64_t q0 = b0 * PB; q0 < std::min(pairs, b1 * PB); q0 += PB) {
      const int64_t nq = std::min(PB, pairs - q0);
      for (int64_t p0 = 0; p0 < nq; p0 += L) {
        for (int l = 0; l < L; ++l)  // pair p = oo * c + ci is filter[oo, ci], R * R floats at p * R * R
          for (int k = 0; k < R * R; ++k) g[k * L + l] = p0 + l < nq ? filter[(q0 + p0 + l) * R * R + k] : T(0);
        sandwich<WinoG<M, R>>(g, out);
        for (int pos = 0; pos < A * A; ++pos) std::memcpy(blk + pos * PB + p0, out + pos * L, sizeof(T) * L);
      }
      for (int pos = 0; pos < A * A; ++pos) std::memcpy(u + pos * pairs + q0, blk + pos * PB, sizeof(T) * size_t(nq));
    }
  });
}

/// Images per sub-batch of a chunk of `chunk` images with `tiles` tiles an image and `elems` elements of
/// transformed tiles (V and the products) an image: about 2 MB of them, but at least 128 tiles, so that
/// each position's GEMM has a wide N: by memory alone, 512-channel 7 x 7 images would go 2 at a time (8 tiles,
/// N = 8), too narrow for a GEMM to run near the machine's rate.
inline int64_t wino_images_per_batch(int64_t tiles, int64_t elems, int64_t chunk) {
  const int64_t by_mem = (int64_t{1} << 19) / std::max<int64_t>(elems, 1), by_tiles = (128 + tiles - 1) / std::max<int64_t>(tiles, 1);
  return std::clamp<int64_t>(std::max(by_mem, by_tiles), 1, std::max<int64_t>(chunk, 1));
}

inline int64_t round_up(int64_t x, int64_t to) { return (x + to - 1) / to * to; }

template <class T, int M, int R>
inline void wino_conv2d(const T* in, int64_t n, int64_t c, int64_t h, int64_t w, const T* filter, int64_t o, int64_t ph, int64_t pw,
                        int64_t oh, int64_t ow, T* out, const T* bias, bool relu) {
  constexpr int A = M + R - 1, L = wino_lanes;
  T* u = thread_scratch<T, 4>(size_t(A * A * o * c));
  wino_filter_transform<T, M, R>(filter, o, c, u);
  const int64_t th = (oh + M - 1) / M, tw = (ow + M - 1) / M;
  for_image_chunks<T>(n, 0, nullptr, [&](int64_t lo, int64_t hi, T*) {
    const int64_t per = wino_images_per_batch(th * tw, A * A * (c + o) * th * tw, hi - lo);
    const int64_t tpmax = round_up(per * th * tw, L);
    T* v = thread_scratch<T, 2>(size_t(A * A * c * tpmax));
    T* prod = thread_scratch<T, 3>(size_t(A * A * o * tpmax));
    for (int64_t i0 = lo; i0 < hi; i0 += per) {
      const int64_t nb = std::min(per, hi - i0), nt = nb * th * tw, tp = round_up(nt, L);
      const WinoTile* tab = wino_tile_table(nb, th, tw, M, ph, pw, tp);
      wino_input_transform<WinoBT<M, R>, M>(in + i0 * c * h * w, nb, c, h, w, ph, pw, th, tw, tab, v, tp);
      for (int pos = 0; pos < A * A; ++pos)
        gemm<T>(false, false, o, tp, c, T(1), u + pos * o * c, c, v + pos * c * tp, tp, T(0), prod + pos * o * tp, tp);
      oar::parallel_for(0, o, wino_channel_grain(tp), [&](int64_t o0, int64_t o1) {
      alignas(64) T mt[A * A * L];
      alignas(64) T yt[M * M * L];
      for (int64_t oo = o0; oo < o1; ++oo) {
        const T bo = bias ? bias[oo] : T(0);
        for (int64_t t0 = 0; t0 < nt; t0 += L) {
          for (int pos = 0; pos < A * A; ++pos) std::memcpy(mt + pos * L, prod + (pos * o + oo) * tp + t0, sizeof(T) * L);
          sandwich<WinoAT<M, R>>(mt, yt);
          T* dst[L];
          bool whole = t0 + L <= nt;
          for (int l = 0; l < L; ++l) {
            const WinoTile& tl = tab[std::min(t0 + l, nt - 1)];
            dst[l] = out + ((i0 + tl.b) * o + oo) * oh * ow + tl.ty * M * ow + tl.tx * M;
            whole = whole && (tl.ty + 1) * M <= oh && (tl.tx + 1) * M <= ow;
          }
          if (whole) {
            store_rows<M, M>(yt, dst, ow, bo, relu);
            continue;
          }
          for (int l = 0; l < L && t0 + l < nt; ++l) {
            const WinoTile& tl = tab[t0 + l];
            const int64_t rows = std::min<int64_t>(M, oh - tl.ty * M), cols = std::min<int64_t>(M, ow - tl.tx * M);
            for (int64_t y = 0; y < rows; ++y)
              for (int64_t x = 0; x < cols; ++x) {
                T val = yt[(y * M + x) * L + l] + bo;
                if (relu) val = val > T(0) ? val : T(0);  // NaN -> 0, as fn::Relu
                dst[l][y * ow + x] = val;
              }
          }
        }
      }
      });
    }
  }, wino_split_by_images(n * th * tw));
}

template <class T, int M, int R>
inline void wino_conv2d_grad(const T* x, int64_t n, int64_t c, int64_t h, int64_t w, const T* filter, int64_t o, int64_t ph,
                             int64_t pw, int64_t oh, int64_t ow, const T* dy, T* dx, T* dw) {
  constexpr int A = M + R - 1, L = wino_lanes;
  const int64_t th = (oh + M - 1) / M, tw = (ow + M - 1) / M;
  const bool split = wino_split_by_images(n * th * tw);
  // The whole batch in one sub-batch on the caller (few tiles: small images): the transformed filters U and
  // their gradient dU (each 36 x 512 x 512 floats in ResNet-18's last stage) then share one buffer, U
  // transformed only once dU has gone into dw.
  const bool late_u = dx && dw && !split && wino_images_per_batch(th * tw, A * A * (c + o) * th * tw, n) >= n;
  T* u = nullptr;
  if (dx && !late_u) {
    u = thread_scratch<T, 4>(size_t(A * A * o * c));
    wino_filter_transform<T, M, R>(filter, o, c, u);
  }
  for_image_chunks<T>(n, dw ? o * c * R * R : 0, dw, [&](int64_t lo, int64_t hi, T* acc) {
    const int64_t per = wino_images_per_batch(th * tw, A * A * (c + o) * th * tw, hi - lo);
    const int64_t tpmax = round_up(per * th * tw, L);
    T* v = thread_scratch<T, 2>(size_t(A * A * c * tpmax));  // V, then Z = U^T P
    T* p = thread_scratch<T, 3>(size_t(A * A * o * tpmax));  // P = A dy_t A^T
    T* du = !dw ? nullptr : late_u ? thread_scratch<T, 4>(size_t(A * A * o * c)) : thread_scratch<T, 5>(size_t(A * A * o * c));
    if (du) std::fill(du, du + A * A * o * c, T(0));
    // dx of a sub-batch: Z = U^T P per position, then each tile's B Z B^T added into its window.
    auto dx_part = [&](int64_t i0, int64_t nb, int64_t nt, int64_t tp, const WinoTile* tab) {
      for (int pos = 0; pos < A * A; ++pos)  // Z[pos] [c, tp] = U[pos]^T [c, o] P[pos] [o, tp]
        gemm<T>(true, false, c, tp, o, T(1), u + pos * o * c, c, p + pos * o * tp, tp, T(0), v + pos * c * tp, tp);
      // Each channel's windows add up in zero-padded planes (every window whole, one fixed-size loop), whose
      // interior is then dx (without padding and with every window in the image, dx itself is that plane).
      T* dxb = dx + i0 * c * h * w;
      const WinoPlanes pl = wino_planes(c, h, w, ph, pw, (th - 1) * M + A, (tw - 1) * M + A);
      oar::parallel_for(0, c, wino_channel_grain(tp), [&](int64_t c0, int64_t c1) {
      alignas(64) T big[A * A * L];
      alignas(64) T win[A * A * L];
      T* pad = thread_scratch<T, 6>(size_t(pl.scratch(nb, A)));
      T* dump = pad + pl.tail(nb);  // takes the empty tiles' windows
      for (int64_t ci = c0; ci < c1; ++ci) {
        T* base = pl.in_place ? dxb + ci * h * w : pad;
        for (int64_t b = 0; b < nb; ++b) std::fill(base + b * pl.step, base + b * pl.step + pl.plane, T(0));
        for (int64_t t0 = 0; t0 < nt; t0 += L) {
          for (int pos = 0; pos < A * A; ++pos) std::memcpy(big + pos * L, v + (pos * c + ci) * tp + t0, sizeof(T) * L);
          sandwich<Transposed<WinoBT<M, R>>>(big, win);
          T* dst[L];
          for (int l = 0; l < L; ++l) {
            const WinoTile& tl = tab[std::min(t0 + l, tp - 1)];
            dst[l] = t0 + l >= nt || tl.b < 0 ? dump : base + tl.b * pl.step + (tl.y0 + ph) * pl.ld + tl.x0 + pw;
          }
          scatter_add_rows<A, A>(win, dst, pl.ld);
        }
        if (pl.in_place) continue;
        for (int64_t b = 0; b < nb; ++b)
          for (int64_t r = 0; r < h; ++r) {
            const T* src = pad + b * pl.plane + (r + ph) * pl.wp + pw;
            std::copy(src, src + w, dxb + ((b * c + ci) * h + r) * w);
          }
      }
      });
    };
    for (int64_t i0 = lo; i0 < hi; i0 += per) {
      const int64_t nb = std::min(per, hi - i0), nt = nb * th * tw, tp = round_up(nt, L);
      const WinoTile* tab = wino_tile_table(nb, th, tw, M, ph, pw, tp);
      // P[pos][oo][t]: the M x M dy tiles lifted to A x A, read from dy planes padded with zeros to whole tiles.
      const WinoPlanes pl = wino_planes(o, oh, ow, 0, 0, th * M, tw * M);
      const T* dyb = dy + i0 * o * oh * ow;
      oar::parallel_for(0, o, wino_channel_grain(tp), [&](int64_t o0, int64_t o1) {
      alignas(64) T g[M * M * L];
      alignas(64) T big[A * A * L];
      T* pad = thread_scratch<T, 6>(size_t(pl.scratch(nb, M)));
      T* zero = pad + pl.tail(nb);
      std::fill(zero, zero + M * pl.ld, T(0));
      for (int64_t oo = o0; oo < o1; ++oo) {
        const T* base = pl.in_place ? dyb + oo * oh * ow : pad;
        if (!pl.in_place) wino_pad_planes(dyb, nb, o, oo, oh, ow, 0, 0, pl.hp, pl.wp, pad);
        for (int64_t t0 = 0; t0 < tp; t0 += L) {
          const T* src[L];
          for (int l = 0; l < L; ++l) {
            const WinoTile& tl = tab[t0 + l];
            src[l] = tl.b < 0 ? zero : base + tl.b * pl.step + tl.ty * M * pl.ld + tl.tx * M;
          }
          gather_rows<M, M>(src, pl.ld, g);
          sandwich<Transposed<WinoAT<M, R>>>(g, big);
          for (int pos = 0; pos < A * A; ++pos) std::memcpy(p + (pos * o + oo) * tp + t0, big + pos * L, sizeof(T) * L);
        }
      }
      });
      if (du) {  // dU[pos] [o, c] += P[pos] [o, tp] V[pos]^T [tp, c]
        wino_input_transform<WinoBT<M, R>, M>(x + i0 * c * h * w, nb, c, h, w, ph, pw, th, tw, tab, v, tp);
        for (int pos = 0; pos < A * A; ++pos)
          gemm<T>(false, true, o, c, tp, T(1), p + pos * o * tp, tp, v + pos * c * tp, tp, T(1), du + pos * o * c, c);
      }
      if (dx && !late_u) dx_part(i0, nb, nt, tp, tab);
    }
    if (du) {
      // acc[oo, ci] += G^T dU[:, oo, ci] G (R x R), a block of pairs at a time, L of them in each transform.
      constexpr int64_t PB = wino_pair_block;
      const int64_t pairs = o * c;
      oar::parallel_for(0, (pairs + PB - 1) / PB, 16, [&](int64_t b0, int64_t b1) {
        alignas(64) T big[A * A * L];
        alignas(64) T rt[R * R * L];
        alignas(64) T blk[A * A * PB];  // [pos][pair in block]
        for (int64_t q0 = b0 * PB; q0 < std::min(pairs, b1 * PB); q0 += PB) {
          const int64_t nq = std::min(PB, pairs - q0);
          if (nq < PB) std::fill(blk, blk + A * A * PB, T(0));
          for (int pos = 0; pos < A * A; ++pos) std::memcpy(blk + pos * PB, du + pos * pairs + q0, sizeof(T) * size_t(nq));
          for (int64_t p0 = 0; p0 < nq; p0 += L) {
            for (int pos = 0; pos < A * A; ++pos) std::memcpy(big + pos * L, blk + pos * PB + p0, sizeof(T) * L);
            sandwich<Transposed<WinoG<M, R>>>(big, rt);
            for (int l = 0; l < L && p0 + l < nq; ++l)
              for (int k = 0; k < R * R; ++k) acc[(q0 + p0 + l) * R * R + k] += rt[k * L + l];
          }
        }
      });
    }
    if (late_u) {  // one sub-batch: its tiles and P are still there
      u = du;
      wino_filter_transform<T, M, R>(filter, o, c, u);
      const int64_t nt = (hi - lo) * th * tw, tp = round_up(nt, L);
      dx_part(lo, hi - lo, nt, tp, wino_tile_table(hi - lo, th, tw, M, ph, pw, tp));
    }
  }, split);
}

/// Calls f with the tile's output size M and the filter size R as constants: F(6, 3) or F(4, 3) for 3 x 3
/// filters, F(4, 5) or F(2, 5) for 5 x 5, the larger tile where `tiles` asks for it.
template <class F>
void with_wino_tile(WinoTiles tiles, int64_t r, F&& f) {
  const bool large = tiles == WinoTiles::large;
  if (r == 3 && large) f(std::integral_constant<int, 6>{}, std::integral_constant<int, 3>{});
  else if (r == 3) f(std::integral_constant<int, 4>{}, std::integral_constant<int, 3>{});
  else if (large) f(std::integral_constant<int, 4>{}, std::integral_constant<int, 5>{});
  else f(std::integral_constant<int, 2>{}, std::integral_constant<int, 5>{});
}

}  // namespace detail

template <class T>
void winograd_conv2d(WinoTiles tiles, const T* in, int64_t n, int64_t c, int64_t h, int64_t w, const T* filter, int64_t o,
                     int64_t r, int64_t ph, int64_t pw, int64_t oh, int64_t ow, T* out, const T* bias, bool relu) {
  detail::with_wino_tile(tiles, r, [&](auto m, auto rr) { detail::wino_conv2d<T, m(), rr()>(in, n, c, h, w, filter, o, ph, pw, oh, ow, out, bias, relu); });
}

template <class T>
void winograd_conv2d_grad(WinoTiles tiles, const T* x, int64_t n, int64_t c, int64_t h, int64_t w, const T* filter, int64_t o,
                          int64_t r, int64_t ph, int64_t pw, int64_t oh, int64_t ow, const T* dy, T* dx, T* dw) {
  detail::with_wino_tile(tiles, r, [&](auto m, auto rr) { detail::wino_conv2d_grad<T, m(), rr()>(x, n, c, h, w, filter, o, ph, pw, oh, ow, dy, dx, dw); });
}

}  // namespace oar::cpu_kernels
