// oar/ir/wire-inl.hpp: framework.proto's messages as protobuf dynamic messages, for the implementation files
// that read and write them (serialize-inl, schema_dump-inl, tensor_file-inl). The message types are built on
// first use from the descriptor embedded in framework_descriptor.hpp, so libprotobuf is all that is needed:
// no protoc-generated code to compile or link, which keeps oar header-only.
#pragma once
#include <fmt/ranges.h>
#include <google/protobuf/descriptor.h>
#include <google/protobuf/descriptor.pb.h>
#include <google/protobuf/dynamic_message.h>
#include <google/protobuf/message.h>
#include <google/protobuf/text_format.h>

#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "oar/core/error.hpp"
#include "oar/core/shape.hpp"
#include "oar/ir/framework_descriptor.hpp"

namespace oar::detail {

namespace pb = google::protobuf;

/// framework.proto's types, built once per process.
class WireTypes {
 public:
  static const WireTypes& instance() {
    static const WireTypes w;
    return w;
  }
  /// A new empty message of `type` ("ProgramDesc", "VarType.TensorDesc", ...).
  std::unique_ptr<pb::Message> make(std::string_view type) const {
    const pb::Descriptor* d = pool_.FindMessageTypeByName("oar.proto." + std::string(type));
    if (!d) throw Error(fmt::format("framework.proto has no message {}", type));
    return std::unique_ptr<pb::Message>(factory_.GetPrototype(d)->New());
  }

 private:
  WireTypes() {
    pb::FileDescriptorSet set;
    if (!set.ParseFromArray(kFrameworkDescriptor, int(sizeof kFrameworkDescriptor)) || set.file_size() != 1 || !pool_.BuildFile(set.file(0)))
      throw Error("the embedded framework.proto descriptor does not load (regenerate it: target oar_update_descriptor)");
  }
  pb::DescriptorPool pool_;
  mutable pb::DynamicMessageFactory factory_{&pool_};
};

/// One message, its fields by name: what generated accessors would be (`m.set("idx", 3)` for `set_idx(3)`).
/// A field name framework.proto lacks is a bug in oar, reported as an oar::Error naming it.
class Wire {
 public:
  explicit Wire(pb::Message& m) : m_(&m), r_(m.GetReflection()) {}
  explicit Wire(const pb::Message& m) : m_(const_cast<pb::Message*>(&m)), r_(m.GetReflection()) {}

  const pb::FieldDescriptor* field(std::string_view name) const {
    const pb::FieldDescriptor* f = m_->GetDescriptor()->FindFieldByName(std::string(name));
    if (!f) throw Error(fmt::format("{} has no field '{}'", m_->GetDescriptor()->full_name(), name));
    return f;
  }

  // Writing. Integers, enums and bools share one setter, chosen by the field's type.
  Wire& set(std::string_view name, int64_t v) {
    auto* f = field(name);
    switch (f->cpp_type()) {
      case pb::FieldDescriptor::CPPTYPE_INT32: r_->SetInt32(m_, f, int32_t(v)); break;
      case pb::FieldDescriptor::CPPTYPE_INT64: r_->SetInt64(m_, f, v); break;
      case pb::FieldDescriptor::CPPTYPE_BOOL: r_->SetBool(m_, f, v != 0); break;
      case pb::FieldDescriptor::CPPTYPE_ENUM: r_->SetEnumValue(m_, f, int(v)); break;
      default: throw Error(fmt::format("field '{}' is not an integer", name));
    }
    return *this;
  }
  Wire& set_float(std::string_view name, float v) {
    r_->SetFloat(m_, field(name), v);
    return *this;
  }
  Wire& set_string(std::string_view name, std::string v) {
    r_->SetString(m_, field(name), std::move(v));
    return *this;
  }
  void add(std::string_view name, int64_t v) {
    auto* f = field(name);
    switch (f->cpp_type()) {
      case pb::FieldDescriptor::CPPTYPE_INT32: r_->AddInt32(m_, f, int32_t(v)); break;
      case pb::FieldDescriptor::CPPTYPE_INT64: r_->AddInt64(m_, f, v); break;
      case pb::FieldDescriptor::CPPTYPE_BOOL: r_->AddBool(m_, f, v != 0); break;
      case pb::FieldDescriptor::CPPTYPE_ENUM: r_->AddEnumValue(m_, f, int(v)); break;
      default: throw Error(fmt::format("field '{}' is not an integer", name));
    }
  }
  void add_float(std::string_view name, float v) { r_->AddFloat(m_, field(name), v); }
  void add_string(std::string_view name, std::string v) { r_->AddString(m_, field(name), std::move(v)); }
  Wire add_message(std::string_view name) { return Wire(*r_->AddMessage(m_, field(name))); }
  Wire mutable_message(std::string_view name) { return Wire(*r_->MutableMessage(m_, field(name))); }

  // Reading.
  bool has(std::string_view name) const { return r_->HasField(*m_, field(name)); }
  int size(std::string_view name) const { return r_->FieldSize(*m_, field(name)); }
  int64_t get(std::string_view name) const {
    auto* f = field(name);
    switch (f->cpp_type()) {
      case pb::FieldDescriptor::CPPTYPE_INT32: return r_->GetInt32(*m_, f);
      case pb::FieldDescriptor::CPPTYPE_INT64: return r_->GetInt64(*m_, f);
      case pb::FieldDescriptor::CPPTYPE_BOOL: return r_->GetBool(*m_, f);
      case pb::FieldDescriptor::CPPTYPE_ENUM: return r_->GetEnumValue(*m_, f);
      default: throw Error(fmt::format("field '{}' is not an integer", name));
    }
  }
  int64_t get(std::string_view name, int i) const {
    auto* f = field(name);
    switch (f->cpp_type()) {
      case pb::FieldDescriptor::CPPTYPE_INT32: return r_->GetRepeatedInt32(*m_, f, i);
      case pb::FieldDescriptor::CPPTYPE_INT64: return r_->GetRepeatedInt64(*m_, f, i);
      case pb::FieldDescriptor::CPPTYPE_BOOL: return r_->GetRepeatedBool(*m_, f, i);
      case pb::FieldDescriptor::CPPTYPE_ENUM: return r_->GetRepeatedEnumValue(*m_, f, i);
      default: throw Error(fmt::format("field '{}' is not an integer", name));
    }
  }
  float get_float(std::string_view name) const { return r_->GetFloat(*m_, field(name)); }
  float get_float(std::string_view name, int i) const { return r_->GetRepeatedFloat(*m_, field(name), i); }
  std::string get_string(std::string_view name) const { return r_->GetString(*m_, field(name)); }
  std::string get_string(std::string_view name, int i) const { return r_->GetRepeatedString(*m_, field(name), i); }
  Wire message(std::string_view name) const { return Wire(r_->GetMessage(*m_, field(name))); }
  Wire message(std::string_view name, int i) const { return Wire(r_->GetRepeatedMessage(*m_, field(name), i)); }

 private:
  pb::Message* m_;
  const pb::Reflection* r_;
};

/// Why the dims a file declares cannot make a Shape ("" when they can): more than Shape::kMaxRank of them, a
/// dim below -1 (-1: unknown), or known dims whose product overflows int64 (even beside a 0: code that takes
/// a shape's element count multiplies them).
inline std::string dims_error(const std::vector<int64_t>& dims) {
  if (dims.size() > size_t(Shape::kMaxRank)) return fmt::format("{} dims (a shape has at most {})", dims.size(), Shape::kMaxRank);
  uint64_t product = 1;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] < -1) return fmt::format("dim {} is {}", i, dims[i]);
    if (dims[i] <= 0) continue;
    if (product > uint64_t(std::numeric_limits<int64_t>::max()) / uint64_t(dims[i]))
      return fmt::format("dims [{}] multiply past 2^63", fmt::join(dims, ", "));
    product *= uint64_t(dims[i]);
  }
  return {};
}

/// A repeated integer field as a vector.
template <class T>
std::vector<T> wire_ints(const Wire& w, std::string_view field) {
  std::vector<T> v(size_t(w.size(field)));
  for (int i = 0; i < int(v.size()); ++i) v[size_t(i)] = T(w.get(field, i));
  return v;
}

}  // namespace oar::detail
