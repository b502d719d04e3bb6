// src/serve/protocol.cpp: see protocol.hpp. The protocol: https://kserve.github.io/website (Open Inference
// Protocol, REST) and Triton's binary tensor data extension.
#include "src/serve/protocol.hpp"

#include <fmt/format.h>

#include <cstring>
#include <nlohmann/json.hpp>

#include "oar/core/half.hpp"

namespace oar::serve {

using json = nlohmann::json;

namespace {

struct NameOf {
  DType t;
  std::string_view name;
};
constexpr NameOf kTypes[] = {{DType::boolean, "BOOL"}, {DType::u8, "UINT8"}, {DType::i8, "INT8"},  {DType::i16, "INT16"}, {DType::i32, "INT32"},
                             {DType::i64, "INT64"},    {DType::f16, "FP16"}, {DType::bf16, "BF16"}, {DType::f32, "FP32"}, {DType::f64, "FP64"}};

std::string shape_str(const std::vector<int64_t>& d) { return fmt::format("[{}]", fmt::join(d, ", ")); }

/// Nested JSON arrays (or a flat one) into `out`, row-major.
void flatten(const json& v, std::vector<const json*>& out, int depth = 0) {
  if (depth > 32) throw RequestError(400, "\"data\" is nested too deeply");
  if (v.is_array()) {
    for (auto& e : v) flatten(e, out, depth + 1);
  } else {
    out.push_back(&v);
  }
}

template <class T>
T number_as(const json& v, std::string_view input) {
  if constexpr (std::is_same_v<T, bool>) {
    if (v.is_boolean()) return v.get<bool>();
  } else {
    if (v.is_number()) {
      if constexpr (std::is_integral_v<T>) {
        if (!v.is_number_integer()) throw RequestError(400, fmt::format("input '{}': {} is not an integer", input, v.dump()));
        const auto x = v.is_number_unsigned() ? int64_t(v.get<uint64_t>()) : v.get<int64_t>();
        if (x < int64_t(std::numeric_limits<T>::min()) || (x > 0 && uint64_t(x) > uint64_t(std::numeric_limits<T>::max())))
          throw RequestError(400, fmt::format("input '{}': {} is out of range for its datatype", input, x));
        return T(x);
      } else {
        return T(v.get<double>());
      }
    }
  }
  throw RequestError(400, fmt::format("input '{}': {} is not a {}", input, v.dump(), std::is_same_v<T, bool> ? "boolean" : "number"));
}

void fill_from_json(Tensor& t, const std::vector<const json*>& vals, std::string_view input) {
  const size_t n = vals.size();
  switch (t.dtype()) {
    case DType::boolean: { auto* p = t.data<bool>(); for (size_t i = 0; i < n; ++i) p[i] = number_as<bool>(*vals[i], input); break; }
    case DType::u8: { auto* p = t.data<uint8_t>(); for (size_t i = 0; i < n; ++i) p[i] = number_as<uint8_t>(*vals[i], input); break; }
    case DType::i8: { auto* p = t.data<int8_t>(); for (size_t i = 0; i < n; ++i) p[i] = number_as<int8_t>(*vals[i], input); break; }
    case DType::i16: { auto* p = t.data<int16_t>(); for (size_t i = 0; i < n; ++i) p[i] = number_as<int16_t>(*vals[i], input); break; }
    case DType::i32: { auto* p = t.data<int32_t>(); for (size_t i = 0; i < n; ++i) p[i] = number_as<int32_t>(*vals[i], input); break; }
    case DType::i64: { auto* p = t.data<int64_t>(); for (size_t i = 0; i < n; ++i) p[i] = number_as<int64_t>(*vals[i], input); break; }
    case DType::f32: { auto* p = t.data<float>(); for (size_t i = 0; i < n; ++i) p[i] = number_as<float>(*vals[i], input); break; }
    case DType::f64: { auto* p = t.data<double>(); for (size_t i = 0; i < n; ++i) p[i] = number_as<double>(*vals[i], input); break; }
    case DType::f16: { auto* p = static_cast<half*>(t.raw()); for (size_t i = 0; i < n; ++i) p[i] = to_half(number_as<float>(*vals[i], input)); break; }
    case DType::bf16: { auto* p = static_cast<bfloat16*>(t.raw()); for (size_t i = 0; i < n; ++i) p[i] = to_bfloat16(number_as<float>(*vals[i], input)); break; }
  }
}

json to_json_data(const Tensor& t) {
  json a = json::array();
  const int64_t n = t.numel();
  auto put = [&](auto* p) {
    for (int64_t i = 0; i < n; ++i) a.push_back(p[i]);
  };
  switch (t.dtype()) {
    case DType::boolean: put(t.data<bool>()); break;
    case DType::u8: put(t.data<uint8_t>()); break;
    case DType::i8: put(t.data<int8_t>()); break;
    case DType::i16: put(t.data<int16_t>()); break;
    case DType::i32: put(t.data<int32_t>()); break;
    case DType::i64: put(t.data<int64_t>()); break;
    case DType::f32: put(t.data<float>()); break;
    case DType::f64: put(t.data<double>()); break;
    case DType::f16: { auto* p = static_cast<const half*>(t.raw()); for (int64_t i = 0; i < n; ++i) a.push_back(to_float(p[i])); break; }
    case DType::bf16: { auto* p = static_cast<const bfloat16*>(t.raw()); for (int64_t i = 0; i < n; ++i) a.push_back(to_float(p[i])); break; }
  }
  return a;
}

const json* member(const json& obj, const char* key) {
  auto it = obj.find(key);
  return it == obj.end() ? nullptr : &*it;
}

/// parameters.<key> as a bool, when present.
std::optional<bool> bool_param(const json& obj, const char* key, std::string_view where) {
  const json* p = member(obj, "parameters");
  if (!p) return std::nullopt;
  if (!p->is_object()) throw RequestError(400, fmt::format("{}: \"parameters\" must be an object", where));
  const json* v = member(*p, key);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) throw RequestError(400, fmt::format("{}: parameters.{} must be true or false", where, key));
  return v->get<bool>();
}

}  // namespace

std::string_view datatype_name(DType t) {
  for (auto& k : kTypes)
    if (k.t == t) return k.name;
  return "?";
}

std::optional<DType> datatype_of(std::string_view name) {
  for (auto& k : kTypes)
    if (k.name == name) return k.t;
  return std::nullopt;
}

InferRequest parse_infer(const ModelVersion& model, std::string_view body, std::optional<size_t> json_bytes, const Limits& limits) {
  if (json_bytes && *json_bytes > body.size())
    throw RequestError(400, fmt::format("Inference-Header-Content-Length is {} but the body has {} bytes", *json_bytes, body.size()));
  const std::string_view head = json_bytes ? body.substr(0, *json_bytes) : body;
  std::string_view binary = json_bytes ? body.substr(*json_bytes) : std::string_view{};
  json j;
  try {
    j = json::parse(head);
  } catch (const json::exception& e) {
    throw RequestError(400, fmt::format("the request is not valid JSON: {}", e.what()));
  }
  if (!j.is_object()) throw RequestError(400, "the request must be a JSON object with \"inputs\"");
  InferRequest r;
  if (const json* id = member(j, "id")) {
    if (!id->is_string()) throw RequestError(400, "\"id\" must be a string");
    r.id = id->get<std::string>();
  }
  const json* inputs = member(j, "inputs");
  if (!inputs || !inputs->is_array()) throw RequestError(400, "the request has no \"inputs\" list");
  const auto& specs = model.inputs();
  r.inputs.resize(specs.size());
  std::vector<bool> seen(specs.size(), false);
  std::optional<int64_t> rows;
  for (const json& in : *inputs) {
    if (!in.is_object()) throw RequestError(400, "each input must be an object {\"name\", \"shape\", \"datatype\", \"data\"}");
    const json* name = member(in, "name");
    if (!name || !name->is_string()) throw RequestError(400, "an input has no \"name\"");
    const std::string n = name->get<std::string>();
    size_t k = 0;
    while (k < specs.size() && specs[k].name != n) ++k;
    if (k == specs.size()) {
      std::vector<std::string> names;
      for (auto& s : specs) names.push_back(s.name);
      throw RequestError(400, fmt::format("model '{}' has no input '{}' (its inputs: {})", model.name(), n, fmt::join(names, ", ")));
    }
    if (seen[k]) throw RequestError(400, fmt::format("input '{}' is given twice", n));
    seen[k] = true;
    const TensorSpec& spec = specs[k];
    const json* dt = member(in, "datatype");
    if (!dt || !dt->is_string()) throw RequestError(400, fmt::format("input '{}' has no \"datatype\"", n));
    if (dt->get<std::string>() != datatype_name(spec.dtype))
      throw RequestError(400, fmt::format("input '{}' must be {}, not {}", n, datatype_name(spec.dtype), dt->get<std::string>()));
    const json* sh = member(in, "shape");
    if (!sh || !sh->is_array()) throw RequestError(400, fmt::format("input '{}' has no \"shape\"", n));
    std::vector<int64_t> d;
    for (auto& x : *sh) {
      if (!x.is_number_integer() || x.get<int64_t>() < 0) throw RequestError(400, fmt::format("input '{}': shape {} has a dim that is not a size", n, sh->dump()));
      d.push_back(x.get<int64_t>());
    }
    bool fits = d.size() == spec.shape.size();
    for (size_t i = 0; fits && i < d.size(); ++i) fits = spec.shape[i] < 0 || spec.shape[i] == d[i];
    if (!fits) throw RequestError(400, fmt::format("input '{}' has shape {}; the model takes {} (-1: any size)", n, shape_str(d), shape_str(spec.shape)));
    int64_t numel = 1;
    for (int64_t x : d) {
      if (x > limits.max_elements) numel = limits.max_elements + 1;
      else numel *= x;
      if (numel > limits.max_elements) break;
    }
    if (numel > limits.max_elements)
      throw RequestError(413, fmt::format("input '{}' of shape {} has more than {} elements (the server's limit)", n, shape_str(d), limits.max_elements));
    if (model.batched()) {
      if (d[0] == 0) throw RequestError(400, fmt::format("input '{}' has no rows (shape {})", n, shape_str(d)));
      if (rows && *rows != d[0]) throw RequestError(400, fmt::format("the inputs disagree on the batch size: {} and {} rows", *rows, d[0]));
      rows = d[0];
    }
    Tensor t{Shape(d), spec.dtype};
    const json* data = member(in, "data");
    const json* params = member(in, "parameters");
    const json* bsize = params && params->is_object() ? member(*params, "binary_data_size") : nullptr;
    if (bsize) {
      if (data) throw RequestError(400, fmt::format("input '{}' has both \"data\" and binary_data_size", n));
      if (!json_bytes) throw RequestError(400, fmt::format("input '{}' has binary_data_size but the request has no Inference-Header-Content-Length", n));
      if (!bsize->is_number_unsigned() || bsize->get<uint64_t>() != t.bytes())
        throw RequestError(400, fmt::format("input '{}': binary_data_size is {} but {} {} of shape {} take {} bytes", n, bsize->dump(), numel, datatype_name(spec.dtype),
                                            shape_str(d), t.bytes()));
      if (binary.size() < t.bytes()) throw RequestError(400, fmt::format("input '{}': the body ends {} bytes short of its binary data", n, t.bytes() - binary.size()));
      if (t.bytes()) std::memcpy(t.raw(), binary.data(), t.bytes());
      binary.remove_prefix(t.bytes());
    } else {
      if (!data) throw RequestError(400, fmt::format("input '{}' has no \"data\"", n));
      std::vector<const json*> vals;
      vals.reserve(size_t(numel));
      flatten(*data, vals);
      if (int64_t(vals.size()) != numel)
        throw RequestError(400, fmt::format("input '{}' has {} values; shape {} needs {}", n, vals.size(), shape_str(d), numel));
      fill_from_json(t, vals, n);
    }
    r.inputs[k] = LoDTensor(std::move(t));
  }
  for (size_t k = 0; k < specs.size(); ++k)
    if (!seen[k]) throw RequestError(400, fmt::format("input '{}' is missing", specs[k].name));
  if (!binary.empty()) throw RequestError(400, fmt::format("{} bytes of binary data after the last input's", binary.size()));
  r.rows = rows.value_or(1);

  const bool binary_default = bool_param(j, "binary_data_output", "the request").value_or(false);
  if (const json* outs = member(j, "outputs")) {
    if (!outs->is_array()) throw RequestError(400, "\"outputs\" must be a list");
    for (const json& o : *outs) {
      const json* name = o.is_object() ? member(o, "name") : nullptr;
      if (!name || !name->is_string()) throw RequestError(400, "each requested output must be an object with a \"name\"");
      const std::string n = name->get<std::string>();
      size_t k = 0;
      while (k < model.outputs().size() && model.outputs()[k].name != n) ++k;
      if (k == model.outputs().size()) throw RequestError(400, fmt::format("model '{}' has no output '{}'", model.name(), n));
      if (o.is_object() && member(o, "parameters") && member(o["parameters"], "classification"))
        throw RequestError(400, "the classification extension is not supported");
      r.outputs.push_back(k);
      r.binary.push_back(bool_param(o, "binary_data", fmt::format("output '{}'", n)).value_or(binary_default));
    }
  } else {
    for (size_t k = 0; k < model.outputs().size(); ++k) {
      r.outputs.push_back(k);
      r.binary.push_back(binary_default);
    }
  }
  return r;
}

HttpResponse infer_response(const ModelVersion& model, const InferRequest& req, const std::vector<LoDTensor>& outputs) {
  json j;
  j["model_name"] = model.name();
  j["model_version"] = std::to_string(model.version());
  if (!req.id.empty()) j["id"] = req.id;
  json outs = json::array();
  std::string blobs;
  for (size_t i = 0; i < req.outputs.size(); ++i) {
    const LoDTensor& t = outputs[req.outputs[i]];
    json o;
    o["name"] = model.outputs()[req.outputs[i]].name;
    o["datatype"] = datatype_name(t.dtype());
    o["shape"] = t.shape().dims();
    if (req.binary[i]) {
      o["parameters"] = {{"binary_data_size", t.bytes()}};
      blobs.append(static_cast<const char*>(t.raw()), t.bytes());
    } else {
      o["data"] = to_json_data(t);
    }
    outs.push_back(std::move(o));
  }
  j["outputs"] = std::move(outs);
  HttpResponse r;
  r.body = j.dump(-1, ' ', false, json::error_handler_t::replace);
  if (std::find(req.binary.begin(), req.binary.end(), true) != req.binary.end()) {
    r.headers.push_back({"Inference-Header-Content-Length", std::to_string(r.body.size())});
    r.content_type = "application/octet-stream";
    r.body += blobs;
  }
  return r;
}

std::string model_metadata(const ModelVersion& model) {
  auto list = [](const std::vector<TensorSpec>& specs) {
    json a = json::array();
    for (auto& s : specs) a.push_back({{"name", s.name}, {"datatype", datatype_name(s.dtype)}, {"shape", s.shape}});
    return a;
  };
  json j{{"name", model.name()},
         {"versions", json::array({std::to_string(model.version())})},
         {"platform", "oar"},
         {"inputs", list(model.inputs())},
         {"outputs", list(model.outputs())}};
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

HttpResponse error_response(int status, const std::string& message) {
  return {status, "application/json", json{{"error", message}}.dump(-1, ' ', false, json::error_handler_t::replace)};
}

}  // namespace oar::serve
