// oar/device/tensor-inl.hpp: the implementation of tensor.hpp (included by it when header-only; compiled once into liboar otherwise).
#pragma once
#include "oar/device/tensor.hpp"

#include <type_traits>

#include <fmt/ranges.h>

#include "oar/device/cuda.hpp"

namespace oar {

OAR_FUNC Storage::Storage(size_t bytes, Place place) : bytes_(bytes), place_(place), alloc_(&oar::allocator(place)) { data_ = alloc_->allocate(bytes); }

OAR_FUNC Storage::Storage(size_t bytes, Allocator& alloc) : bytes_(bytes), place_(alloc.place()), alloc_(&alloc) { data_ = alloc_->allocate(bytes); }

OAR_FUNC Storage::~Storage() {
  if (alloc_) alloc_->deallocate(data_, bytes_);
}

OAR_FUNC Tensor Tensor::borrow(void* data, Shape shape, DType dtype, Place place, std::shared_ptr<const void> owner) {
  OAR_CHECK(shape.known(), "Tensor::borrow: shape {} has unknown dims", shape.str());
  const size_t bytes = size_t(shape.empty() ? 1 : shape.numel()) * size_of(dtype);
  OAR_CHECK(data != nullptr || bytes == 0, "Tensor::borrow: null data for shape {} of {}", shape.str(), name(dtype));
  Tensor t;
  t.shape_ = std::move(shape);
  t.dtype_ = dtype;
  t.place_ = place;
  t.storage_ = std::make_shared<Storage>(data, bytes, place, std::move(owner));
  return t;
}

OAR_FUNC void detail::copy_bytes(void* dst, Place dp, const void* src, Place sp, size_t bytes) {
  if (!bytes) return;
  if (dp.is_cpu() && sp.is_cpu()) std::memmove(dst, src, bytes);
  else cuda_copy(dst, dp, src, sp, bytes);
}

OAR_FUNC Tensor::Tensor(Shape shape, DType dtype, Place place) { resize(std::move(shape), dtype, place); }

OAR_FUNC double Tensor::get(int64_t i) const {
  if (!place().is_cpu()) [[unlikely]]
    throw Error(fmt::format("get(): the tensor lives on {}; copy it to the CPU first (to(oar::cpu()))", place().str()));
  return visit_dtype(dtype_, [&](auto tag) -> double {
    using T = typename decltype(tag)::type;
    return double(to_compute(static_cast<const T*>(raw())[i]));  // f16 and bf16 through their f32 value
  });
}

OAR_FUNC Tensor Tensor::view(Shape shape) const {
  OAR_CHECK(shape.numel() == numel(), "view: shape {} has {} elements, the tensor {} has {}", shape.str(), shape.numel(), shape_.str(), numel());
  Tensor t = *this;
  t.shape_ = std::move(shape);
  return t;
}

OAR_FUNC Tensor Tensor::slice(int64_t begin, int64_t end) const {
  OAR_CHECK(rank() > 0 && begin >= 0 && begin <= end && end <= shape_[0], "slice [{}, {}) out of range for shape {}", begin, end, shape_.str());
  Tensor t = *this;
  int64_t row = shape_.numel(1, rank());
  t.offset_ += size_t(begin * row) * size_of(dtype_);
  t.shape_[0] = end - begin;
  return t;
}

OAR_FUNC Tensor Tensor::to(Place place, bool copy) const {
  if (!initialized() || (place == this->place() && !copy)) return *this;
  Tensor t;
  t.resize(shape_, dtype_, place);
  detail::copy_bytes(t.raw(), place, raw(), this->place(), bytes());
  return t;
}

OAR_FUNC bool Tensor::pinned() const {
  return storage_ && !storage_->borrowed() && &storage_->allocator() == &pinned_allocator() && &pinned_allocator() != &allocator(cpu());
}

OAR_FUNC Tensor Tensor::page_locked(Shape shape, DType dtype) {
  OAR_CHECK(shape.known(), "page_locked: shape {} has unknown dims", shape.str());
  Tensor t;
  t.shape_ = std::move(shape);
  t.dtype_ = dtype;
  t.place_ = cpu();
  // (a shape of rank 0 holds one value once it has storage: bytes() of the bare tensor would say 0)
  t.storage_ = std::make_shared<Storage>(size_t(t.shape_.empty() ? 1 : t.shape_.numel()) * size_of(dtype), pinned_allocator());
  return t;
}

OAR_FUNC Tensor Tensor::pin_memory() const {
  OAR_CHECK(initialized(), "pin_memory: the tensor is empty");
  if (pinned()) return *this;
  Tensor t = page_locked(shape_, dtype_);
  detail::copy_bytes(t.raw(), cpu(), raw(), place(), bytes());
  return t;
}

OAR_FUNC void Tensor::copy_from(const Tensor& src) {
  if (src.raw() == raw() && src.shape_ == shape_) return;
  const Place dst = initialized() ? place() : src.place();
  resize(src.shape_, src.dtype_, dst);
  detail::copy_bytes(raw(), dst, src.raw(), src.place(), src.bytes());
}

OAR_FUNC void Tensor::reallocate(size_t bytes, Place place) {
  storage_ = std::make_shared<Storage>(bytes, place);
  offset_ = 0;
}

OAR_FUNC void Tensor::fail_unknown_shape(const Shape& shape) {
  throw Error(fmt::format("cannot allocate a tensor of unknown shape {}", shape.str()));
}

OAR_FUNC void Tensor::fail_dtype(DType have, DType want) {
  throw Error(fmt::format("tensor holds {}, not {}", name(have), name(want)));
}

OAR_FUNC std::string lod_error(const LoD& lod, int64_t rows) {
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

OAR_FUNC LoD lod_from_lengths(const Lengths& lengths) {
  LoD lod;
  lod.reserve(lengths.size());
  for (auto& level : lengths) {
    std::vector<size_t> offs(level.size() + 1, 0);
    for (size_t i = 0; i < level.size(); ++i) offs[i + 1] = offs[i] + level[i];
    lod.push_back(std::move(offs));
  }
  return lod;
}

OAR_FUNC Lengths lod_lengths(const LoD& lod) {
  Lengths out;
  out.reserve(lod.size());
  for (auto& level : lod) {
    std::vector<size_t> lens;
    for (size_t i = 1; i < level.size(); ++i) lens.push_back(level[i] - level[i - 1]);
    out.push_back(std::move(lens));
  }
  return out;
}

OAR_FUNC LoDTensor LoDTensor::sequence(size_t i) const {
  OAR_CHECK(i < num_sequences(), "sequence {} of a LoDTensor with {} sequences", i, num_sequences());
  // Follow entry range [lo, hi) of level 0 down the levels; each lower level keeps its part, rebased.
  size_t lo = i, hi = i + 1;
  LoD sub;
  for (auto& level : lod_) {
    std::vector<size_t> part(level.begin() + std::ptrdiff_t(lo), level.begin() + std::ptrdiff_t(hi) + 1);
    for (auto& o : part) o -= level[lo];
    sub.push_back(std::move(part));
    lo = level[lo];
    hi = level[hi];
  }
  return LoDTensor(slice(int64_t(lo), int64_t(hi)), std::move(sub));
}

namespace detail {

inline std::string format_value(const Tensor& t, int64_t i) {
  double v = t.get(i);
  if (is_integer(t.dtype()) || t.dtype() == DType::boolean) return fmt::format("{}", int64_t(v));
  return fmt::format("{:.6g}", v);
}

/// Rows [lo, hi) of dim `d` of `t` starting at flat `base`, nested; `budget` counts the values still shown.
inline void format_rows(std::string& s, const Tensor& t, int d, int64_t base, int64_t lo, int64_t hi, int indent, int64_t& budget) {
  const int64_t inner = t.shape().numel(d + 1, t.rank());
  s += '[';
  for (int64_t r = lo; r < hi; ++r) {
    if (r > lo) s += d + 1 == t.rank() ? ", " : ",\n" + std::string(size_t(indent + 1), ' ');
    if (budget <= 0) {
      s += "...";
      break;
    }
    if (d + 1 == t.rank()) {
      s += format_value(t, base + r);
      --budget;
    } else {
      format_rows(s, t, d + 1, base + r * inner, 0, t.dim(d + 1), indent + 1, budget);
    }
  }
  s += ']';
}

inline std::string format_lod_levels(const std::vector<std::vector<size_t>>& levels) {
  std::string s = "[";
  for (size_t l = 0; l < levels.size(); ++l) s += fmt::format("{}[{}]", l ? ", " : "", fmt::join(levels[l], ", "));
  return s + "]";
}

}  // namespace detail

OAR_FUNC std::string to_string(const Tensor& t, int64_t max_values) {
  if (!t.initialized()) return fmt::format("{}{} (no value)", name(t.dtype()), t.shape().str());
  std::string s = fmt::format("{}{} {}\n", name(t.dtype()), t.shape().str(), t.place().str());
  if (!t.place().is_cpu()) return s + to_string(t.to(cpu()), max_values).substr(s.size());
  int64_t budget = max_values;
  if (t.rank() == 0) s += detail::format_value(t, 0);
  else detail::format_rows(s, t, 0, 0, 0, t.dim(0), 0, budget);
  return s;
}

OAR_FUNC std::string to_string(const LoDTensor& t, int64_t max_values) {
  if (t.lod().empty() || !t.initialized()) return to_string(static_cast<const Tensor&>(t), max_values);
  if (!t.place().is_cpu()) return to_string(LoDTensor(t.to(cpu()), t.lod()), max_values);
  std::string s = fmt::format("{}{} {} lod {} lengths {}\n", name(t.dtype()), t.shape().str(), t.place().str(), detail::format_lod_levels(t.lod()),
                              detail::format_lod_levels(t.lengths()));
  const auto& rows = t.lod().back();
  int64_t budget = max_values;
  for (size_t q = 0; q + 1 < rows.size(); ++q) {
    if (budget <= 0) {
      s += fmt::format("... ({} more sequences)\n", rows.size() - 1 - q);
      break;
    }
    s += fmt::format("seq {} (rows {}..{}): ", q, rows[q], rows[q + 1]);
    if (rows[q] == rows[q + 1]) s += "[]";
    else detail::format_rows(s, t, 0, 0, int64_t(rows[q]), int64_t(rows[q + 1]), 2, budget);
    s += '\n';
  }
  return s;
}

OAR_FUNC void LoDTensor::check_lod(const LoD& lod) const {
  if (lod.empty()) return;
  std::string why = lod_error(lod, rank() > 0 ? dim(0) : 0);
  OAR_CHECK(why.empty(), "invalid LoD: {}", why);
}

}  // namespace oar
