// oar/device/tensor-inl.hpp: the implementation of tensor.hpp (included by it when header-only; compiled once into liboar otherwise).
#pragma once
#include "oar/device/tensor.hpp"

#include <type_traits>

#include "oar/device/cuda.hpp"

namespace oar {

OAR_FUNC Storage::Storage(size_t bytes, Place place) : bytes_(bytes), place_(place), alloc_(&allocator(place)) { data_ = alloc_->allocate(bytes); }

OAR_FUNC Storage::~Storage() { alloc_->deallocate(data_, bytes_); }

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
    if constexpr (std::is_arithmetic_v<T>) return double(static_cast<const T*>(raw())[i]);
    else throw Error(fmt::format("get() is not available for {}", name(dtype_)));
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

OAR_FUNC void LoDTensor::check_lod(const LoD& lod) const {
  if (lod.empty()) return;
  std::string why = lod_error(lod, rank() > 0 ? dim(0) : 0);
  OAR_CHECK(why.empty(), "invalid LoD: {}", why);
}

}  // namespace oar
