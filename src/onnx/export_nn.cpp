// src/onnx/export_nn.cpp: matrix products, convolution, pooling, layer_norm, embedding, reductions and the cross-entropy losses as ONNX nodes (exporter.hpp).
#include "src/onnx/exporter.hpp"

namespace oar::onnx::export_detail {

void Exporter::softmax_xent(const Operator& op) {
  if (op.attr_or<bool>("soft_label", false)) fail(op, "has soft labels (ONNX's SoftmaxCrossEntropyLoss takes class indices)");
  const auto& ln = op.input("Logits").at(0);
  const auto& yn = op.input("Label").at(0);
  if (shape(ln).rank() != 2) fail(op, fmt::format("has Logits {} (exported for [N, C])", shape(ln).str()));
  std::string logits = value(ln), label = value(yn);
  if (shape(yn).rank() == 2) label = apply("Squeeze", {label, ints({1})}, op);
  std::string loss = fresh("t");
  auto& n = node("SoftmaxCrossEntropyLoss", {logits, label}, {loss}, op);
  attr(n, "reduction", std::string("none"));
  const int32_t ignore = op.attr_or<int32_t>("ignore_index", -100);
  if (ignore >= 0) attr(n, "ignore_index", int64_t(ignore));
  bind(out_var(op, "Loss"), apply("Unsqueeze", {loss, ints({1})}, op));
  if (op.has_output("Softmax")) {
    std::string sm = fresh("t");
    attr(node("Softmax", {logits}, {sm}, op), "axis", int64_t(-1));
    bind(out_var(op, "Softmax"), sm);
  }
}

void Exporter::cross_entropy(const Operator& op) {
  const auto& xn = op.input("X").at(0);
  const auto& ln = op.input("Label").at(0);
  const DType dt = dtype(xn);
  const std::string x = value(xn), label = value(ln);
  // Fluid's TolerableValue (kernels/cpu/cross_entropy.hpp): -log 0 is 1e20, so that a 0 label times it stays 0.
  auto neg_log = [&](const std::string& v) { return apply("Clip", {apply("Neg", {apply("Log", {v}, op)}, op), scalar(-1e20, dt), scalar(1e20, dt)}, op); };
  if (op.attr_or<bool>("soft_label", false)) {  // -sum_j label_j log x_j over the last dim, kept as size 1
    std::string o = fresh("t");
    attr(node("ReduceSum", {apply("Mul", {label, neg_log(x)}, op), ints({-1})}, {o}, op), "keepdims", int64_t(1));
    return bind(out_var(op, "Y"), o);
  }
  // -log x at the label; a label equal to ignore_index gives 0 and is gathered at index 0 to stay in range.
  const DType lt = dtype(ln);
  const std::string skip = apply("Equal", {label, scalar(op.attr_or<int32_t>("ignore_index", -100), lt)}, op);
  std::string picked = fresh("t");
  attr(node("GatherElements", {x, apply("Where", {skip, scalar(0, lt), label}, op)}, {picked}, op), "axis", int64_t(-1));
  bind(out_var(op, "Y"), apply("Where", {skip, scalar(0, dt), neg_log(picked)}, op));
}

void Exporter::mul(const Operator& op) {
  const auto& xn = op.input("X").at(0);
  const auto& yn = op.input("Y").at(0);
  const Shape& xs = shape(xn);
  const Shape& ys = shape(yn);
  const int xk = op.attr<int32_t>("x_num_col_dims"), yk = op.attr<int32_t>("y_num_col_dims");
  std::string x = value(xn), y;
  // Y as a matrix [prod(dims < yk), prod(dims >= yk)].
  if (ys.rank() == 2 && yk == 1) {
    y = value(yn);
  } else if (const Tensor* t = param(yn)) {
    y = initializer(t->view(Shape{ys.numel(0, yk), ys.numel(yk, ys.rank())}), yn);
  } else {
    fail(op, fmt::format("multiplies by Y {} (y_num_col_dims {}) that is not a parameter", ys.str(), yk));
  }
  if (ys.rank() > yk + 1) fail(op, fmt::format("has Y {} with more than one output dim", ys.str()));
  // X flattened to [dims < xk..., prod(dims >= xk)]: MatMul then broadcasts over the leading dims, giving
  // Fluid's output dims (X's first xk, then Y's last).
  if (xs.rank() > xk + 1) {
    if (xk == 1) {
      std::string o = fresh("t");
      attr(node("Flatten", {x}, {o}, op), "axis", int64_t(1));
      x = o;
    } else {
      std::vector<int64_t> s(size_t(xk), 0);
      s.push_back(-1);
      x = apply("Reshape", {x, ints(s)}, op);
    }
  }
  bind(out_var(op, "Out"), apply("MatMul", {x, y}, op));
}

void Exporter::matmul(const Operator& op) {
  const auto& xn = op.input("X").at(0);
  const auto& yn = op.input("Y").at(0);
  auto side = [&](const std::string& n, bool tr) {
    std::string v = value(n);
    const int r = shape(n).rank();
    if (!tr || r < 2) return v;
    std::vector<int64_t> perm;
    for (int i = 0; i < r; ++i) perm.push_back(i);
    std::swap(perm[size_t(r - 1)], perm[size_t(r - 2)]);
    std::string o = fresh("t");
    attr(node("Transpose", {v}, {o}, op), "perm", perm);
    return o;
  };
  std::string o = apply("MatMul", {side(xn, op.attr<bool>("transpose_X")), side(yn, op.attr<bool>("transpose_Y"))}, op);
  const float alpha = op.attr<float>("alpha");
  if (alpha != 1) o = apply("Mul", {o, scalar(alpha, dtype(xn))}, op);
  bind(out_var(op, "Out"), o);
}

void Exporter::conv(const Operator& op) {
  if (op.attr_or<std::string>("data_format", "NCHW") != "NCHW") fail(op, "has a data_format other than NCHW");
  const auto& fn = op.input("Filter").at(0);
  const Shape& fs = shape(fn);
  auto p = op.attr<std::vector<int32_t>>("paddings");
  std::vector<std::string> args{in(op, "Input"), value(fn)};
  const bool fusion = op.type() == "conv2d_fusion";
  if (fusion) args.push_back(in(op, "Bias"));
  std::string o = fresh("t");
  auto& n = node("Conv", args, {o}, op);
  attr(n, "kernel_shape", std::vector<int64_t>{fs[2], fs[3]});
  attr(n, "pads", std::vector<int64_t>{p[0], p[1], p[0], p[1]});
  attr(n, "strides", i64(op.attr<std::vector<int32_t>>("strides")));
  attr(n, "dilations", i64(op.attr<std::vector<int32_t>>("dilations")));
  attr(n, "group", int64_t(op.attr<int32_t>("groups")));
  if (fusion && op.attr<std::string>("activation") == "relu") o = apply("Relu", {o}, op);
  bind(out_var(op, "Output"), o);
}

void Exporter::pool(const Operator& op) {
  if (op.attr_or<std::string>("data_format", "NCHW") != "NCHW") fail(op, "has a data_format other than NCHW");
  const bool max = op.attr<std::string>("pooling_type") == "max";
  const auto k = i64(op.attr<std::vector<int32_t>>("ksize"));
  const bool global = op.attr<bool>("global_pooling") || (op.attr<bool>("adaptive") && k == std::vector<int64_t>{1, 1});
  if (global) return bind(out_var(op, "Out"), apply(max ? "GlobalMaxPool" : "GlobalAveragePool", {in(op, "X")}, op));
  if (op.attr<bool>("adaptive")) fail(op, fmt::format("pools adaptively to {}x{} (ONNX has only the global form)", k[0], k[1]));
  auto p = op.attr<std::vector<int32_t>>("paddings");
  std::string o = fresh("t");
  auto& n = node(max ? "MaxPool" : "AveragePool", {in(op, "X")}, {o}, op);
  attr(n, "kernel_shape", k);
  attr(n, "pads", std::vector<int64_t>{p[0], p[1], p[0], p[1]});
  attr(n, "strides", i64(op.attr<std::vector<int32_t>>("strides")));
  if (op.attr<bool>("ceil_mode")) attr(n, "ceil_mode", int64_t(1));
  if (!max) attr(n, "count_include_pad", int64_t(op.attr<bool>("exclusive") ? 0 : 1));
  bind(out_var(op, "Out"), o);
}

void Exporter::layer_norm(const Operator& op) {
  const auto& xn = op.input("X").at(0);
  const Shape& xs = shape(xn);
  const int axis = op.attr<int32_t>("begin_norm_axis");
  const DType dt = dtype(xn);
  Shape norm;
  for (int i = axis; i < xs.rank(); ++i) norm.push_back(xs[i]);
  if (!norm.known()) fail(op, fmt::format("normalizes dims of unknown size of X {}", xs.str()));
  // oar keeps Scale and Bias flat ([prod(norm)]); ONNX wants them broadcastable to the normalized dims.
  auto affine = [&](std::string_view slot, double fill) {
    const auto& a = op.input(slot);
    if (a.empty()) {
      Tensor t(norm, dt);
      for (int64_t i = 0; i < t.numel(); ++i) dt == DType::f64 ? void(t.data<double>()[i] = fill) : void(t.data<float>()[i] = float(fill));
      return initializer(t, std::string(slot) == "Scale" ? "ln_scale" : "ln_bias");
    }
    if (const Tensor* t = param(a[0])) return norm.rank() == 1 ? value(a[0]) : initializer(t->view(norm), a[0]);
    return apply("Reshape", {value(a[0]), ints(std::vector<int64_t>(norm.begin(), norm.end()))}, op);
  };
  const float eps = op.attr<float>("epsilon");
  if (opt_.opset >= 17) {
    std::string o = fresh("t");
    auto& n = node("LayerNormalization", {value(xn), affine("Scale", 1), affine("Bias", 0)}, {o}, op);
    attr(n, "axis", int64_t(axis)), attr(n, "epsilon", eps);
    return bind(out_var(op, "Y"), o);
  }
  // Before opset 17: (x - mean) / sqrt(var + eps) * scale + bias over the last dims.
  std::vector<int64_t> axes;
  for (int i = axis; i < xs.rank(); ++i) axes.push_back(i);
  auto reduce_mean = [&](const std::string& v) {
    std::string o = fresh("t");
    attr(node("ReduceMean", {v}, {o}, op), "axes", axes);
    return o;
  };
  std::string x = value(xn);
  auto d = apply("Sub", {x, reduce_mean(x)}, op);
  auto var = reduce_mean(apply("Mul", {d, d}, op));
  auto y = apply("Div", {d, apply("Sqrt", {apply("Add", {var, scalar(eps, dt)}, op)}, op)}, op);
  y = apply("Add", {apply("Mul", {y, affine("Scale", 1)}, op), affine("Bias", 0)}, op);
  bind(out_var(op, "Y"), y);
}

void Exporter::lookup(const Operator& op) {
  const auto& wn = op.input("W").at(0);
  const auto& idn = op.input("Ids").at(0);
  const int64_t pad = op.attr<int64_t>("padding_idx");
  std::string w;
  if (pad >= 0) {  // the padding row reads as zeros: export a table whose row is zero
    const Tensor* t = param(wn);
    if (!t) fail(op, "has a padding_idx and a table that is not a parameter");
    Tensor c = t->to(cpu(), true);
    const int64_t width = c.numel() / c.dim(0);
    std::memset(static_cast<char*>(c.raw()) + size_t(pad * width) * size_of(c.dtype()), 0, size_t(width) * size_of(c.dtype()));
    w = initializer(c, wn);
  } else {
    w = value(wn);
  }
  std::string ids = value(idn);
  const Shape& is = shape(idn);
  if (is.rank() >= 2 && is[is.rank() - 1] == 1) ids = apply("Squeeze", {ids, ints({-1})}, op);  // Fluid's [N, 1] ids
  bind(out_var(op, "Out"), apply("Gather", {w, ids}, op));
}

void Exporter::reduce(const Operator& op) {
  static const std::map<std::string, std::string> names = {
      {"reduce_sum", "ReduceSum"}, {"reduce_mean", "ReduceMean"}, {"reduce_max", "ReduceMax"}, {"reduce_min", "ReduceMin"}};
  const auto& xn = op.input("X").at(0);
  const Shape& xs = shape(xn);
  std::vector<int64_t> axes;
  if (op.attr<bool>("reduce_all"))
    for (int i = 0; i < xs.rank(); ++i) axes.push_back(i);
  else
    for (auto d : op.attr<std::vector<int32_t>>("dim")) axes.push_back(d < 0 ? d + xs.rank() : d);
  const bool keep = op.attr<bool>("keep_dim");
  std::string o = fresh("t");
  const std::string& type = names.at(op.type());
  NodeProto* n;
  if (type == "ReduceSum") {  // its axes are an input from opset 13
    n = &node(type, {value(xn), ints(axes)}, {o}, op);
  } else {
    n = &node(type, {value(xn)}, {o}, op);
    attr(*n, "axes", axes);
  }
  attr(*n, "keepdims", int64_t(keep));
  if (!keep && axes.size() == size_t(xs.rank())) o = apply("Reshape", {o, ints({1})}, op);  // Fluid's [1]
  bind(out_var(op, "Out"), o);
}

}  // namespace oar::onnx::export_detail
