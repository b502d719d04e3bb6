// oar/interop/eigen.hpp: zero-copy views between oar tensors and Eigen matrices, both ways. Optional:
// <oar/oar.hpp> does not include it, so only code that uses Eigen's types pays for them.
//
//   Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor> x(64, 784);
//   auto out = ev.forward({{"img", oar::from_eigen(x)}});   // the feed reads x's memory: no copy
//   auto probs = oar::as_eigen<float>(out[0]);              // Eigen::Map over the fetched tensor
//
// oar tensors are row-major and contiguous. A row-major matrix, a Map of one, a vector or a whole-row block
// is viewed as it is; a column-major matrix is an oar::Error naming the two ways out (view m.transpose(),
// which is row-major with the same memory, or use a RowMajor matrix), as is any other stride.
#pragma once
#include <memory>
#include <type_traits>

#include <Eigen/Core>

#include "oar/core/dtype.hpp"
#include "oar/core/error.hpp"
#include "oar/device/tensor.hpp"

namespace oar {

/// A row-major Eigen matrix of T (T const for a read-only map).
template <class T>
using EigenRowMajor = Eigen::Matrix<std::remove_const_t<T>, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
/// What as_eigen returns: an Eigen::Map over a tensor's memory.
template <class T>
using EigenTensorMap = Eigen::Map<std::conditional_t<std::is_const_v<T>, const EigenRowMajor<T>, EigenRowMajor<T>>>;

namespace detail {
/// Throws unless element (i, j) of m sits at i * cols + j: the layout an oar tensor has.
template <class Derived>
void check_eigen_layout(const Eigen::DenseBase<Derived>& m) {
  const Eigen::Index rows = m.rows(), cols = m.cols();
  // Strides in elements between rows and between columns, whichever is Eigen's inner dimension.
  const Eigen::Index rs = Derived::IsRowMajor ? m.outerStride() : m.innerStride();
  const Eigen::Index cs = Derived::IsRowMajor ? m.innerStride() : m.outerStride();
  if ((cols <= 1 || cs == 1) && (rows <= 1 || rs == cols)) return;
  if (!Derived::IsRowMajor && rs == 1 && cs == rows)
    throw Error(fmt::format("from_eigen: the {}x{} matrix is column-major, an oar tensor is row-major: view m.transpose() "
                            "(shape [{}, {}], no copy) or use Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>",
                            rows, cols, cols, rows));
  throw Error(fmt::format("from_eigen: the {}x{} matrix is not contiguous (row stride {}, column stride {}; a tensor needs {} "
                          "and 1): copy it into a RowMajor matrix first",
                          rows, cols, rs, cs, cols));
}
}  // namespace detail

/// A [rows, cols] tensor viewing `m`'s memory, no copy: writes through either are seen by the other.
///   requires: m has direct access (a Matrix, Array, Map, Ref, whole-row block or transpose of one; an
///             expression such as `a + b` does not compile), is row-major contiguous (else an oar::Error
///             naming the fix), and its Scalar is an oar dtype (float -> f32, double -> f64, int64_t -> i64...).
///   lifetime: m's memory must outlive the tensor and every copy of it (a feed is held by the executor until
///             the next run), unless `owner` is given: the tensor's storage keeps it alive.
/// A const matrix gives a tensor too; oar does not write a tensor it is fed, but the caller must not write it.
template <class Derived>
Tensor from_eigen(const Eigen::DenseBase<Derived>& m, std::shared_ptr<const void> owner = {}) {
  static_assert(bool(Eigen::internal::traits<Derived>::Flags & Eigen::DirectAccessBit),
                "from_eigen: the expression has no memory to view; evaluate it into a RowMajor matrix first");
  using Scalar = typename Derived::Scalar;
  static_assert(requires { dtype_traits<Scalar>::value; }, "from_eigen: the Scalar type has no oar dtype");
  detail::check_eigen_layout(m);
  const auto& d = m.derived();
  auto* data = const_cast<Scalar*>(static_cast<const Scalar*>(d.data()));
  return Tensor::borrow(data, Shape{int64_t(m.rows()), int64_t(m.cols())}, dtype_of<Scalar>, cpu(), std::move(owner));
}
/// The same for a temporary Map, Ref, block or transpose (it does not own the memory it views); a temporary
/// Matrix would die with the statement, so it does not compile.
template <class Derived>
Tensor from_eigen(Eigen::DenseBase<Derived>&& m, std::shared_ptr<const void> owner = {}) {
  static_assert(!std::is_base_of_v<Eigen::PlainObjectBase<Derived>, Derived>,
                "from_eigen: a temporary matrix dies at the end of the statement; view a named one");
  return from_eigen(static_cast<const Eigen::DenseBase<Derived>&>(m), std::move(owner));
}

/// An Eigen::Map over `t`'s memory (on the CPU), no copy: rank 2 as [d0, d1], rank 1 as a column [n, 1],
/// rank 0 as 1x1, and a higher rank as [d0, d1 * d2 * ...] (rows = dim 0, as fc flattens).
///   requires: t holds T (else an oar::Error naming both dtypes) and lives on the CPU.
///   lifetime: the map is valid while t, or a copy sharing its storage, is; a tensor fetched from an
///             Evaluator is the caller's own (the next forward does not overwrite it).
template <class T>
EigenTensorMap<T> as_eigen(const Tensor& t) {
  using U = std::remove_const_t<T>;
  static_assert(requires { dtype_traits<U>::value; }, "as_eigen: T has no oar dtype");
  if (!t.initialized()) throw Error("as_eigen: the tensor is empty (it holds no values yet)");
  if (t.dtype() != dtype_of<U>)
    throw Error(fmt::format("as_eigen: the tensor holds {}, the map was asked for {}; use as_eigen<> of the tensor's type or "
                            "convert it first", name(t.dtype()), name(dtype_of<U>)));
  if (!t.place().is_cpu())
    throw Error(fmt::format("as_eigen: the tensor lives on {}; copy it to the CPU first (to(oar::cpu()))", t.place().str()));
  const Eigen::Index rows = t.rank() == 0 ? 1 : Eigen::Index(t.dim(0));
  const Eigen::Index cols = t.rank() <= 1 ? 1 : Eigen::Index(t.shape().numel(1, t.rank()));
  return EigenTensorMap<T>(static_cast<T*>(t.raw()), rows, cols);
}

}  // namespace oar
