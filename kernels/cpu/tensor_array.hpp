// kernels/cpu/tensor_array.hpp: write_to_array, read_from_array (and their gradients) and lod_array_length on the
// CPU and, the same code, on CUDA (the ops are `any_place`: entries are copied on the place, the index is read
// on the host), with the helpers every array kernel uses (the array values of a slot, the index I, empty entries).
#pragma once
#include <cstring>

#include "kernels/common/tensor_array.hpp"
#include "kernels/cpu/place_io.hpp"
#include "oar/device/kernel_context.hpp"
#include "oar/ops/tensor_array.hpp"

namespace oar::cpu_kernels::array {

using namespace kernels::array;

}  // namespace oar::cpu_kernels::array

namespace oar::ops {

/// requires: Out is an array (or holds nothing yet). ensures: Out[i] is a copy of X; entries before i that did
/// not exist are empty; the other entries are untouched.
inline void WriteToArray::eval_cpu(KernelContext& c, const NoAttrs&) {
  const LoDTensor& xt = c.in(x);
  const int64_t at = cpu_kernels::array::index(c, i);
  auto& list = cpu_kernels::array::out(c, out);
  if (int64_t(list.size()) <= at) list.resize(size_t(at + 1));
  cpu_kernels::array::copy(list[size_t(at)], xt);
}

/// X@GRAD = Out@GRAD[i], or zeros shaped like X when that entry is missing or empty.
inline void WriteToArray::eval_grad_cpu(KernelContext& c, const NoAttrs&) {
  if (!c.has_out(x_grad)) return;
  const LoDTensor& xt = c.in(x);
  const int64_t at = cpu_kernels::array::index(c, i);
  LoDTensor& dx = c.out(x_grad);
  const LoDTensor* g = nullptr;
  if (c.has_in(out_grad)) {
    const auto& grads = cpu_kernels::array::in(c, out_grad);
    if (at < int64_t(grads.size()) && !cpu_kernels::array::is_empty(grads[size_t(at)])) g = &grads[size_t(at)];
  }
  if (g) {
    c.check(g->shape() == xt.shape() && g->dtype() == xt.dtype(), "entry {} of Out@GRAD ('{}') is {} {}, but X ('{}') is {} {}", at, c.in_name(out_grad),
            name(g->dtype()), g->shape(), c.in_name(x), name(xt.dtype()), xt.shape());
    dx.copy_from(*g);
  } else {
    cpu_kernels::array::zeros(c, dx, xt.shape(), xt.dtype());
  }
  dx.set_lod(xt.lod());
}

inline void ReadFromArray::eval_cpu(KernelContext& c, const NoAttrs&) {
  const auto& list = cpu_kernels::array::in(c, x);
  const int64_t at = cpu_kernels::array::index(c, i);
  c.check(at < int64_t(list.size()), "index {} is out of range of the array '{}' ({} entries)", at, c.in_name(x), list.size());
  const LoDTensor& e = list[size_t(at)];
  c.check(e.initialized(), "entry {} of the array '{}' was never written", at, c.in_name(x));
  cpu_kernels::array::copy(c.out(out), e);
}

/// X@GRAD: as many entries as X, entry i a copy of Out@GRAD, the others empty.
inline void ReadFromArray::eval_grad_cpu(KernelContext& c, const NoAttrs&) {
  if (!c.has_out(x_grad)) return;
  const auto& list = cpu_kernels::array::in(c, x);
  const int64_t at = cpu_kernels::array::index(c, i);
  c.check(at < int64_t(list.size()), "index {} is out of range of the array '{}' ({} entries)", at, c.in_name(x), list.size());
  const LoDTensor& g = c.in(out_grad);
  auto& dx = cpu_kernels::array::out(c, x_grad);
  dx.resize(list.size());
  for (size_t k = 0; k < dx.size(); ++k)
    if (int64_t(k) != at) dx[k] = LoDTensor();
  cpu_kernels::array::copy(dx[size_t(at)], g);
}

inline void LoDArrayLength::eval_cpu(KernelContext& c, const NoAttrs&) {
  const auto& list = cpu_kernels::array::in(c, x);
  LoDTensor& o = c.out(out);
  o.resize(Shape{1}, DType::i64);
  const int64_t n = int64_t(list.size());
  cpu_kernels::place_io::store(c, o, &n);
}

}  // namespace oar::ops
