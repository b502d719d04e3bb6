// src/onnx/proto.cpp: see proto.hpp.
#include "src/onnx/proto.hpp"

#include <fmt/format.h>

#include <cstring>
#include <limits>

#include "oar/core/error.hpp"
#include "oar/core/file.hpp"
#include "oar/onnx/onnx.hpp"

namespace oar::onnx {

namespace detail {

using TP = ::onnx::TensorProto;

int32_t onnx_type(DType t, const std::string& what) {
  switch (t) {
    case DType::f32: return TP::FLOAT;
    case DType::f64: return TP::DOUBLE;
    case DType::f16: return TP::FLOAT16;
    case DType::bf16: return TP::BFLOAT16;
    case DType::i8: return TP::INT8;
    case DType::u8: return TP::UINT8;
    case DType::i16: return TP::INT16;
    case DType::i32: return TP::INT32;
    case DType::i64: return TP::INT64;
    case DType::boolean: return TP::BOOL;
  }
  throw Error(fmt::format("{}: dtype {} has no ONNX element type", what, int(t)));
}

DType oar_dtype(int32_t elem_type, const std::string& what) {
  switch (elem_type) {
    case TP::FLOAT: return DType::f32;
    case TP::DOUBLE: return DType::f64;
    case TP::FLOAT16: return DType::f16;
    case TP::BFLOAT16: return DType::bf16;
    case TP::INT8: return DType::i8;
    case TP::UINT8: return DType::u8;
    case TP::INT16: return DType::i16;
    case TP::INT32: return DType::i32;
    case TP::INT64: return DType::i64;
    case TP::BOOL: return DType::boolean;
    default: break;
  }
  throw UnsupportedError(fmt::format("{}: ONNX element type {} ({}) has no oar dtype", what, onnx_type_name(elem_type), elem_type));
}

const char* onnx_type_name(int32_t elem_type) {
  if (!TP::DataType_IsValid(elem_type)) return "invalid";
  return TP::DataType_Name(TP::DataType(elem_type)).c_str();
}

void to_proto(const Tensor& t, const std::string& name, TP& p) {
  const Tensor c = t.to(cpu());
  p.Clear();
  p.set_name(name);
  p.set_data_type(onnx_type(c.dtype(), name));
  for (int i = 0; i < c.rank(); ++i) p.add_dims(c.dim(i));
  p.set_raw_data(static_cast<const char*>(c.raw()), c.bytes());  // x86 and ONNX are both little-endian
}

namespace {

// Copies `n` values of a typed repeated field into `out`'s storage, converted to T.
template <class T, class Field>
void copy_field(const Field& f, int64_t n, Tensor& out) {
  T* dst = out.data<T>();
  for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<T>(f.Get(int(i)));
}

}  // namespace

Tensor from_proto(const TP& p, const std::string& what) {
  if (p.data_location() == TP::EXTERNAL) throw Error(fmt::format("{}: tensors with external data are not supported", what));
  if (!p.has_data_type()) throw Error(fmt::format("{}: the tensor has no data_type", what));
  const DType dt = oar_dtype(p.data_type(), what);
  if (p.dims_size() > Shape::kMaxRank) throw Error(fmt::format("{}: {} dims (oar's tensors have at most {})", what, p.dims_size(), Shape::kMaxRank));
  Shape shape;
  int64_t n = 1;
  for (int i = 0; i < p.dims_size(); ++i) {
    const int64_t d = p.dims(i);
    if (d < 0) throw Error(fmt::format("{}: dim {} is {}", what, i, d));
    if (d > 0 && n > std::numeric_limits<int64_t>::max() / d) throw Error(fmt::format("{}: the dims overflow int64", what));
    n *= d;
    shape.push_back(d);
  }
  const size_t esize = size_of(dt);
  // What the tensor holds must match what it declares, checked before allocating n elements.
  int64_t held = 0;
  if (p.has_raw_data()) {
    held = int64_t(p.raw_data().size() / esize);
    if (p.raw_data().size() % esize != 0) throw Error(fmt::format("{}: raw_data holds {} bytes, not a multiple of {}", what, p.raw_data().size(), esize));
  } else {
    switch (p.data_type()) {
      case TP::FLOAT: held = p.float_data_size(); break;
      case TP::DOUBLE: held = p.double_data_size(); break;
      case TP::INT64: held = p.int64_data_size(); break;
      default: held = p.int32_data_size(); break;  // int8..int32, bool, float16 and bfloat16 (as their bits)
    }
  }
  if (held != n)
    throw Error(fmt::format("{}: the dims [{}] declare {} elements but the tensor holds {}", what, fmt::join(p.dims(), ", "), n, held));
  Tensor out(shape, dt);
  if (n == 0) return out;
  if (p.has_raw_data()) {
    std::memcpy(out.raw(), p.raw_data().data(), size_t(n) * esize);
    return out;
  }
  switch (p.data_type()) {
    case TP::FLOAT: copy_field<float>(p.float_data(), n, out); break;
    case TP::DOUBLE: copy_field<double>(p.double_data(), n, out); break;
    case TP::INT64: copy_field<int64_t>(p.int64_data(), n, out); break;
    case TP::INT32: copy_field<int32_t>(p.int32_data(), n, out); break;
    case TP::INT16: copy_field<int16_t>(p.int32_data(), n, out); break;
    case TP::INT8: copy_field<int8_t>(p.int32_data(), n, out); break;
    case TP::UINT8: copy_field<uint8_t>(p.int32_data(), n, out); break;
    case TP::BOOL: copy_field<bool>(p.int32_data(), n, out); break;
    case TP::FLOAT16:
    case TP::BFLOAT16: {  // the 16 bits of each value, in int32_data
      auto* dst = static_cast<uint16_t*>(out.raw());
      for (int64_t i = 0; i < n; ++i) dst[i] = uint16_t(p.int32_data(int(i)));
      break;
    }
    default: throw Error(fmt::format("{}: unsupported element type {}", what, p.data_type()));
  }
  return out;
}

}  // namespace detail

Tensor read_tensor_proto(const std::filesystem::path& file, std::string* name) {
  const std::string bytes = oar::detail::read_file(file);
  ::onnx::TensorProto p;
  if (!p.ParseFromString(bytes)) throw Error(fmt::format("'{}' is not a serialized onnx.TensorProto", file.string()));
  if (name) *name = p.name();
  return detail::from_proto(p, fmt::format("'{}'", file.string()));
}

void write_tensor_proto(const std::filesystem::path& file, const Tensor& t, const std::string& name) {
  ::onnx::TensorProto p;
  detail::to_proto(t, name, p);
  oar::detail::write_file_atomic(file, p.SerializeAsString());
}

}  // namespace oar::onnx
