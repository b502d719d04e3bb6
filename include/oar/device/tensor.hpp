// oar/device/tensor.hpp: Tensor (dtype, shape, place, shared 64-byte aligned storage, views), LoDTensor
// (Tensor + offset-form LoD) and SelectedRows (sparse rows, for embedding gradients).
#pragma once
#include <cstring>
#include <memory>
#include <ostream>
#include <span>
#include <string>
#include <vector>

#include "oar/config.hpp"
#include "oar/core/dtype.hpp"
#include "oar/core/place.hpp"
#include "oar/core/shape.hpp"
#include "oar/device/allocator.hpp"

namespace oar {

/// A block of 64-byte aligned memory on one place, from that place's allocator. Tensors share it through
/// shared_ptr.
class Storage {
 public:
  Storage(size_t bytes, Place place);
  /// From a given allocator (on its place): pinned_allocator() for page-locked host memory.
  Storage(size_t bytes, Allocator& alloc);
  /// Memory oar did not allocate and never frees (Tensor::borrow); `owner`, if any, is held until the storage
  /// is gone, so it may be what keeps `data` alive.
  Storage(void* data, size_t bytes, Place place, std::shared_ptr<const void> owner)
      : data_(data), bytes_(bytes), place_(place), alloc_(nullptr), owner_(std::move(owner)) {}
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  const Place& place() const { return place_; }
  /// Whether the memory is borrowed (Tensor::borrow): then it has no allocator.
  bool borrowed() const { return alloc_ == nullptr; }
  Allocator& allocator() const { return *alloc_; }

 private:
  void* data_ = nullptr;
  size_t bytes_;
  Place place_;
  Allocator* alloc_;
  std::shared_ptr<const void> owner_;
};

namespace detail {
/// Copies `bytes` from `src` on `sp` to `dst` on `dp`.
void copy_bytes(void* dst, Place dp, const void* src, Place sp, size_t bytes);
}  // namespace detail

/// A dense tensor. Copies share storage (like a shared_ptr); `clone()` copies the data.
class Tensor {
 public:
  Tensor() = default;
  Tensor(Shape shape, DType dtype, Place place = {});

  /// A tensor holding a copy of `values` with `shape`. Without a shape, n values make a 1-D tensor [n], and
  /// one value a scalar (shape [], rank 0, e.g. a learning rate): `Tensor::from<float>({x}, {1})` is the [1] one.
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

  /// A tensor over memory oar did not allocate, without a copy (include/oar/interop/: Eigen, xtensor): `data`
  /// holds shape's values of `dtype`, contiguous and row-major, on `place`. Lifetime: the memory must outlive
  /// every tensor that shares this storage (copies, views, a feed the executor holds until the next run) unless
  /// `owner` is given, which they keep alive. Writes through the tensor reach the memory and the reverse; a
  /// resize to more bytes than `data` holds moves the tensor to storage of its own.
  static Tensor borrow(void* data, Shape shape, DType dtype, Place place = {}, std::shared_ptr<const void> owner = {});

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
  [[gnu::always_inline]] Tensor& resize(const Shape& shape, DType dtype) {
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
  [[gnu::always_inline]] T* data() const {
    if (dtype_of<T> != dtype_) [[unlikely]] fail_dtype(dtype_, dtype_of<T>);
    return static_cast<T*>(raw());
  }
  template <class T> std::span<T> span() const { return {data<T>(), size_t(numel())}; }
  template <class T> std::vector<T> to_vector() const {
    auto s = span<T>();
    return {s.begin(), s.end()};
  }
  /// Element `i` of the flattened tensor converted to double (for tests and printing).
  double get(int64_t i) const;

  /// The same storage seen with another shape of the same numel (no copy).
  Tensor view(Shape shape) const;
  /// Rows [begin, end) along dim 0 (no copy).
  Tensor slice(int64_t begin, int64_t end) const;
  /// A deep copy with its own storage on the same place.
  Tensor clone() const { return to(place(), true); }
  /// This tensor on `place`: itself (shared storage) when it is there already, unless `copy`; else a copy.
  Tensor to(Place place, bool copy = false) const;
  /// Copies `src`'s shape, dtype and data into this tensor's own storage (reused when large enough), on
  /// this tensor's place if it has storage, else on src's.
  void copy_from(const Tensor& src);
  /// Shares `src`'s storage (no copy).
  void share_from(const Tensor& src) { *this = src; }
  /// A CPU tensor in page-locked memory holding this one's values (itself when it is already): what a GPU
  /// reads by DMA, so feeding it costs the host no copy through staging buffers. Without a CUDA device, a
  /// plain copy on the CPU.
  Tensor pin_memory() const;
  /// An uninitialised CPU tensor in page-locked memory (a plain one without a CUDA device): what a device
  /// copies into by DMA.
  static Tensor page_locked(Shape shape, DType dtype);
  /// Whether the storage is page-locked host memory (pin_memory()).
  bool pinned() const;

 private:
  /// Makes the storage hold `shape` x `dtype` on `place`, reusing it when it is ours alone and large enough.
  [[gnu::always_inline]] void reserve(const Shape& shape, DType dtype, Place place) {
    const int64_t n = shape.numel();  // -1 when a dim is unknown
    if (n < 0) [[unlikely]] fail_unknown_shape(shape);
    size_t need = size_t(n) * size_of(dtype);
    bool reuse = storage_ && storage_.use_count() == 1 && storage_->place() == place && offset_ + need <= storage_->bytes();
    if (!reuse) reallocate(need, place);
  }
  /// The slow path of reserve: new storage of `bytes` on `place`.
  void reallocate(size_t bytes, Place place);
  [[noreturn]] static void fail_unknown_shape(const Shape& shape);
  [[noreturn]] static void fail_dtype(DType have, DType want);
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
std::string lod_error(const LoD& lod, int64_t rows);

/// Sequence lengths per level, the other spelling of a LoD: {{3, 1, 2}} is the LoD {{0, 3, 4, 6}}.
using Lengths = std::vector<std::vector<size_t>>;
/// Offsets from lengths, level by level.
LoD lod_from_lengths(const Lengths& lengths);
/// Lengths from offsets, level by level.
Lengths lod_lengths(const LoD& lod);

/// A tensor with sequence structure (LoD) over its first dimension: 3 sentences of 3, 1 and 2 words as
/// rows [6, dim] with the LoD {{0, 3, 4, 6}}. Level i indexes the entries of level i + 1; the last level
/// indexes rows.
class LoDTensor : public Tensor {
 public:
  LoDTensor() = default;
  /// `t` with the LoD `lod`, checked against t's rows: a bad one is an oar::Error naming the caller's line.
  LoDTensor(Tensor t, LoD lod = {}, std::source_location loc = std::source_location::current()) : Tensor(std::move(t)) {
    if (lod.empty()) return;
    try {
      set_lod(std::move(lod));
    } catch (const Error& e) {
      if (e.origin().known()) throw;
      throw Error(e.message(), Origin(loc, "LoDTensor"));
    }
  }
  /// `t` with the LoD whose sequence lengths are `lengths` (checked against t's rows).
  static LoDTensor from_lengths(Tensor t, const Lengths& lengths, std::source_location loc = std::source_location::current()) {
    return LoDTensor(std::move(t), lod_from_lengths(lengths), loc);
  }
  const LoD& lod() const { return lod_; }
  /// The LoD as lengths per level.
  Lengths lengths() const { return lod_lengths(lod_); }
  /// Sequences of the top level (0 without LoD).
  size_t num_sequences() const { return lod_.empty() ? 0 : lod_[0].size() - 1; }
  /// Top-level sequence `i` as a LoDTensor of its own (a view of its rows, no copy), its lower levels
  /// rebased to start at 0: what a reader hands out as one item.
  LoDTensor sequence(size_t i) const;
  /// Sets the LoD, checking it against the tensor's rows.
  void set_lod(const LoD& lod) {
    if (lod.empty() && lod_.empty()) [[likely]] return;  // the common case: no sequences, nothing to copy
    assign_lod(lod);
  }
  void set_lod(LoD&& lod) {
    check_lod(lod);
    lod_ = std::move(lod);
  }
  void clear_lod() { lod_.clear(); }
  int lod_level() const { return int(lod_.size()); }

 private:
  void check_lod(const LoD& lod) const;
  void assign_lod(const LoD& lod) {
    check_lod(lod);
    lod_ = lod;
  }
  LoD lod_;
};

/// A tensor as text: its type and place, then its values nested by dimension as numpy prints them, at most
/// `max_values` of them (the rest elided with "..."): `f32[2, 3] cpu\n[[1, 2, 3],\n [4, 5, 6]]`.
std::string to_string(const Tensor& t, int64_t max_values = 64);
/// The same with the LoD: its offsets and lengths per level, then the rows sequence by sequence of the last
/// level (`seq 1 (rows 3..4):`), so that a ragged batch reads as the sequences it holds.
std::string to_string(const LoDTensor& t, int64_t max_values = 64);
inline std::ostream& operator<<(std::ostream& os, const Tensor& t) { return os << to_string(t); }
inline std::ostream& operator<<(std::ostream& os, const LoDTensor& t) { return os << to_string(t); }

/// Sparse rows of a [height, ...] tensor: value[i] is row rows[i]. Rows may repeat (they add up).
struct SelectedRows {
  std::vector<int64_t> rows;
  int64_t height = 0;
  Tensor value;
};

}  // namespace oar

#if OAR_HEADER_ONLY
#include "oar/device/tensor-inl.hpp"
#endif
