// kernels/cpu/pool2d.hpp: pool2d and pool2d_grad on the CPU, one (n, c) plane at a time over the thread pool.
#pragma once
#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <type_traits>

#include "oar/ops/pool2d.hpp"
#include "oar/device/kernel_context.hpp"
#include "oar/device/thread_pool.hpp"

namespace oar::ops {

namespace detail {

/// The pooling windows of one X plane: window (i, j) covers rows [i*sh - ph, +kh) and cols [j*sw - pw, +kw)
/// clipped to the plane.
struct PoolGeom {
  int64_t planes = 0, h = 0, w = 0, oh = 0, ow = 0;
  int64_t kh = 1, kw = 1, sh = 1, sw = 1, ph = 0, pw = 0;
  bool max = true, exclusive = true;

  int64_t rows_lo(int64_t i) const { return std::max<int64_t>(i * sh - ph, 0); }
  int64_t rows_hi(int64_t i) const { return std::min<int64_t>(i * sh - ph + kh, h); }
  int64_t cols_lo(int64_t j) const { return std::max<int64_t>(j * sw - pw, 0); }
  int64_t cols_hi(int64_t j) const { return std::min<int64_t>(j * sw - pw + kw, w); }
  /// Elements of a window that lie in the plane; at least 1 when counted for averaging.
  int64_t divisor(int64_t rows, int64_t cols) const { return exclusive ? rows * cols : kh * kw; }
};

inline PoolGeom pool_geom(const KernelContext& c, const Pool2d::Attrs& a, const Shape& x) {
  c.check(x.rank() == 4, "X must be [N, C, H, W], got {}", x);
  c.check(!a.adaptive, "adaptive pooling is not supported");
  const auto &k = a.ksize, &s = a.strides, &p = a.paddings;
  PoolGeom g;
  g.planes = x[0] * x[1], g.h = x[2], g.w = x[3];
  g.max = a.pooling_type == Pool2d::PoolingType::max;
  g.exclusive = a.exclusive;
  if (a.global_pooling) {
    g.kh = g.h, g.kw = g.w, g.oh = 1, g.ow = 1;
    return g;
  }
  g.kh = k[0], g.kw = k[1], g.sh = s[0], g.sw = s[1], g.ph = p[0], g.pw = p[1];
  g.oh = Pool2d::out_size(g.h, g.kh, g.ph, g.sh, a.ceil_mode);
  g.ow = Pool2d::out_size(g.w, g.kw, g.pw, g.sw, a.ceil_mode);
  c.check(g.oh > 0 && g.ow > 0, "output size [{}, {}] <= 0 for X {}", g.oh, g.ow, x);
  return g;
}

/// Max of window (i, j), NaN when the window holds one (max propagates NaN), 0 for a window outside the
/// plane. Branch-free: on random data a compare-and-branch mispredicts on every other element.
template <class T>
inline T pool_max(const PoolGeom& g, const T* plane, int64_t i, int64_t j) {
  const int64_t r0 = g.rows_lo(i), r1 = g.rows_hi(i), q0 = g.cols_lo(j), q1 = g.cols_hi(j);
  if (r0 >= r1 || q0 >= q1) return T(0);
  T m = plane[r0 * g.w + q0];
  bool nan = false;
  for (int64_t r = r0; r < r1; ++r)
    for (int64_t q = q0; q < q1; ++q) {
      const T v = plane[r * g.w + q];
      m = v > m ? v : m;
      nan |= v != v;
    }
  return nan ? std::numeric_limits<T>::quiet_NaN() : m;
}

/// Flat index in the plane of the first element of window (i, j) equal to `m` (its max, or the first NaN when
/// `m` is NaN); -1 for a window outside the plane.
template <class T>
inline int64_t pool_argmax(const PoolGeom& g, const T* plane, int64_t i, int64_t j, T m) {
  const int64_t r0 = g.rows_lo(i), r1 = g.rows_hi(i), q0 = g.cols_lo(j), q1 = g.cols_hi(j);
  const bool nan = m != m;
  int64_t at = -1;
  for (int64_t r = r1 - 1; r >= r0; --r)  // backwards, so the last hit is the first in row-major order
    for (int64_t q = q1 - 1; q >= q0; --q) {
      const T v = plane[r * g.w + q];
      at = (nan ? v != v : v == m) ? r * g.w + q : at;
    }
  return at;
}

/// The common LeNet / VGG case: 2x2 max windows, stride 2, no padding, no partial window at the edges.
inline bool is_max_2x2(const PoolGeom& g) {
  return g.max && g.kh == 2 && g.kw == 2 && g.sh == 2 && g.sw == 2 && g.ph == 0 && g.pw == 0 && g.oh == g.h / 2 && g.ow == g.w / 2;
}

/// max(a, b, c, d) by plain compares (a NaN is not propagated: callers check for NaN themselves).
template <class T>
inline T max_of4(T a, T b, T c, T d) {
  T m = a;
  m = b > m ? b : m;
  m = c > m ? c : m;
  return d > m ? d : m;
}

/// Max of a, b, c, d propagating NaN, and which of them (0..3, row-major) is the first equal to it (the first
/// NaN when there is one): what pool_max / pool_argmax give for a 2x2 window, without the loops.
template <class T>
inline T max4(T a, T b, T c, T d, int& at) {
  const T m = max_of4(a, b, c, d);
  if (a != a || b != b || c != c || d != d) [[unlikely]] {
    at = a != a ? 0 : b != b ? 1 : c != c ? 2 : 3;
    return std::numeric_limits<T>::quiet_NaN();
  }
  at = a == m ? 0 : b == m ? 1 : c == m ? 2 : 3;
  return m;
}

/// Forward of one plane under is_max_2x2.
template <class T>
inline void max_pool_2x2(const PoolGeom& g, const T* plane, T* o) {
  for (int64_t i = 0; i < g.oh; ++i) {
    const T* r0 = plane + 2 * i * g.w;
    const T* r1 = r0 + g.w;
    T* oi = o + i * g.ow;
    for (int64_t j = 0; j < g.ow; ++j) {
      const T a = r0[2 * j], b = r0[2 * j + 1], c = r1[2 * j], d = r1[2 * j + 1];
      const T m = max_of4(a, b, c, d);
      const bool nan = (a != a) | (b != b) | (c != c) | (d != d);
      oi[j] = nan ? std::numeric_limits<T>::quiet_NaN() : m;
    }
  }
}

/// Whether a plane holds a NaN, by the bit patterns (an integer max that vectorizes, unlike a bool reduction).
/// The unsigned integer of a float type's width (its bit pattern).
template <class T>
using float_bits = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;

template <class T>
inline bool has_nan(const T* p, int64_t n) {
  using U = float_bits<T>;
  constexpr U abs_mask = ~(U(1) << (8 * sizeof(T) - 1));
  constexpr U inf = sizeof(T) == 4 ? U(0x7f800000u) : U(0x7ff0000000000000ull);
  U mx = 0;
  for (int64_t e = 0; e < n; ++e) {
    U b;
    std::memcpy(&b, p + e, sizeof b);
    b &= abs_mask;
    mx = b > mx ? b : mx;
  }
  return mx > inf;
}

/// Gradient of one plane under is_max_2x2: each window's d goes to its max (the first of a tie, row-major),
/// the rest of the plane is 0; a plane holding a NaN takes max4's exact path, which sends the gradient to the
/// window's first NaN.
template <class T>
inline void max_pool_2x2_grad(const PoolGeom& g, const T* plane, const T* d, T* dx) {
  using U = float_bits<T>;
  if (g.h % 2 || g.w % 2) std::fill(dx, dx + g.h * g.w, T(0));  // a last row or column no window covers
  const bool nan = has_nan(plane, g.h * g.w);
  for (int64_t i = 0; i < g.oh; ++i) {
    const T* r0 = plane + 2 * i * g.w;
    const T* r1 = r0 + g.w;
    T* d0 = dx + 2 * i * g.w;
    T* d1 = d0 + g.w;
    const T* di = d + i * g.ow;
    if (nan) [[unlikely]] {
      for (int64_t j = 0; j < g.ow; ++j) {
        int at = 0;
        max4(r0[2 * j], r0[2 * j + 1], r1[2 * j], r1[2 * j + 1], at);
        const T dv = di[j];
        d0[2 * j] = at == 0 ? dv : T(0);
        d0[2 * j + 1] = at == 1 ? dv : T(0);
        d1[2 * j] = at == 2 ? dv : T(0);
        d1[2 * j + 1] = at == 3 ? dv : T(0);
      }
      continue;
    }
    for (int64_t j = 0; j < g.ow; ++j) {
      const T a = r0[2 * j], b = r0[2 * j + 1], c = r1[2 * j], e = r1[2 * j + 1];
      const T m = max_of4(a, b, c, e);
      // All-ones masks select the winner: with float selects GCC branches on it, and on relu outputs (ties
      // of zeros, a random winner) every branch mispredicts.
      const U ma = -U(a == m), mb = -U(b == m) & ~ma, mc = -U(c == m) & ~(ma | mb), me = ~(ma | mb | mc);
      const U dv = std::bit_cast<U>(di[j]);
      d0[2 * j] = std::bit_cast<T>(dv & ma);
      d0[2 * j + 1] = std::bit_cast<T>(dv & mb);
      d1[2 * j] = std::bit_cast<T>(dv & mc);
      d1[2 * j + 1] = std::bit_cast<T>(dv & me);
    }
  }
}

/// Max pooling of one plane that holds no NaN, any window: the max of each window by selects (what pool_max
/// gives without its NaN bookkeeping).
template <class T>
inline void max_pool_plane(const PoolGeom& g, const T* plane, T* o) {
  for (int64_t i = 0; i < g.oh; ++i) {
    const int64_t r0 = g.rows_lo(i), r1 = g.rows_hi(i);
    for (int64_t j = 0; j < g.ow; ++j) {
      const int64_t q0 = g.cols_lo(j), q1 = g.cols_hi(j);
      T m = r0 < r1 && q0 < q1 ? plane[r0 * g.w + q0] : T(0);  // NOTE: a window wholly in the padding gives 0
      for (int64_t r = r0; r < r1; ++r)
        for (int64_t q = q0; q < q1; ++q) {
          const T v = plane[r * g.w + q];
          m = v > m ? v : m;
        }
      o[i * g.ow + j] = m;
    }
  }
}

/// Planes per parallel chunk: enough window work to pay for a hand-off.
inline int64_t pool_grain(const PoolGeom& g) { return std::max<int64_t>(1, (int64_t{1} << 15) / std::max<int64_t>(1, g.oh * g.ow * g.kh * g.kw)); }

}  // namespace detail

inline void Pool2d::eval_cpu(KernelContext& c, const Attrs& a) {
  const LoDTensor& xt = c.in(x);
  LoDTensor& ot = c.out(out);
  const detail::PoolGeom g = detail::pool_geom(c, a, xt.shape());
  c.dispatch_float([&](auto tag) {
    using T = typename decltype(tag)::type;
    ot.resize({xt.dim(0), xt.dim(1), g.oh, g.ow}, xt.dtype());
    const T* xp = xt.data<T>();
    T* op = ot.data<T>();
    const bool fast = detail::is_max_2x2(g);
    parallel_for(0, g.planes, detail::pool_grain(g), [&](int64_t lo, int64_t hi) {
      for (int64_t pl = lo; pl < hi; ++pl) {
        const T* plane = xp + pl * g.h * g.w;
        T* o = op + pl * g.oh * g.ow;
        if (fast) {
          detail::max_pool_2x2(g, plane, o);
          continue;
        }
        if (g.max && !detail::has_nan(plane, g.h * g.w)) {
          detail::max_pool_plane(g, plane, o);
          continue;
        }
        for (int64_t i = 0; i < g.oh; ++i)
          for (int64_t j = 0; j < g.ow; ++j) {
            T v = T(0);  // NOTE: a window wholly in the padding (ceil_mode) gives 0
            if (g.max) {
              v = detail::pool_max(g, plane, i, j);
            } else {
              int64_t r0 = g.rows_lo(i), r1 = g.rows_hi(i), q0 = g.cols_lo(j), q1 = g.cols_hi(j);
              T sum = T(0);
              for (int64_t r = r0; r < r1; ++r)
                for (int64_t q = q0; q < q1; ++q) sum += plane[r * g.w + q];
              int64_t div = g.divisor(std::max<int64_t>(r1 - r0, 0), std::max<int64_t>(q1 - q0, 0));
              if (div > 0) v = sum / T(div);
            }
            o[i * g.ow + j] = v;
          }
      }
    });
  });
}

inline void Pool2d::eval_grad_cpu(KernelContext& c, const Attrs& a) {
  if (!c.has_out(x_grad)) return;
  const LoDTensor& xt = c.in(x);
  const LoDTensor& dout = c.in(out_grad);
  const detail::PoolGeom g = detail::pool_geom(c, a, xt.shape());
  c.check(dout.shape() == Shape{xt.dim(0), xt.dim(1), g.oh, g.ow}, "Out@GRAD is {}, expected [{}, {}, {}, {}]", dout.shape(), xt.dim(0), xt.dim(1), g.oh,
          g.ow);
  c.dispatch_float([&](auto tag) {
    using T = typename decltype(tag)::type;
    LoDTensor& dx = c.out(x_grad);
    dx.resize(xt.shape(), xt.dtype());
    const T* xp = xt.data<T>();
    const T* dop = dout.data<T>();
    T* dxp = dx.data<T>();
    const bool fast = detail::is_max_2x2(g);
    parallel_for(0, g.planes, detail::pool_grain(g), [&](int64_t lo, int64_t hi) {
      for (int64_t pl = lo; pl < hi; ++pl) {
        const T* plane = xp + pl * g.h * g.w;
        const T* d = dop + pl * g.oh * g.ow;
        T* dxl = dxp + pl * g.h * g.w;
        if (fast) {
          detail::max_pool_2x2_grad(g, plane, d, dxl);
          continue;
        }
        std::fill(dxl, dxl + g.h * g.w, T(0));
        for (int64_t i = 0; i < g.oh; ++i)
          for (int64_t j = 0; j < g.ow; ++j) {
            const T dv = d[i * g.ow + j];
            if (g.max) {
              int64_t at = detail::pool_argmax(g, plane, i, j, detail::pool_max(g, plane, i, j));
              if (at >= 0) dxl[at] += dv;
            } else {
              int64_t r0 = g.rows_lo(i), r1 = g.rows_hi(i), q0 = g.cols_lo(j), q1 = g.cols_hi(j);
              int64_t div = g.divisor(std::max<int64_t>(r1 - r0, 0), std::max<int64_t>(q1 - q0, 0));
              if (div <= 0) continue;
              const T share = dv / T(div);
              for (int64_t r = r0; r < r1; ++r)
                for (int64_t q = q0; q < q1; ++q) dxl[r * g.w + q] += share;
            }
          }
      }
    });
    dx.set_lod(xt.lod());
  });
}

}  // namespace oar::ops
