// src/onnx/import.cpp: an ONNX graph as an oar program. Each node becomes one oar op or a few (element-wise
// math on floats as one fused_elementwise expression, whose broadcast is numpy's as ONNX's is); initializers
// become parameters (floats, trainable) or persistable constants; nodes whose inputs are all known at import
// time (the shape arithmetic of exported PyTorch models: Shape, Gather, Concat, Unsqueeze ...) are computed
// here and become constants. A node oar cannot run is an UnsupportedError naming it, its op type and the
// opset; any other bad input is an oar::Error naming the node.
#include "src/onnx/importer.hpp"

#include "oar/core/file.hpp"

namespace oar::onnx {

namespace import_detail {

const std::map<std::string, Importer::Handler>& Importer::handlers() {
  using I = Importer;
  static const std::map<std::string, Handler> m = {
      {"Abs", &I::h_unary},          {"Add", &I::h_binary},           {"ArgMax", &I::h_arg},
      {"ArgMin", &I::h_arg},         {"AveragePool", &I::h_pool},     {"BatchNormalization", &I::h_batch_norm},
      {"Cast", &I::h_cast},          {"Clip", &I::h_clip},            {"Concat", &I::h_concat},
      {"Constant", &I::h_constant},  {"ConstantOfShape", &I::h_constant_of_shape},
      {"Conv", &I::h_conv},          {"ConvTranspose", &I::h_conv_transpose},          {"Div", &I::h_binary},           {"Dropout", &I::h_dropout},
      {"Elu", &I::h_elu},            {"Erf", &I::h_unary},            {"Exp", &I::h_unary},
      {"Expand", &I::h_expand},      {"Flatten", &I::h_flatten},      {"Gather", &I::h_gather},
      {"Gemm", &I::h_gemm},          {"Equal", &I::h_compare},        {"Less", &I::h_compare},
      {"Greater", &I::h_compare},    {"LessOrEqual", &I::h_compare},  {"GreaterOrEqual", &I::h_compare},
      {"And", &I::h_logical},        {"Or", &I::h_logical},           {"Xor", &I::h_logical},
      {"Not", &I::h_not},          {"GlobalAveragePool", &I::h_global_pool},
      {"GlobalMaxPool", &I::h_global_pool},
      {"HardSigmoid", &I::h_hard_sigmoid},
      {"HardSwish", &I::h_hard_swish},
      {"Identity", &I::h_identity},  {"LayerNormalization", &I::h_layer_norm},
      {"LeakyRelu", &I::h_leaky_relu},
      {"Log", &I::h_unary},          {"LogSoftmax", &I::h_softmax},   {"MatMul", &I::h_matmul},
      {"Max", &I::h_variadic},       {"MaxPool", &I::h_pool},         {"Mean", &I::h_variadic},
      {"Min", &I::h_variadic},       {"Mul", &I::h_binary},           {"Neg", &I::h_unary},
      {"Pow", &I::h_binary},         {"PRelu", &I::h_prelu},          {"Range", &I::h_range},
      {"Reciprocal", &I::h_unary},   {"ReduceL1", &I::h_reduce},      {"ReduceL2", &I::h_reduce},
      {"ReduceLogSum", &I::h_reduce},
      {"ReduceLogSumExp", &I::h_reduce},
      {"ReduceMax", &I::h_reduce},   {"ReduceMean", &I::h_reduce},    {"ReduceMin", &I::h_reduce},
      {"ReduceSum", &I::h_reduce},   {"ReduceSumSquare", &I::h_reduce},
      {"Relu", &I::h_unary},         {"Reshape", &I::h_reshape},      {"Selu", &I::h_selu},
      {"Shape", &I::h_shape},        {"Sigmoid", &I::h_unary},        {"Size", &I::h_size},
      {"Slice", &I::h_slice},        {"Softmax", &I::h_softmax},      {"Softplus", &I::h_unary},
      {"Floor", &I::h_unary},        {"Ceil", &I::h_unary},           {"Round", &I::h_unary},
      {"Sin", &I::h_unary},          {"Cos", &I::h_unary},            {"Tan", &I::h_unary},
      {"Asin", &I::h_unary},         {"Acos", &I::h_unary},           {"Atan", &I::h_unary},
      {"Sinh", &I::h_unary},         {"Cosh", &I::h_unary},           {"Asinh", &I::h_unary},
      {"Acosh", &I::h_unary},        {"Atanh", &I::h_unary},          {"Sign", &I::h_sign},
      {"Celu", &I::h_celu},          {"Where", &I::h_where},          {"TopK", &I::h_topk},
      {"DepthToSpace", &I::h_depth_space},
      {"SpaceToDepth", &I::h_depth_space},
      {"InstanceNormalization", &I::h_instance_norm},
      {"EyeLike", &I::h_eye_like},   {"IsNaN", &I::h_isnan},          {"IsInf", &I::h_isinf},
      {"Tile", &I::h_tile},          {"LSTM", &I::h_rnn},             {"GRU", &I::h_rnn},          {"CastLike", &I::h_cast_like},   {"Trilu", &I::h_trilu},
      {"Hardmax", &I::h_hardmax},    {"Mod", &I::h_mod},              {"GatherElements", &I::h_gather_elements},
      {"ThresholdedRelu", &I::h_thresholded_relu},
      {"CumSum", &I::h_cumsum},      {"OneHot", &I::h_onehot},        {"ReduceProd", &I::h_reduce},
      {"NegativeLogLikelihoodLoss", &I::h_nll},
      {"Softsign", &I::h_unary},     {"SoftmaxCrossEntropyLoss", &I::h_softmax_xent},     {"Split", &I::h_split},          {"Sqrt", &I::h_unary},
      {"Squeeze", &I::h_squeeze},    {"Sub", &I::h_binary},           {"Sum", &I::h_variadic},
      {"Tanh", &I::h_unary},         {"Transpose", &I::h_transpose},  {"Unsqueeze", &I::h_unsqueeze},
  };
  return m;
}

}  // namespace import_detail

Model import_model_bytes(const std::string& bytes, Place place, const ImportOptions& options, const std::string& what) {
  ::onnx::ModelProto m;
  if (!m.ParseFromString(bytes)) throw Error(fmt::format("{}: not a serialized ONNX model (onnx.ModelProto)", what));
  if (!m.has_graph()) throw Error(fmt::format("{}: the model has no graph", what));
  return import_detail::Importer(m, what, options).run(place);
}

Model import_model(const std::filesystem::path& path, Place place, const ImportOptions& options) {
  return import_model_bytes(oar::detail::read_file(path), place, options, path.string());
}

std::vector<std::string> supported_import_ops() {
  std::vector<std::string> v;
  for (auto& [k, h] : import_detail::Importer::handlers()) v.push_back(k);
  return v;
}

}  // namespace oar::onnx
