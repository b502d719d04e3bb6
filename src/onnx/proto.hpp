// src/onnx/proto.hpp: what export and import share: ONNX's element types against oar's dtypes, and tensors
// in and out of onnx.TensorProto. Private to liboar_onnx (it includes ONNX's generated headers).
#pragma once
#include <onnx/onnx_pb.h>

#include <cstdint>
#include <string>

#include "oar/device/tensor.hpp"

namespace oar::onnx::detail {

/// ONNX's TensorProto.DataType for `t`; an oar::Error naming `what` when ONNX has none.
int32_t onnx_type(DType t, const std::string& what);
/// oar's dtype for an ONNX element type; an oar::Error naming `what` when oar has none (strings, complex,
/// unsigned types wider than 8 bits).
DType oar_dtype(int32_t elem_type, const std::string& what);
const char* onnx_type_name(int32_t elem_type);

/// `t` (on any place) as a TensorProto named `name`, its bytes in raw_data (little-endian, as ONNX stores them).
void to_proto(const Tensor& t, const std::string& name, ::onnx::TensorProto& p);
/// A TensorProto's values as a CPU tensor. The sizes it declares are checked against the bytes it holds
/// before anything is allocated; external data is refused. `what` names the tensor in errors.
Tensor from_proto(const ::onnx::TensorProto& p, const std::string& what);

}  // namespace oar::onnx::detail
