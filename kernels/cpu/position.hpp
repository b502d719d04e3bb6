// kernels/cpu/position.hpp: add_position_encoding and rotary_position_embedding (and their gradients) on the
// CPU. Both need each row's position in its sequence: its index t in a dense batch, its row within its LoD
// sequence otherwise.
#pragma once
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/common/position.hpp"
#include "oar/device/kernel_context.hpp"
#include "oar/device/thread_pool.hpp"
#include "oar/ops/position.hpp"

namespace oar::cpu_kernels::position {

using namespace kernels::position;

/// Rotates each pair of `d` features of rows `rows` (each repeated `heads` times) by +angle or -angle. The cosines
/// and sines are taken once per distinct position (a table over the positions' range when it is no wider than
/// the rows, else once per row), not once per head and row: libm's sin and cos cost far more than the rotation.
template <class T>
void rotate(const T* x, T* y, const std::vector<int64_t>& pos, int64_t heads, int64_t d, double base, int64_t offset, double sign, bool time_inner_heads) {
  const int64_t half = d / 2, n = int64_t(pos.size());
  if (n == 0 || half == 0) return;
  std::vector<double> freq(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i) freq[size_t(i)] = std::pow(base, -2.0 * double(i) / double(d));
  auto fill = [&](int64_t p, T* cs, T* sn) {
    for (int64_t i = 0; i < half; ++i) {
      const double a = double(p + offset) * freq[size_t(i)];
      cs[i] = T(std::cos(a));
      sn[i] = T(sign * std::sin(a));
    }
  };
  const auto [lo_it, hi_it] = std::minmax_element(pos.begin(), pos.end());
  const int64_t first = *lo_it, span = *hi_it - *lo_it + 1;
  const bool table = span <= n;
  std::vector<T> cos_t, sin_t;
  if (table) {
    cos_t.resize(size_t(span * half));
    sin_t.resize(size_t(span * half));
    for (int64_t p = 0; p < span; ++p) fill(first + p, cos_t.data() + p * half, sin_t.data() + p * half);
  }
  const int64_t reps = time_inner_heads ? heads : 1;  // LoD: [N, H, d], the heads of a row together; dense: [B, H, T, d], rows are (b, h, t)
  parallel_for(0, n, std::max<int64_t>(1, 4096 / std::max<int64_t>(reps * d, 1)), [&](int64_t lo, int64_t hi) {
    std::vector<T> own_c(table ? 0 : size_t(half)), own_s(table ? 0 : size_t(half));
    for (int64_t r = lo; r < hi; ++r) {
      const T *cs = nullptr, *sn = nullptr;
      if (table) {
        cs = cos_t.data() + (pos[size_t(r)] - first) * half;
        sn = sin_t.data() + (pos[size_t(r)] - first) * half;
      } else {
        fill(pos[size_t(r)], own_c.data(), own_s.data());
        cs = own_c.data();
        sn = own_s.data();
      }
      for (int64_t h = 0; h < reps; ++h) {
        const int64_t at = (r * reps + h) * d;
        for (int64_t i = 0; i < half; ++i) {
          const T u = x[at + 2 * i], v = x[at + 2 * i + 1];
          y[at + 2 * i] = u * cs[i] - v * sn[i];
          y[at + 2 * i + 1] = u * sn[i] + v * cs[i];
        }
      }
    }
  });
}

}  // namespace oar::cpu_kernels::position

namespace oar::ops {

inline void AddPositionEncoding::eval_cpu(KernelContext& c, const Attrs& a) {
  const LoDTensor& xt = c.in(x);
  LoDTensor& ot = c.out(out);
  const auto [D, pos] = cpu_kernels::position::encoding_layout(c, xt, ot);
  const int64_t half = D / 2;
  std::vector<double> freq(static_cast<size_t>(half));
  for (int64_t k = 0; k < half; ++k) freq[size_t(k)] = std::pow(10000.0, -double(k) / double(half));
  c.dispatch(type_list<float, double>{}, xt.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* px = xt.data<T>();
    T* po = ot.data<T>();
    const T al = T(a.alpha), be = T(a.beta);
    parallel_for(0, int64_t(pos.size()), std::max<int64_t>(1, 4096 / std::max<int64_t>(D, 1)), [&](int64_t lo, int64_t hi) {
      for (int64_t r = lo; r < hi; ++r) {
        const double p = double(pos[size_t(r)]);
        for (int64_t k = 0; k < half; ++k) {
          const double w = p * freq[size_t(k)];
          po[r * D + k] = al * px[r * D + k] + be * T(std::sin(w));
          po[r * D + half + k] = al * px[r * D + half + k] + be * T(std::cos(w));
        }
      }
    });
  });
}

inline void AddPositionEncoding::eval_grad_cpu(KernelContext& c, const Attrs& a) {
  const LoDTensor& g = c.in(out_grad);
  LoDTensor& gx = c.out(x_grad);
  gx.resize(g.shape(), g.dtype());
  gx.set_lod(g.lod());
  c.dispatch(type_list<float, double>{}, g.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* pg = g.data<T>();
    T* px = gx.data<T>();
    const T al = T(a.alpha);
    for (int64_t i = 0; i < g.numel(); ++i) px[i] = al * pg[i];
  });
}

namespace detail {
inline void rotary(KernelContext& c, const RotaryPositionEmbedding::Attrs& a, const LoDTensor& pos_of, const LoDTensor& in, LoDTensor& o, double sign) {
  const cpu_kernels::position::RotaryLayout l = cpu_kernels::position::rotary_layout(c, pos_of, in, o);
  c.dispatch(type_list<float, double>{}, in.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    cpu_kernels::position::rotate(in.data<T>(), o.data<T>(), l.pos, l.heads, l.d, double(a.base), int64_t(a.offset), sign, !l.dense);
  });
}
}  // namespace detail

inline void RotaryPositionEmbedding::eval_cpu(KernelContext& c, const Attrs& a) { detail::rotary(c, a, c.in(x), c.in(x), c.out(out), 1.0); }

inline void RotaryPositionEmbedding::eval_grad_cpu(KernelContext& c, const Attrs& a) {
  detail::rotary(c, a, c.in(x), c.in(out_grad), c.out(x_grad), -1.0);
}

}  // namespace oar::ops
