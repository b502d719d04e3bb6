// oar/interop/xtensor.hpp: zero-copy views between oar tensors and xtensor containers, both ways. Optional:
// <oar/oar.hpp> does not include it, so only code that uses xtensor pays for it.
//
//   xt::xtensor<float, 2> x = xt::zeros<float>({64, 784});
//   auto out = ev.forward({{"img", oar::from_xtensor(x)}});   // the feed reads x's memory: no copy
//   auto probs = oar::as_xtensor<float>(out[0]);              // an xt::adapt view of the fetched tensor
//
// oar tensors are row-major and contiguous: an xarray or xtensor in the default row-major layout (or an
// xt::adapt of row-major memory) is viewed as it is; a column-major or strided one is an oar::Error.
#pragma once
#include <array>
#include <cstddef>
#include <memory>
#include <type_traits>
#include <vector>

#include <fmt/ranges.h>
#include <xtensor/xadapt.hpp>
#include <xtensor/xcontainer.hpp>

#include "oar/core/dtype.hpp"
#include "oar/core/error.hpp"
#include "oar/device/tensor.hpp"

namespace oar {

namespace detail {
/// Throws unless `e`'s strides are those of a contiguous row-major array of its shape (xtensor gives a
/// dimension of size 1 the stride 0, which is as good as any).
template <class E>
void check_xtensor_layout(const E& e) {
  const auto& shape = e.shape();
  const auto& strides = e.strides();
  std::ptrdiff_t expected = 1;
  bool ok = true;
  for (size_t i = shape.size(); i-- > 0;) {
    if (shape[i] != 1 && std::ptrdiff_t(strides[i]) != expected) ok = false;
    expected *= std::ptrdiff_t(shape[i]);
  }
  if (ok) return;
  std::vector<int64_t> sh(shape.begin(), shape.end()), st(strides.begin(), strides.end());
  if (e.layout() == xt::layout_type::column_major)
    throw Error(fmt::format("from_xtensor: the array of shape [{}] is column-major, an oar tensor is row-major: use "
                            "xt::layout_type::row_major (the default), or copy it into a row-major array",
                            fmt::join(sh, ", ")));
  throw Error(fmt::format("from_xtensor: the array of shape [{}] is not contiguous row-major (strides [{}]): copy it "
                          "into a row-major xt::xarray first",
                          fmt::join(sh, ", "), fmt::join(st, ", ")));
}
}  // namespace detail

/// A tensor of `e`'s shape viewing its memory, no copy: writes through either are seen by the other.
///   requires: e is an xtensor container (xt::xarray, xt::xtensor, xt::xtensor_fixed, an xt::adapt; a view or
///             an expression does not compile: evaluate it first), contiguous and row-major (else an oar::Error),
///             with an oar dtype as value_type (float -> f32, double -> f64, int64_t -> i64, ...).
///   lifetime: e's memory must outlive the tensor and every copy of it (a feed is held by the executor until
///             the next run), unless `owner` is given: the tensor's storage keeps it alive. Resizing e moves
///             its memory, which the tensor does not follow.
/// A const container gives a tensor too; oar does not write a tensor it is fed, but the caller must not write it.
template <class D>
Tensor from_xtensor(const xt::xcontainer<D>& e, std::shared_ptr<const void> owner = {}) {
  using T = typename D::value_type;
  static_assert(requires { dtype_traits<T>::value; }, "from_xtensor: the value_type has no oar dtype");
  const D& d = static_cast<const D&>(e);  // xcontainer is its CRTP base
  detail::check_xtensor_layout(d);
  std::vector<int64_t> dims(d.shape().begin(), d.shape().end());
  auto* data = const_cast<T*>(static_cast<const T*>(d.data()));
  return Tensor::borrow(data, Shape(std::move(dims)), dtype_of<T>, cpu(), std::move(owner));
}

namespace detail {
template <class T>
T* xtensor_data(const Tensor& t, const char* what) {
  using U = std::remove_const_t<T>;
  static_assert(requires { dtype_traits<U>::value; }, "as_xtensor: T has no oar dtype");
  if (!t.initialized()) throw Error(fmt::format("{}: the tensor is empty (it holds no values yet)", what));
  if (t.dtype() != dtype_of<U>)
    throw Error(fmt::format("{}: the tensor holds {}, the view was asked for {}; use the tensor's type or convert it first",
                            what, name(t.dtype()), name(dtype_of<U>)));
  if (!t.place().is_cpu())
    throw Error(fmt::format("{}: the tensor lives on {}; copy it to the CPU first (to(oar::cpu()))", what, t.place().str()));
  return static_cast<T*>(t.raw());
}
}  // namespace detail

/// An xt::adapt view (xarray_adaptor, any rank) of `t`'s memory on the CPU, no copy, row-major with t's shape.
///   requires: t holds T (else an oar::Error naming both dtypes) and lives on the CPU.
///   lifetime: the view is valid while t, or a copy sharing its storage, is; a tensor fetched from an
///             Evaluator is the caller's own (the next forward does not overwrite it).
template <class T>
auto as_xtensor(const Tensor& t) {
  T* p = detail::xtensor_data<T>(t, "as_xtensor");
  std::vector<size_t> shape(t.shape().begin(), t.shape().end());
  return xt::adapt(p, size_t(t.numel()), xt::no_ownership(), shape);
}
/// The same with the rank fixed (xtensor_adaptor): an oar::Error when t's rank is not N.
template <class T, size_t N>
auto as_xtensor(const Tensor& t) {
  T* p = detail::xtensor_data<T>(t, "as_xtensor");
  if (t.rank() != int(N)) throw Error(fmt::format("as_xtensor<T, {}>: the tensor has rank {} (shape {})", N, t.rank(), t.shape().str()));
  std::array<size_t, N> shape{};
  for (size_t i = 0; i < N; ++i) shape[i] = size_t(t.dim(int(i)));
  return xt::adapt(p, size_t(t.numel()), xt::no_ownership(), shape);
}

}  // namespace oar
