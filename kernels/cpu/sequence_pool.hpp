// kernels/cpu/sequence_pool.hpp: sequence_pool and its grad on the CPU, one sequence per task. The LoD helpers
// every sequence kernel shares (checked last level, scratch LoD) are kernels/common/sequence_pool.hpp's.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstring>
#include <span>

#include "kernels/common/sequence_pool.hpp"
#include "oar/device/kernel_context.hpp"
#include "oar/device/thread_pool.hpp"
#include "oar/ops/sequence_pool.hpp"

namespace oar::cpu_kernels {

/// Sequences per parallel_for chunk so that a chunk covers about 32K elements.
inline int64_t seq_grain(int64_t elems, int64_t seqs) { return std::max<int64_t>(1, (int64_t(1) << 15) / std::max<int64_t>(elems / std::max<int64_t>(seqs, 1), 1)); }

}  // namespace oar::cpu_kernels

namespace oar::ops {

inline void SequencePool::eval_cpu(KernelContext& c, const Attrs& a) {
  const LoDTensor& xt = c.in(x);
  const kernels::PoolPlan plan = kernels::pool_plan(c, a);
  const std::span<const size_t> seq = plan.seq;
  const int64_t S = plan.S, D = plan.D;
  LoDTensor& ot = *plan.out;
  const PoolType pt = a.pooltype;
  c.dispatch(type_list<float, double>{}, xt.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* px = xt.data<T>();
    T* po = ot.data<T>();
    int32_t* pi = plan.max_index;
    parallel_for(0, S, cpu_kernels::seq_grain(xt.numel(), S), [&](int64_t lo, int64_t hi) {
      for (int64_t s = lo; s < hi; ++s) {
        const int64_t b = int64_t(seq[size_t(s)]), e = int64_t(seq[size_t(s) + 1]), len = e - b;
        T* o = po + s * D;
        int32_t* idx = pi ? pi + s * D : nullptr;
        if (len == 0) {
          std::fill(o, o + D, T(0));
          if (idx) std::fill(idx, idx + D, -1);
          continue;
        }
        switch (pt) {
          case PoolType::first: std::copy(px + b * D, px + (b + 1) * D, o); break;
          case PoolType::last: std::copy(px + (e - 1) * D, px + e * D, o); break;
          case PoolType::max:
            std::copy(px + b * D, px + (b + 1) * D, o);
            if (idx) std::fill(idx, idx + D, int32_t(b));
            for (int64_t r = b + 1; r < e; ++r) {
              const T* row = px + r * D;
              for (int64_t d = 0; d < D; ++d)
                if (row[d] > o[d]) {
                  o[d] = row[d];
                  if (idx) idx[d] = int32_t(r);
                }
            }
            break;
          case PoolType::average:
          case PoolType::sum:
          case PoolType::sqrt: {
            std::copy(px + b * D, px + (b + 1) * D, o);
            for (int64_t r = b + 1; r < e; ++r) {
              const T* row = px + r * D;
              for (int64_t d = 0; d < D; ++d) o[d] += row[d];
            }
            // NOTE: a division (here and in the grad), not a product with 1 / len: s * (1 / 3) and s / 3 can
            // differ in the last bit, and a mean should be the sum over the count.
            if (pt != PoolType::sum) {
              const T div = pt == PoolType::average ? T(len) : std::sqrt(T(len));
              for (int64_t d = 0; d < D; ++d) o[d] /= div;
            }
            break;
          }
        }
      }
    });
  });
  ot.set_lod(kernels::seq_upper_levels(xt.lod()));
}

/// X@GRAD: AVERAGE / SUM / SQRT spread dout[s] (scaled by 1 / len, 1, 1 / sqrt(len)) over the sequence's rows;
/// MAX gives it to the rows MaxIndex names, LAST / FIRST to that row; the rest (and empty sequences) get 0.
inline void SequencePool::eval_grad_cpu(KernelContext& c, const Attrs& a) {
  if (!c.has_out(x_grad)) return;
  const LoDTensor& xt = c.in(x);
  const LoDTensor& dout = c.in(out_grad);
  const kernels::PoolGradPlan plan = kernels::pool_grad_plan(c, a);
  const std::span<const size_t> seq = plan.seq;
  const int64_t S = plan.S, D = plan.D;
  const PoolType pt = a.pooltype;
  if (plan.max_index) kernels::check_max_index(c, plan, plan.max_index->data<int32_t>());
  const int32_t* pi = plan.max_index ? plan.max_index->data<int32_t>() : nullptr;
  LoDTensor& dx = *plan.x_grad;
  c.dispatch(type_list<float, double>{}, xt.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* pg = dout.data<T>();
    T* pd = dx.data<T>();
    parallel_for(0, S, cpu_kernels::seq_grain(xt.numel(), S), [&](int64_t lo, int64_t hi) {
      for (int64_t s = lo; s < hi; ++s) {
        const int64_t b = int64_t(seq[size_t(s)]), e = int64_t(seq[size_t(s) + 1]), len = e - b;
        const T* g = pg + s * D;
        if (len == 0) continue;
        switch (pt) {
          case PoolType::average:
          case PoolType::sum:
          case PoolType::sqrt: {
            const T div = pt == PoolType::sum ? T(1) : pt == PoolType::average ? T(len) : std::sqrt(T(len));
            for (int64_t r = b; r < e; ++r)
              for (int64_t d = 0; d < D; ++d) pd[r * D + d] = g[d] / div;
            break;
          }
          case PoolType::first:
          case PoolType::last: {
            std::fill(pd + b * D, pd + e * D, T(0));
            const int64_t r = pt == PoolType::first ? b : e - 1;
            std::copy(g, g + D, pd + r * D);
            break;
          }
          case PoolType::max: {
            std::fill(pd + b * D, pd + e * D, T(0));
            const int32_t* idx = pi + s * D;  // checked above
            for (int64_t d = 0; d < D; ++d) pd[idx[d] * D + d] = g[d];
            break;
          }
        }
      }
    });
  });
  dx.set_lod(xt.lod());
}

}  // namespace oar::ops
