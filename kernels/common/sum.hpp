// kernels/common/sum.hpp: what sum's kernels on every place share: the checks of the inputs against X[0], and
// the sum of tensor arrays, entry by entry, added where the entries live.
#pragma once
#include <algorithm>
#include <cstddef>
#include <vector>

#include "kernels/common/tensor_array.hpp"
#include "oar/ops/sum.hpp"
#include "oar/device/cuda.hpp"
#include "oar/device/kernel_context.hpp"

namespace oar::kernels::array {

/// Out[j] = the sum of the non-empty entries j of the arrays X (empty when all are); Out is as long as the
/// longest X. Out may be one of the X: the sum is built aside and moved in. Serves both places (CUDA's Sum
/// kernel calls it for arrays): the entries are added where they live.
inline void sum(KernelContext& c) {
  using S = ops::Sum;
  const size_t k = c.num_in(S::x);
  std::vector<const TensorList*> xs(k);
  size_t len = 0;
  for (size_t i = 0; i < k; ++i) {
    xs[i] = &in(c, S::x, i);
    len = std::max(len, xs[i]->size());
  }
  TensorList res(len);
  for (size_t j = 0; j < len; ++j) {
    LoDTensor& o = res[j];
    size_t first = k;
    for (size_t i = 0; i < k; ++i) {
      if (j >= xs[i]->size() || is_empty((*xs[i])[j])) continue;
      const LoDTensor& e = (*xs[i])[j];
      if (first == k) {
        first = i;
        o.set_place(c.place());
        copy(o, e);
        continue;
      }
      c.check(e.shape() == o.shape() && e.dtype() == o.dtype(), "entry {} of X[{}] ('{}') is {} {}, but that of X[{}] ('{}') is {} {}", j, i, c.in_name(S::x, i),
              name(e.dtype()), e.shape(), first, c.in_name(S::x, first), name(o.dtype()), o.shape());
      c.dispatch(type_list<float, double, int32_t, int64_t>{}, e.dtype(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        T* po = o.data<T>();
        const T* pe = e.data<T>();
        if (c.place().is_cuda()) return oar::detail::cuda_accumulate(c.cuda(), e.dtype(), po, pe, e.numel());
        for (int64_t n = 0; n < e.numel(); ++n) po[n] += pe[n];
      });
    }
  }
  out(c, S::out) = std::move(res);
}

}  // namespace oar::kernels::array

namespace oar::kernels {

/// Checks every X[i] against X[0] (shape and dtype) and returns the index of the input that Out is (summing in
/// place), or the input count when Out is none of them. The CPU and CUDA kernels both start here.
inline size_t sum_inputs(const KernelContext& c, const LoDTensor& out) {
  using S = ops::Sum;
  const size_t k = c.num_in(S::x);
  const LoDTensor& x0 = c.in(S::x, 0);
  size_t first = k;
  for (size_t i = 0; i < k; ++i) {
    const LoDTensor& xi = c.in(S::x, i);
    c.check(xi.shape() == x0.shape(), "X[{}] {} does not have the shape of X[0] {}", i, xi.shape(), x0.shape());
    c.check(xi.dtype() == x0.dtype(), "X[{}] is {} but X[0] is {}", i, name(xi.dtype()), name(x0.dtype()));
    if (&xi == &out) first = i;
  }
  return first;
}

}  // namespace oar::kernels
