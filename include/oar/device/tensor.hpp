// oar/device/tensor.hpp: Tensor (dtype, shape, place, shared 64-byte aligned storage, views), LoDTensor
// (Tensor + offset-form LoD) and SelectedRows (sparse rows, for embedding gradients).
#pragma once
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <span>
#include <vector>

#include "oar/core/dtype.hpp"
#include "oar/core/place.hpp"
#include "oar/core/shape.hpp"
#include "oar/device/allocator.hpp"
#include "oar/device/cuda.hpp"

namespace oar {

/// A block of 64-byte aligned memory on one place, from that place's allocator. Tensors share it through
/// shared_ptr.
class Storage {
 public:
  Storage(size_t bytes, Place place) : bytes_(bytes), place_(place), alloc_(&allocator(place)) { data_ = alloc_->allocate(bytes); }
  ~Storage() { alloc_->deallocate(data_, bytes_); }
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  const Place& place() const { return place_; }

 private:
  void* data_ = nullptr;
  size_t bytes_;
  Place place_;
  Allocator* alloc_;
};

namespace detail {
/// Copies `bytes` from `src` on `sp` to `dst` on `dp`.
inline void copy_bytes(void* dst, Place dp, const void* src, Place sp, size_t bytes) {
  if (!bytes) return;
  if (dp.is_cpu() && sp.is_cpu()) std::memmove(dst, src, bytes);
  else cuda_copy(dst, dp, src, sp, bytes);
}
}  // namespace detail

/// A dense tensor. Copies share storage (like a shared_ptr); `clone()` copies the data.
class Tensor {
 public:
  Tensor() = default;
  Tensor(Shape shape, DType dtype, Place place = {}) { resize(std::move(shape), dtype, place); }

  /// A tensor holding a copy of `values` with `shape` (default: 1-D).
  template <class T>
  static Tensor from(std::span<const T> values, Shape shape = {}) {
    if (shape.empty() && values.size() != 1) shape = Shape{int64_t(values.size())};
    OAR_CHECK(shape.known() && size_t(shape.numel()) == values.size(), "Tensor::from: {} values do not fill shape {}", values.size(), shape.str());
    Tensor t(shape, dtype_of<T>);
    if (!values.empty()) std::memcpy(t.raw(), values.data(), values.size() * sizeof(T));
    return t;
  }
  template <class T>
  static Tensor from(const std::vector<T>& values, Shape shape = {}) { return from(std::span<const T>(values), std::move(shape)); }
  template <class T>
  static Tensor from(std::initializer_list<T> values, Shape shape = {}) { return from(std::span<const T>(values.begin(), values.size()), std::move(shape)); }

  bool initialized() const { return storage_ != nullptr; }
  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int rank() const { return shape_.rank(); }
  int64_t dim(int i) const { return shape_.at(i); }
  int64_t numel() const { return shape_.empty() ? (initialized() ? 1 : 0) : shape_.numel(); }
  size_t bytes() const { return size_t(numel()) * size_of(dtype_); }
  /// Where the storage lives, or will be allocated by the next resize.
  Place place() const { return place_; }
  /// Moves the (uninitialized) tensor to `place`: storage elsewhere is let go, the next resize allocates there.
  void set_place(Place place) {
    if (place == place_) return;
    if (storage_ && storage_->place() != place) release_storage();
    place_ = place;
  }
  const std::shared_ptr<Storage>& storage() const { return storage_; }
  size_t offset() const { return offset_; }

  /// Makes this tensor `shape` x `dtype`. Reuses the storage when it is large enough and not shared with
  /// another tensor, so a repeated run with the same shapes allocates nothing.
  Tensor& resize(const Shape& shape, DType dtype, Place place) {
    place_ = place;
    return resize(shape, dtype);
  }
  /// The same on the tensor's place.
  Tensor& resize(const Shape& shape, DType dtype) {
    reserve(shape, dtype, place_);
    if (shape_ != shape) shape_ = shape;  // copy-assign keeps shape_'s buffer: no allocation in steady state
    dtype_ = dtype;
    return *this;
  }
  Tensor& resize(const Shape& shape) { return resize(shape, dtype_); }
  /// Like resize, but always keeps the current dtype and reuses shared storage too (for in-place kernels).
  void set_shape(Shape shape) {
    OAR_CHECK(size_t(shape.numel()) * size_of(dtype_) + offset_ <= (storage_ ? storage_->bytes() : 0), "set_shape {} exceeds storage", shape.str());
    shape_ = std::move(shape);
  }

  /// Gives up the storage (the tensor keeps its shape but is no longer initialized); for the executor's
  /// buffer recycling.
  std::shared_ptr<Storage> release_storage() {
    offset_ = 0;
    return std::move(storage_);
  }
  /// Takes `s` as the storage the next resize may reuse.
  void adopt_storage(std::shared_ptr<Storage> s) {
    place_ = s->place();
    storage_ = std::move(s);
    offset_ = 0;
  }

  void* raw() const { return storage_ ? static_cast<char*>(storage_->data()) + offset_ : nullptr; }
  /// Typed pointer; oar::Error when T is not the tensor's dtype.
  template <class T>
  T* data() const {
    if (dtype_of<T> != dtype_) [[unlikely]]
      throw Error(fmt::format("tensor holds {}, not {}", name(dtype_), name(dtype_of<T>)));
    return static_cast<T*>(raw());
  }
  template <class T> std::span<T> span() const { return {data<T>(), size_t(numel())}; }
  template <class T> std::vector<T> to_vector() const {
    auto s = span<T>();
    return {s.begin(), s.end()};
  }
  /// Element `i` of the flattened tensor converted to double (for tests and printing).
  double get(int64_t i) const {
    if (!place().is_cpu()) [[unlikely]]
      throw Error(fmt::format("get(): the tensor lives on {}; copy it to the CPU first (to(oar::cpu()))", place().str()));
    return visit_dtype(dtype_, [&](auto tag) -> double {
      using T = typename decltype(tag)::type;
      if constexpr (std::is_arithmetic_v<T>) return double(static_cast<const T*>(raw())[i]);
      else throw Error(fmt::format("get() is not available for {}", name(dtype_)));
    });
  }

  /// The same storage seen with another shape of the same numel (no copy).
  Tensor view(Shape shape) const {
    OAR_CHECK(shape.numel() == numel(), "view: shape {} has {} elements, the tensor {} has {}", shape.str(), shape.numel(), shape_.str(), numel());
    Tensor t = *this;
    t.shape_ = std::move(shape);
    return t;
  }
  /// Rows [begin, end) along dim 0 (no copy).
  Tensor slice(int64_t begin, int64_t end) const {
    OAR_CHECK(rank() > 0 && begin >= 0 && begin <= end && end <= shape_[0], "slice [{}, {}) out of range for shape {}", begin, end, shape_.str());
    Tensor t = *this;
    int64_t row = shape_.numel(1, rank());
    t.offset_ += size_t(begin * row) * size_of(dtype_);
    t.shape_[0] = end - begin;
    return t;
  }
  /// A deep copy with its own storage on the same place.
  Tensor clone() const { return to(place(), true); }
  /// This tensor on `place`: itself (shared storage) when it is there already, unless `copy`; else a copy.
  Tensor to(Place place, bool copy = false) const {
    if (!initialized() || (place == this->place() && !copy)) return *this;
    Tensor t;
    t.resize(shape_, dtype_, place);
    detail::copy_bytes(t.raw(), place, raw(), this->place(), bytes());
    return t;
  }
  /// Copies `src`'s shape, dtype and data into this tensor's own storage (reused when large enough), on
  /// this tensor's place if it has storage, else on src's.
  void copy_from(const Tensor& src) {
    if (src.raw() == raw() && src.shape_ == shape_) return;
    const Place dst = initialized() ? place() : src.place();
    resize(src.shape_, src.dtype_, dst);
    detail::copy_bytes(raw(), dst, src.raw(), src.place(), src.bytes());
  }
  /// Shares `src`'s storage (no copy).
  void share_from(const Tensor& src) { *this = src; }

 private:
  /// Makes the storage hold `shape` x `dtype` on `place`, reusing it when it is ours alone and large enough.
  void reserve(const Shape& shape, DType dtype, Place place) {
    if (!shape.known()) [[unlikely]]
      throw Error(fmt::format("cannot allocate a tensor of unknown shape {}", shape.str()));
    size_t need = size_t(shape.numel()) * size_of(dtype);
    bool reuse = storage_ && storage_.use_count() == 1 && storage_->place() == place && offset_ + need <= storage_->bytes();
    if (!reuse) {
      storage_ = std::make_shared<Storage>(need, place);
      offset_ = 0;
    }
  }
  std::shared_ptr<Storage> storage_;
  size_t offset_ = 0;
  Shape shape_;
  DType dtype_ = DType::f32;
  Place place_;
};

/// Level-of-detail information: offsets per level; level i indexes level i+1, the last level indexes rows.
using LoD = std::vector<std::vector<size_t>>;

/// Checks that every level starts at 0 and increases, that each level ends at the size of the next one,
/// and that the last level ends at `rows`. Returns "" or the reason.
inline std::string lod_error(const LoD& lod, int64_t rows) {
  for (size_t l = 0; l < lod.size(); ++l) {
    const auto& lv = lod[l];
    if (lv.size() < 1 || lv[0] != 0) return fmt::format("level {} must start at 0", l);
    for (size_t i = 1; i < lv.size(); ++i)
      if (lv[i] < lv[i - 1]) return fmt::format("level {} decreases at position {}", l, i);
    size_t next = l + 1 < lod.size() ? lod[l + 1].size() - 1 : size_t(rows);
    if (lv.back() != next) return fmt::format("level {} ends at {} but {} {} follow", l, lv.back(), next, l + 1 < lod.size() ? "entries" : "rows");
  }
  return {};
}

/// A tensor with sequence structure (LoD) over its first dimension.
class LoDTensor : public Tensor {
 public:
  LoDTensor() = default;
  LoDTensor(Tensor t, LoD lod = {}) : Tensor(std::move(t)) { set_lod(std::move(lod)); }
  const LoD& lod() const { return lod_; }
  /// Sets the LoD, checking it against the tensor's rows.
  void set_lod(const LoD& lod) {
    if (lod.empty() && lod_.empty()) return;  // the common case: no sequences, nothing to copy
    check_lod(lod);
    lod_ = lod;
  }
  void set_lod(LoD&& lod) {
    check_lod(lod);
    lod_ = std::move(lod);
  }
  void clear_lod() { lod_.clear(); }
  int lod_level() const { return int(lod_.size()); }

 private:
  void check_lod(const LoD& lod) const {
    if (lod.empty()) return;
    std::string why = lod_error(lod, rank() > 0 ? dim(0) : 0);
    OAR_CHECK(why.empty(), "invalid LoD: {}", why);
  }
  LoD lod_;
};

/// Sparse rows of a [height, ...] tensor: value[i] is row rows[i]. Rows may repeat (they add up).
struct SelectedRows {
  std::vector<int64_t> rows;
  int64_t height = 0;
  Tensor value;
};

}  // namespace oar
