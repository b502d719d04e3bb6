// oar/io/tensor_file-inl.hpp: the implementation of tensor_file.hpp (included by it when header-only; compiled once into liboar otherwise).
#pragma once
#include "oar/io/tensor_file.hpp"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <ostream>
#include <type_traits>

#include "oar/core/error.hpp"
#include "oar/io/durable-inl.hpp"
#include "oar/ir/wire-inl.hpp"

namespace oar::io {

namespace detail {

template <class T>
inline void put_le(std::string& out, T v) {
  static_assert(std::is_integral_v<T>);
  using U = std::make_unsigned_t<T>;
  U u = U(v);
  for (size_t i = 0; i < sizeof(T); ++i) out.push_back(char((u >> (8 * i)) & 0xff));
}

template <class T>
inline T get_le(const char* p) {
  using U = std::make_unsigned_t<T>;
  U u = 0;
  for (size_t i = 0; i < sizeof(T); ++i) u |= U(static_cast<unsigned char>(p[i])) << (8 * i);
  return T(u);
}

/// Copies `n` elements of `elem` bytes, swapping byte order on a big-endian host (the format is little-endian).
inline void copy_le(char* dst, const char* src, size_t n, size_t elem) {
  if constexpr (std::endian::native == std::endian::little) {
    if (n) std::memcpy(dst, src, n * elem);
  } else {
    for (size_t i = 0; i < n; ++i)
      for (size_t b = 0; b < elem; ++b) dst[i * elem + b] = src[i * elem + elem - 1 - b];
  }
}

/// A cursor over the bytes of one stream that names the source in its errors.
struct ByteReader {
  std::string_view& in;
  std::string_view what;
  size_t start_size;
  [[noreturn]] void fail(const std::string& why) const {
    throw Error(fmt::format("{}: {} (at byte {})", what, why, start_size - in.size()));
  }
  const char* take(size_t n, std::string_view field) {
    if (in.size() < n) fail(fmt::format("truncated: {} needs {} bytes, {} left", field, n, in.size()));
    const char* p = in.data();
    in.remove_prefix(n);
    return p;
  }
  template <class T>
  T get(std::string_view field) { return get_le<T>(take(sizeof(T), field)); }
};

}  // namespace detail

OAR_FUNC void write_lod_tensor(std::string& out, const LoDTensor& t) {
  OAR_CHECK(t.initialized(), "write_lod_tensor: the tensor is not initialized");
  if (!t.place().is_cpu()) return write_lod_tensor(out, LoDTensor(t.to(cpu()), t.lod()));  // a device's tensor: its bytes come to the host
  detail::put_le<uint32_t>(out, 0);
  detail::put_le<uint64_t>(out, t.lod().size());
  for (const auto& level : t.lod()) {
    detail::put_le<uint64_t>(out, level.size() * sizeof(uint64_t));
    for (size_t off : level) detail::put_le<uint64_t>(out, uint64_t(off));
  }
  detail::put_le<uint32_t>(out, 0);
  auto desc = oar::detail::WireTypes::instance().make("VarType.TensorDesc");
  oar::detail::Wire w(*desc);
  w.set("data_type", int(t.dtype()));
  for (int64_t d : t.shape()) w.add("dims", d);
  std::string bytes = desc->SerializeAsString();
  detail::put_le<int32_t>(out, int32_t(bytes.size()));
  out += bytes;
  size_t at = out.size();
  out.resize(at + t.bytes());
  detail::copy_le(out.data() + at, static_cast<const char*>(t.raw()), size_t(t.numel()), size_of(t.dtype()));
}

OAR_FUNC void write_lod_tensor(std::ostream& out, const LoDTensor& t) {
  std::string bytes;
  write_lod_tensor(bytes, t);
  out.write(bytes.data(), std::streamsize(bytes.size()));
  if (!out) throw Error("write_lod_tensor: the stream refused the bytes");
}

OAR_FUNC LoDTensor read_lod_tensor(std::string_view& in, std::string_view what) {
  detail::ByteReader r{in, what, in.size()};
  uint32_t version = r.get<uint32_t>("the LoDTensor version");
  if (version != 0) r.fail(fmt::format("unsupported LoDTensor version {} (only 0 exists)", version));
  uint64_t levels = r.get<uint64_t>("the LoD level count");
  if (levels > in.size() / 8) r.fail(fmt::format("corrupted: {} LoD levels cannot fit in the {} bytes left", levels, in.size()));
  LoD lod(levels);
  for (uint64_t l = 0; l < levels; ++l) {
    uint64_t nbytes = r.get<uint64_t>("a LoD level size");
    if (nbytes % 8 != 0) r.fail(fmt::format("corrupted: LoD level {} has {} bytes, not a multiple of 8", l, nbytes));
    if (nbytes > in.size()) r.fail(fmt::format("truncated: LoD level {} needs {} bytes, {} left", l, nbytes, in.size()));
    const char* p = r.take(nbytes, "a LoD level");
    lod[l].resize(nbytes / 8);
    for (uint64_t i = 0; i < nbytes / 8; ++i) lod[l][i] = size_t(detail::get_le<uint64_t>(p + 8 * i));
  }
  uint32_t tversion = r.get<uint32_t>("the tensor version");
  if (tversion != 0) r.fail(fmt::format("unsupported tensor version {} (only 0 exists)", tversion));
  int32_t desc_size = r.get<int32_t>("the TensorDesc size");
  if (desc_size < 0 || size_t(desc_size) > in.size())
    r.fail(fmt::format("{}: TensorDesc size {} with {} bytes left", desc_size < 0 ? "corrupted" : "truncated", desc_size, in.size()));
  const char* dp = r.take(size_t(desc_size), "the TensorDesc");
  auto desc = oar::detail::WireTypes::instance().make("VarType.TensorDesc");
  if (!desc->ParsePartialFromArray(dp, desc_size)) r.fail("corrupted: the TensorDesc does not parse");
  const oar::detail::Wire w(*desc);
  if (!w.has("data_type")) r.fail("corrupted: the TensorDesc has no data_type");
  int dt = int(w.get("data_type"));
  if (!is_valid_dtype(dt)) r.fail(fmt::format("corrupted: unknown data type {}", dt));
  DType dtype = DType(dt);
  const size_t elem = size_of(dtype);
  std::vector<int64_t> dims = oar::detail::wire_ints<int64_t>(w, "dims");
  if (std::string why = oar::detail::dims_error(dims); !why.empty()) r.fail(fmt::format("corrupted: {}", why));
  // numel * elem must fit in what is left: checked without overflow before anything is allocated.
  uint64_t numel = 1;
  bool zero = false;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] < 0) r.fail(fmt::format("corrupted: dim {} is {}", i, dims[i]));
    if (dims[i] == 0) zero = true;
  }
  if (zero) numel = 0;
  else
    for (size_t i = 0; i < dims.size(); ++i) {
      if (uint64_t(dims[i]) > in.size() / elem / numel)
        r.fail(fmt::format("truncated: shape {} of {} needs more than the {} bytes left", Shape(dims).str(), name(dtype), in.size()));
      numel *= uint64_t(dims[i]);
    }
  const size_t nbytes = size_t(numel) * elem;
  const char* data = r.take(nbytes, fmt::format("the data of a {} {} tensor", Shape(dims).str(), name(dtype)));
  Tensor t(Shape(dims), dtype);
  detail::copy_le(static_cast<char*>(t.raw()), data, size_t(numel), elem);
  if (!lod.empty()) {
    std::string why = lod_error(lod, dims.empty() ? 0 : dims[0]);
    if (!why.empty()) r.fail(fmt::format("corrupted LoD: {}", why));
  }
  return LoDTensor(std::move(t), std::move(lod));
}

OAR_FUNC void save_tensor(const std::filesystem::path& path, const LoDTensor& t) {
  std::string bytes;
  try {
    write_lod_tensor(bytes, t);
  } catch (const Error& e) {
    throw Error(fmt::format("save_tensor '{}': {}", path.string(), e.message()));
  }
  detail::save_with_sum(path, bytes, {{path.filename().string(), bytes.size()}});
}

OAR_FUNC LoDTensor load_tensor(const std::filesystem::path& path) {
  std::string bytes = oar::detail::read_file(path);
  detail::verify_sum(path, bytes);
  std::string_view in(bytes);
  std::string what = fmt::format("tensor file '{}'", path.string());
  LoDTensor t = read_lod_tensor(in, what);
  if (!in.empty()) throw Error(fmt::format("{}: corrupted: {} bytes follow the tensor", what, in.size()));
  return t;
}

OAR_FUNC void save_combined(const std::filesystem::path& path, std::vector<std::pair<std::string, LoDTensor>> tensors) {
  std::sort(tensors.begin(), tensors.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::string bytes;
  std::vector<std::pair<std::string, size_t>> parts;
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (i > 0 && tensors[i].first == tensors[i - 1].first)
      throw Error(fmt::format("save_combined '{}': the name '{}' appears twice", path.string(), tensors[i].first));
    const size_t at = bytes.size();
    try {
      write_lod_tensor(bytes, tensors[i].second);
    } catch (const Error& e) {
      throw Error(fmt::format("save_combined '{}': tensor '{}': {}", path.string(), tensors[i].first, e.message()));
    }
    parts.push_back({tensors[i].first, bytes.size() - at});
  }
  detail::save_with_sum(path, bytes, parts);
}

OAR_FUNC std::vector<LoDTensor> load_combined(const std::filesystem::path& path, const std::vector<std::string>& names) {
  std::vector<size_t> order(names.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return names[a] < names[b]; });
  for (size_t i = 1; i < order.size(); ++i)
    if (names[order[i]] == names[order[i - 1]])
      throw Error(fmt::format("load_combined '{}': the name '{}' appears twice", path.string(), names[order[i]]));
  std::string bytes = oar::detail::read_file(path);
  detail::verify_sum(path, bytes);
  std::string_view in(bytes);
  std::vector<LoDTensor> out(names.size());
  for (size_t k = 0; k < order.size(); ++k) {
    const std::string& n = names[order[k]];
    if (in.empty())
      throw Error(fmt::format("combined tensor file '{}' ends after {} of the {} tensors: '{}' is missing", path.string(), k,
                              names.size(), n));
    out[order[k]] = read_lod_tensor(in, fmt::format("combined tensor file '{}', tensor '{}' ({} of {})", path.string(), n, k + 1, names.size()));
  }
  if (!in.empty())
    throw Error(fmt::format("combined tensor file '{}' has {} bytes after the {} tensors asked for (more tensors than names?)",
                            path.string(), in.size(), names.size()));
  return out;
}

}  // namespace oar::io
