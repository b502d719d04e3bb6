// kernels/cpu/winograd.hpp: Winograd (Toom-Cook) minimal-filtering convolution for stride-1, undilated,
// ungrouped convolutions with 3x3 or 5x5 windows on 8x8 tiles, F(6x6, 3x3) and F(4x4, 5x5): the forward pass
// and, as its exact adjoint on the same tiles, both gradients. 4-6x fewer multiplications than im2col + GEMM;
// the products of a batch are 64 GEMMs, one per tile position.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/gemm.hpp"
#include "kernels/cpu/im2col.hpp"
#include "oar/device/conv_algorithm.hpp"

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

/// Whether a convolution over `g` with c input and m output channels in `groups` groups runs on Winograd tiles:
/// stride 1, no dilation, one group, an r x r window with r = 3 or 5 and padding below r; under `automatic`
/// also both channel counts at least 8 (with fewer channels the tile transforms cost more than the
/// multiplications they save: LeNet's first layer, c = 1, stays on im2col) and tiles that cover the output
/// with at most 30% waste. The tiles give 6 x 6 (3x3 windows) or 4 x 4 (5x5 windows) outputs, so a 7 x 7
/// output takes 12 x 12 of tile work (2.9x) and a 14 x 14 one 18 x 18 (1.65x); ResNet-18's 512-channel 7 x 7
/// layers ran 6x slower on tiles than on im2col (docs/benchmarks.md, "ResNet-18 training").
inline bool winograd_applies(const ConvGeom& g, int64_t m, int64_t groups) {
  const ConvAlgorithm a = conv_algorithm();
  if (a == ConvAlgorithm::im2col || groups != 1 || g.sh != 1 || g.sw != 1 || g.dh != 1 || g.dw != 1) return false;
  if (g.kh != g.kw || (g.kh != 3 && g.kh != 5) || g.ph >= g.kh || g.pw >= g.kw || g.ph < 0 || g.pw < 0) return false;
  const int64_t c = g.c, oh = g.oh, ow = g.ow;
  if (a == ConvAlgorithm::winograd) return true;
  const int64_t tile = g.kh == 3 ? 6 : 4;
  const int64_t covered = (oh + tile - 1) / tile * tile * ((ow + tile - 1) / tile * tile);
  return c >= 8 && m >= 8 && oh >= 4 && ow >= 4 && covered * 10 <= oh * ow * 13;
}

/// out[n, o, i, j] = act(bias[o] + sum_{ci, a, b} in[n, ci, i - ph + a, j - pw + b] * filter[o, ci, a, b]) with
/// zeros outside `in`, for i < oh, j < ow; the window is r x r, r = 3 or 5; bias may be null.
/// requires: in [n, c, h, w], filter [o, c, r, r], out [n, o, oh, ow], no overlap; 0 <= ph, pw < r.
template <class T>
void winograd_conv2d(const T* in, int64_t n, int64_t c, int64_t h, int64_t w, const T* filter, int64_t o, int64_t r,
                     int64_t ph, int64_t pw, int64_t oh, int64_t ow, T* out, const T* bias, bool relu);

/// The gradients of winograd_conv2d (no bias, identity) for the output gradient dy [n, o, oh, ow]: dx [n, c, h, w]
/// and dw [o, c, r, r] (either may be null), written, not accumulated. They are the exact adjoint of the forward
/// algorithm on the same tiles: one transform of each dy tile serves both, dx = sum over tiles of
/// B (U^T P) B^T scattered back, dw = G^T (sum over tiles of P V^T) G.
template <class T>
void winograd_conv2d_grad(const T* x, int64_t n, int64_t c, int64_t h, int64_t w, const T* filter, int64_t o, int64_t r,
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

inline constexpr int wino_alpha = 8;  // every tile here is 8 x 8
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
// groups of whole tiles; edge tiles take clipped per-lane loops beside each call. NOTE: these fixed-size loops
// measured 8-12% faster over the book net's second layer than the clipped loops alone; AVX2 in-register
// transposes in them measured no faster than the plain loops.

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

/// V[pos][ci][t] = (BT d_t BT^T)[pos] for the 8x8 windows d_t of `img` (images [c, h, w]) at the tiles of
/// `tab` (tp of them, a multiple of the lane count), zeros outside the image and for empty tiles.
template <class BT, class T>
inline void wino_input_transform(const T* img, int64_t c, int64_t h, int64_t w, const WinoTile* tab, T* v, int64_t tp) {
  constexpr int A = wino_alpha, L = wino_lanes;
  alignas(64) T d[A * A * L];
  alignas(64) T out[A * A * L];
  auto interior = [&](const WinoTile& tl) { return tl.b >= 0 && tl.y0 >= 0 && tl.x0 >= 0 && tl.y0 + A <= h && tl.x0 + A <= w; };
  for (int64_t ci = 0; ci < c; ++ci)
    for (int64_t t0 = 0; t0 < tp; t0 += L) {
      bool all_inside = true;
      const T* rows[L];
      for (int l = 0; l < L; ++l) {
        const WinoTile& tl = tab[t0 + l];
        all_inside = all_inside && interior(tl);
        rows[l] = all_inside ? img + ((tl.b * c + ci) * h + tl.y0) * w + tl.x0 : nullptr;
      }
      if (all_inside) gather_rows<A, A>(rows, w, d);
      for (int l = 0; l < L && !all_inside; ++l) {
        const WinoTile& tl = tab[t0 + l];
        if (tl.b < 0) {
          for (int k = 0; k < A * A; ++k) d[k * L + l] = T(0);
          continue;
        }
        const T* plane = img + (tl.b * c + ci) * h * w;
        const int64_t p0 = std::max<int64_t>(0, -tl.y0), p1 = std::min<int64_t>(A, h - tl.y0);
        const int64_t q0 = std::max<int64_t>(0, -tl.x0), q1 = std::min<int64_t>(A, w - tl.x0);
        for (int k = 0; k < A * A; ++k) d[k * L + l] = T(0);
        for (int64_t p = p0; p < p1; ++p)
          for (int64_t q = q0; q < q1; ++q) d[(p * A + q) * L + l] = plane[(tl.y0 + p) * w + tl.x0 + q];
      }
      sandwich<BT>(d, out);
      for (int pos = 0; pos < A * A; ++pos) std::memcpy(v + (pos * c + ci) * tp + t0, out + pos * L, sizeof(T) * L);
    }
}

/// The r x r filters transformed: u[pos][o][ci] = (G g G^T)[pos] for g = filter[o, ci].
template <class T, int M, int R>
inline void wino_filter_transform(const T* filter, int64_t o, int64_t c, T* u) {
  constexpr int A = wino_alpha, L = wino_lanes;
  alignas(64) T g[R * R * L];
  alignas(64) T out[A * A * L];
  const int64_t pairs = o * c;
  for (int64_t p0 = 0; p0 < pairs; p0 += L) {
    for (int l = 0; l < L; ++l) {
      const int64_t p = p0 + l, oo = p / c, ci = p % c;
      for (int a = 0; a < R; ++a)
        for (int b = 0; b < R; ++b)
          g[(a * R + b) * L + l] = p < pairs ? filter[((oo * c + ci) * R + a) * R + b] : T(0);
    }
    sandwich<WinoG<M, R>>(g, out);
    for (int l = 0; l < L && p0 + l < pairs; ++l)
      for (int pos = 0; pos < A * A; ++pos) u[pos * pairs + p0 + l] = out[pos * L + l];
  }
}

/// Images per sub-batch: about `target` elements of transformed tiles (V and the products) in flight.
inline int64_t wino_images_per_batch(int64_t per_image_elems, int64_t chunk, int64_t target = int64_t{1} << 19) {
  return std::clamp<int64_t>(target / std::max<int64_t>(per_image_elems, 1), 1, std::max<int64_t>(chunk, 1));
}

inline int64_t round_up(int64_t x, int64_t to) { return (x + to - 1) / to * to; }

template <class T, int M, int R>
inline void wino_conv2d(const T* in, int64_t n, int64_t c, int64_t h, int64_t w, const T* filter, int64_t o, int64_t ph, int64_t pw,
                        int64_t oh, int64_t ow, T* out, const T* bias, bool relu) {
  constexpr int A = wino_alpha, L = wino_lanes;
  T* u = thread_scratch<T, 4>(size_t(A * A * o * c));
  wino_filter_transform<T, M, R>(filter, o, c, u);
  const int64_t th = (oh + M - 1) / M, tw = (ow + M - 1) / M;
  for_image_chunks<T>(n, 0, nullptr, [&](int64_t lo, int64_t hi, T*) {
    const int64_t per = wino_images_per_batch(A * A * (c + o) * th * tw, hi - lo);
    const int64_t tpmax = round_up(per * th * tw, L);
    T* v = thread_scratch<T, 2>(size_t(A * A * c * tpmax));
    T* prod = thread_scratch<T, 3>(size_t(A * A * o * tpmax));
    alignas(64) T mt[A * A * L];
    alignas(64) T yt[M * M * L];
    for (int64_t i0 = lo; i0 < hi; i0 += per) {
      const int64_t nb = std::min(per, hi - i0), nt = nb * th * tw, tp = round_up(nt, L);
      const WinoTile* tab = wino_tile_table(nb, th, tw, M, ph, pw, tp);
      wino_input_transform<WinoBT<M, R>>(in + i0 * c * h * w, c, h, w, tab, v, tp);
      for (int pos = 0; pos < A * A; ++pos)
        gemm<T>(false, false, o, tp, c, T(1), u + pos * o * c, c, v + pos * c * tp, tp, T(0), prod + pos * o * tp, tp);
      for (int64_t oo = 0; oo < o; ++oo) {
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
    }
  });
}

template <class T, int M, int R>
inline void wino_conv2d_grad(const T* x, int64_t n, int64_t c, int64_t h, int64_t w, const T* filter, int64_t o, int64_t ph,
                             int64_t pw, int64_t oh, int64_t ow, const T* dy, T* dx, T* dw) {
  constexpr int A = wino_alpha, L = wino_lanes;
  T* u = nullptr;
  if (dx) {
    u = thread_scratch<T, 4>(size_t(A * A * o * c));
    wino_filter_transform<T, M, R>(filter, o, c, u);
  }
  const int64_t th = (oh + M - 1) / M, tw = (ow + M - 1) / M;
  for_image_chunks<T>(n, dw ? o * c * R * R : 0, dw, [&](int64_t lo, int64_t hi, T* acc) {
    const int64_t per = wino_images_per_batch(A * A * (c + o) * th * tw, hi - lo);
    const int64_t tpmax = round_up(per * th * tw, L);
    T* v = thread_scratch<T, 2>(size_t(A * A * c * tpmax));  // V, then Z = U^T P
    T* p = thread_scratch<T, 3>(size_t(A * A * o * tpmax));  // P = A dy_t A^T
    T* du = dw ? thread_scratch<T, 5>(size_t(A * A * o * c)) : nullptr;
    if (du) std::fill(du, du + A * A * o * c, T(0));
    alignas(64) T g[M * M * L];
    alignas(64) T big[A * A * L];
    for (int64_t i0 = lo; i0 < hi; i0 += per) {
      const int64_t nb = std::min(per, hi - i0), nt = nb * th * tw, tp = round_up(nt, L);
      const WinoTile* tab = wino_tile_table(nb, th, tw, M, ph, pw, tp);
      for (int64_t oo = 0; oo < o; ++oo)  // P[pos][oo][t]: the M x M dy tiles (zeros past oh, ow) lifted to 8 x 8
        for (int64_t t0 = 0; t0 < tp; t0 += L) {
          const T* src[L];
          bool whole = true;
          for (int l = 0; l < L; ++l) {
            const WinoTile& tl = tab[t0 + l];
            whole = whole && tl.b >= 0 && (tl.ty + 1) * M <= oh && (tl.tx + 1) * M <= ow;
            src[l] = tl.b < 0 ? nullptr : dy + ((i0 + tl.b) * o + oo) * oh * ow + tl.ty * M * ow + tl.tx * M;
          }
          if (whole) gather_rows<M, M>(src, ow, g);
          for (int l = 0; l < L && !whole; ++l) {
            const WinoTile& tl = tab[t0 + l];
            const int64_t rows = tl.b < 0 ? 0 : std::min<int64_t>(M, oh - tl.ty * M), cols = std::min<int64_t>(M, ow - tl.tx * M);
            for (int k = 0; k < M * M; ++k) g[k * L + l] = T(0);
            for (int64_t a = 0; a < rows; ++a)
              for (int64_t b = 0; b < cols; ++b) g[(a * M + b) * L + l] = src[l][a * ow + b];
          }
          sandwich<Transposed<WinoAT<M, R>>>(g, big);
          for (int pos = 0; pos < A * A; ++pos) std::memcpy(p + (pos * o + oo) * tp + t0, big + pos * L, sizeof(T) * L);
        }
      if (du) {  // dU[pos] [o, c] += P[pos] [o, tp] V[pos]^T [tp, c]
        wino_input_transform<WinoBT<M, R>>(x + i0 * c * h * w, c, h, w, tab, v, tp);
        for (int pos = 0; pos < A * A; ++pos)
          gemm<T>(false, true, o, c, tp, T(1), p + pos * o * tp, tp, v + pos * c * tp, tp, T(1), du + pos * o * c, c);
      }
      if (!dx) continue;
      for (int pos = 0; pos < A * A; ++pos)  // Z[pos] [c, tp] = U[pos]^T [c, o] P[pos] [o, tp]
        gemm<T>(true, false, c, tp, o, T(1), u + pos * o * c, c, p + pos * o * tp, tp, T(0), v + pos * c * tp, tp);
      T* dxb = dx + i0 * c * h * w;
      std::fill(dxb, dxb + nb * c * h * w, T(0));
      for (int64_t ci = 0; ci < c; ++ci)  // dx window += B Z_t B^T, clipped to the image
        for (int64_t t0 = 0; t0 < nt; t0 += L) {
          for (int pos = 0; pos < A * A; ++pos) std::memcpy(big + pos * L, v + (pos * c + ci) * tp + t0, sizeof(T) * L);
          alignas(64) T win[A * A * L];
          sandwich<Transposed<WinoBT<M, R>>>(big, win);
          T* dst[L];
          bool inside = t0 + L <= nt;
          for (int l = 0; l < L && inside; ++l) {
            const WinoTile& tl = tab[t0 + l];
            inside = tl.y0 >= 0 && tl.x0 >= 0 && tl.y0 + A <= h && tl.x0 + A <= w;
            dst[l] = dxb + ((tl.b * c + ci) * h + tl.y0) * w + tl.x0;
          }
          if (inside) {
            scatter_add_rows<A, A>(win, dst, w);
            continue;
          }
          for (int l = 0; l < L && t0 + l < nt; ++l) {
            const WinoTile& tl = tab[t0 + l];
            T* plane = dxb + (tl.b * c + ci) * h * w;
            const int64_t p0 = std::max<int64_t>(0, -tl.y0), p1 = std::min<int64_t>(A, h - tl.y0);
            const int64_t q0 = std::max<int64_t>(0, -tl.x0), q1 = std::min<int64_t>(A, w - tl.x0);
            for (int64_t a = p0; a < p1; ++a)
              for (int64_t b = q0; b < q1; ++b) plane[(tl.y0 + a) * w + tl.x0 + b] += win[(a * A + b) * L + l];
          }
        }
    }
    if (!du) return;
    // acc[oo, ci] += G^T dU[:, oo, ci] G (R x R), L pairs at a time.
    const int64_t pairs = o * c;
    alignas(64) T rt[R * R * L];
    for (int64_t p0 = 0; p0 < pairs; p0 += L) {
      for (int pos = 0; pos < A * A; ++pos)
        for (int l = 0; l < L; ++l) big[pos * L + l] = p0 + l < pairs ? du[pos * pairs + p0 + l] : T(0);
      sandwich<Transposed<WinoG<M, R>>>(big, rt);
      for (int l = 0; l < L && p0 + l < pairs; ++l)
        for (int k = 0; k < R * R; ++k) acc[(p0 + l) * R * R + k] += rt[k * L + l];
    }
  });
}

}  // namespace detail

template <class T>
void winograd_conv2d(const T* in, int64_t n, int64_t c, int64_t h, int64_t w, const T* filter, int64_t o, int64_t r,
                     int64_t ph, int64_t pw, int64_t oh, int64_t ow, T* out, const T* bias, bool relu) {
  if (r == 3)
    detail::wino_conv2d<T, 6, 3>(in, n, c, h, w, filter, o, ph, pw, oh, ow, out, bias, relu);
  else
    detail::wino_conv2d<T, 4, 5>(in, n, c, h, w, filter, o, ph, pw, oh, ow, out, bias, relu);
}

template <class T>
void winograd_conv2d_grad(const T* x, int64_t n, int64_t c, int64_t h, int64_t w, const T* filter, int64_t o, int64_t r,
                          int64_t ph, int64_t pw, int64_t oh, int64_t ow, const T* dy, T* dx, T* dw) {
  if (r == 3)
    detail::wino_conv2d_grad<T, 6, 3>(x, n, c, h, w, filter, o, ph, pw, oh, ow, dy, dx, dw);
  else
    detail::wino_conv2d_grad<T, 4, 5>(x, n, c, h, w, filter, o, ph, pw, oh, ow, dy, dx, dw);
}

}  // namespace oar::cpu_kernels
