// kernels/cpu/pool2d.hpp: pool2d and pool2d_grad on the CPU, one (n, c) plane at a time over the thread pool.
#pragma once
#include <algorithm>
#include <limits>

#include "oar/ops/pool2d.hpp"
#include "oar/runtime/kernel_context.hpp"
#include "oar/runtime/thread_pool.hpp"

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

inline PoolGeom pool_geom(const KernelContext& c, const Shape& x) {
  c.check(x.rank() == 4, "X must be [N, C, H, W], got {}", x.str());
  c.check(!c.attr<bool>("adaptive"), "adaptive pooling is not supported");
  auto k = c.attr<std::vector<int32_t>>("ksize");
  auto s = c.attr<std::vector<int32_t>>("strides");
  auto p = c.attr<std::vector<int32_t>>("paddings");
  PoolGeom g;
  g.planes = x[0] * x[1], g.h = x[2], g.w = x[3];
  g.max = c.attr<std::string>("pooling_type") == "max";
  g.exclusive = c.attr<bool>("exclusive");
  if (c.attr<bool>("global_pooling")) {
    g.kh = g.h, g.kw = g.w, g.oh = 1, g.ow = 1;
    return g;
  }
  g.kh = k[0], g.kw = k[1], g.sh = s[0], g.sw = s[1], g.ph = p[0], g.pw = p[1];
  bool ceil_mode = c.attr<bool>("ceil_mode");
  g.oh = Pool2d::out_size(g.h, g.kh, g.ph, g.sh, ceil_mode);
  g.ow = Pool2d::out_size(g.w, g.kw, g.pw, g.sw, ceil_mode);
  c.check(g.oh > 0 && g.ow > 0, "output size [{}, {}] <= 0 for X {}", g.oh, g.ow, x.str());
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

/// Planes per parallel chunk: enough window work to pay for a hand-off.
inline int64_t pool_grain(const PoolGeom& g) { return std::max<int64_t>(1, (int64_t{1} << 15) / std::max<int64_t>(1, g.oh * g.ow * g.kh * g.kw)); }

}  // namespace detail

inline void Pool2d::eval_cpu(KernelContext& c) {
  const LoDTensor& x = c.in("X");
  LoDTensor& out = c.out("Out");
  const detail::PoolGeom g = detail::pool_geom(c, x.shape());
  c.dispatch_float([&](auto tag) {
    using T = typename decltype(tag)::type;
    out.resize({x.dim(0), x.dim(1), g.oh, g.ow}, x.dtype());
    const T* xp = x.data<T>();
    T* op = out.data<T>();
    parallel_for(0, g.planes, detail::pool_grain(g), [&](int64_t lo, int64_t hi) {
      for (int64_t pl = lo; pl < hi; ++pl) {
        const T* plane = xp + pl * g.h * g.w;
        T* o = op + pl * g.oh * g.ow;
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

inline void Pool2d::eval_grad_cpu(KernelContext& c) {
  if (!c.has_out("X@GRAD")) return;
  const LoDTensor& x = c.in("X");
  const LoDTensor& dout = c.in("Out@GRAD");
  const detail::PoolGeom g = detail::pool_geom(c, x.shape());
  c.check(dout.shape() == Shape{x.dim(0), x.dim(1), g.oh, g.ow}, "Out@GRAD is {}, expected [{}, {}, {}, {}]", dout.shape().str(), x.dim(0), x.dim(1), g.oh,
          g.ow);
  c.dispatch_float([&](auto tag) {
    using T = typename decltype(tag)::type;
    LoDTensor& dx = c.out("X@GRAD");
    dx.resize(x.shape(), x.dtype());
    const T* xp = x.data<T>();
    const T* dop = dout.data<T>();
    T* dxp = dx.data<T>();
    parallel_for(0, g.planes, detail::pool_grain(g), [&](int64_t lo, int64_t hi) {
      for (int64_t pl = lo; pl < hi; ++pl) {
        const T* plane = xp + pl * g.h * g.w;
        const T* d = dop + pl * g.oh * g.ow;
        T* dxl = dxp + pl * g.h * g.w;
        std::fill(dxl, dxl + g.h * g.w, T(0));
        for (int64_t i = 0; i < g.oh; ++i)
          for (int64_t j = 0; j < g.ow; ++j) {
            const T dv = d[i * g.ow + j];
            if (g.max) {
              int64_t a = detail::pool_argmax(g, plane, i, j, detail::pool_max(g, plane, i, j));
              if (a >= 0) dxl[a] += dv;
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
    dx.set_lod(x.lod());
  });
}

}  // namespace oar::ops
