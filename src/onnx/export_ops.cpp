// src/onnx/export_ops.cpp: which ONNX nodes each oar op becomes: the dispatch, element-wise math and expressions, shape ops (exporter.hpp).
#include "src/onnx/exporter.hpp"

#include <algorithm>

namespace oar::onnx::export_detail {

std::string Exporter::unary(const std::string& name, float p0, float p1, const std::string& x, DType dt, const Operator& src) {
  static const std::map<std::string, std::string> direct = {{"relu", "Relu"}, {"sigmoid", "Sigmoid"}, {"tanh", "Tanh"}, {"exp", "Exp"},
                                                            {"log", "Log"}, {"sqrt", "Sqrt"}, {"abs", "Abs"}, {"reciprocal", "Reciprocal"},
                                                            {"softsign", "Softsign"}, {"neg", "Neg"}, {"sign", "Sign"}, {"erf", "Erf"},
                                                            {"floor", "Floor"}, {"ceil", "Ceil"}, {"round", "Round"}, {"sin", "Sin"}, {"cos", "Cos"},
                                                            {"tan", "Tan"}, {"asin", "Asin"}, {"acos", "Acos"}, {"atan", "Atan"}, {"sinh", "Sinh"},
                                                            {"cosh", "Cosh"}, {"asinh", "Asinh"}, {"acosh", "Acosh"}, {"atanh", "Atanh"}};
  if (auto it = direct.find(name); it != direct.end()) return apply(it->second, {x}, src);
  if (name == "square") return apply("Mul", {x, x}, src);
  if (name == "softplus") {  // log(1 + e^(beta x)) / beta; the threshold only guards e^x's overflow
    if (p0 == 1) return apply("Softplus", {x}, src);
    return apply("Div", {apply("Softplus", {apply("Mul", {x, scalar(p0, dt)}, src)}, src), scalar(p0, dt)}, src);
  }
  if (name == "gelu") {
    if (p0 == 0) {  // x/2 (1 + erf(x / sqrt 2))
      auto e = apply("Erf", {apply("Div", {x, scalar(std::numbers::sqrt2, dt)}, src)}, src);
      return apply("Mul", {apply("Mul", {x, scalar(0.5, dt)}, src), apply("Add", {e, scalar(1, dt)}, src)}, src);
    }
    // x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
    auto x3 = apply("Mul", {apply("Mul", {x, x}, src), x}, src);
    auto inner = apply("Add", {x, apply("Mul", {x3, scalar(0.044715, dt)}, src)}, src);
    auto t = apply("Tanh", {apply("Mul", {inner, scalar(std::sqrt(2 / std::numbers::pi), dt)}, src)}, src);
    return apply("Mul", {apply("Mul", {x, scalar(0.5, dt)}, src), apply("Add", {t, scalar(1, dt)}, src)}, src);
  }
  if (name == "leaky_relu") {
    std::string o = fresh("t");
    attr(node("LeakyRelu", {x}, {o}, src), "alpha", p0);
    return o;
  }
  if (name == "elu") {
    std::string o = fresh("t");
    attr(node("Elu", {x}, {o}, src), "alpha", p0);
    return o;
  }
  if (name == "relu6") return apply("Clip", {x, scalar(0, dt), scalar(p0, dt)}, src);
  if (name == "clip") return apply("Clip", {x, scalar(p0, dt), scalar(p1, dt)}, src);
  if (name == "hard_sigmoid") {
    std::string o = fresh("t");
    auto& n = node("HardSigmoid", {x}, {o}, src);
    attr(n, "alpha", p0), attr(n, "beta", p1);
    return o;
  }
  if (name == "swish") {  // x sigmoid(beta x)
    auto bx = p0 == 1 ? x : apply("Mul", {x, scalar(p0, dt)}, src);
    return apply("Mul", {x, apply("Sigmoid", {bx}, src)}, src);
  }
  if (name == "pow") return apply("Pow", {x, scalar(p0, dt)}, src);
  fail(src, fmt::format("has no ONNX form for the element-wise function '{}'", name));
}

std::string Exporter::fluid_broadcast_y(const Operator& op, const std::string& xn, const std::string& yn, int axis) {
  const Shape& xs = shape(xn);
  const Shape& ys = shape(yn);
  if (xs == ys || axis == -1 || axis == xs.rank() - ys.rank()) return value(yn);
  int ry = ys.rank();
  while (ry > 0 && ys[ry - 1] == 1) --ry;
  if (ry == 0) return value(yn);  // one value: broadcasts anywhere
  const int target = xs.rank() - axis;  // Y's rank once padded with trailing 1s
  if (target < ry) fail(op, fmt::format("broadcasts Y {} at axis {} over X {}, which ONNX cannot express", ys.str(), axis, xs.str()));
  Shape want;
  for (int i = 0; i < ry; ++i) want.push_back(ys[i]);
  while (want.rank() < target) want.push_back(1);
  if (const Tensor* t = param(yn)) return initializer(t->view(want), yn);  // a bias: reshaped once, here
  const std::string y = value(yn);
  if (want.known()) return apply("Reshape", {y, ints(std::vector<int64_t>(want.begin(), want.end()))}, op, yn);
  std::vector<int64_t> axes;
  for (int i = ys.rank(); i < target; ++i) axes.push_back(i);
  if (ys.rank() > target) fail(op, fmt::format("broadcasts Y {} of unknown dims at axis {} over X {}", ys.str(), axis, xs.str()));
  return apply("Unsqueeze", {y, ints(axes)}, op, yn);
}

void Exporter::fused(const Operator& op) {
  ops::fused::Program prog;
  const auto& xs = op.input("X");
  if (std::string why = ops::fused::parse(op.attr<std::string>("expression"), xs.size(), prog); !why.empty()) fail(op, why);
  const DType dt = dtype(out_var(op, "Out"));
  std::vector<std::string> vals(prog.nodes.size());
  static constexpr const char* kBinary[] = {"Add", "Sub", "Mul", "Div", "Max", "Min", "Pow"};
  for (size_t i = 0; i < prog.nodes.size(); ++i) {
    const auto& n = prog.nodes[i];
    switch (n.kind) {
      case ops::fused::Kind::input: vals[i] = value(xs[size_t(n.input)]); break;
      case ops::fused::Kind::constant: vals[i] = scalar(n.value, dt); break;
      case ops::fused::Kind::unary:
        vals[i] = unary(std::string(ops::fused::unary_tokens[n.code].name), n.p0, n.p1, vals[size_t(n.a)], dt, op);
        break;
      case ops::fused::Kind::binary: vals[i] = apply(kBinary[n.code], {vals[size_t(n.a)], vals[size_t(n.b)]}, op); break;
    }
  }
  std::string result = vals.back();
  if (prog.nodes.back().kind != ops::fused::Kind::binary && prog.nodes.back().kind != ops::fused::Kind::unary)
    result = apply("Identity", {result}, op);
  bind(out_var(op, "Out"), result);
}

void Exporter::emit(const Operator& op) {
  const std::string& t = op.type();
  if (t == "feed" || t == "fetch") return;
  // Before the sequence ops' dispatch: over LoD rows too, the cache is what cannot be exported.
  if (t == "kv_cache") fail(op, "keeps a decoder's keys and values between runs, which an ONNX graph cannot (export the model without the cache)");
  if (t == "lstm" || t == "gru") return rnn(op);
  if (t == "sequence_pool") return sequence_pool(op);
  if (t == "scaled_dot_product_attention") return attention(op);
  if (t == "add_position_encoding" || t == "rotary_position_embedding") return position(op);
  bool reads_seq = false;
  for (auto& n : op.input_names()) {
    if (seq_bad_.count(n)) fail(op, fmt::format("reads the LSTM's per-step cell '{}', which is not exported", n));
    reads_seq = reads_seq || is_seq(n);
  }
  if (reads_seq) return row_wise(op);
  emit_dense(op);
}

void Exporter::emit_dense(const Operator& op) {
  const std::string& t = op.type();
  static const std::map<std::string, std::string> binary = {{"elementwise_add", "Add"}, {"elementwise_sub", "Sub"}, {"elementwise_mul", "Mul"},
                                                            {"elementwise_div", "Div"}, {"elementwise_max", "Max"}, {"elementwise_min", "Min"},
                                                            {"elementwise_pow", "Pow"}};
  if (auto it = binary.find(t); it != binary.end()) {
    const auto& xn = op.input("X").at(0);
    auto y = fluid_broadcast_y(op, xn, op.input("Y").at(0), op.attr_or<int32_t>("axis", -1));
    bind(out_var(op, "Out"), apply(it->second, {value(xn), y}, op));
    return;
  }
  static const std::set<std::string> unary_ops = {"relu", "sigmoid", "tanh", "exp", "log", "sqrt", "abs", "square", "reciprocal", "softplus",
                                                  "softsign", "gelu", "erf", "floor", "ceil", "round", "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh",
                                                  "asinh", "acosh", "atanh", "leaky_relu", "elu", "relu6", "hard_sigmoid", "swish", "pow", "clip", "sign"};
  if (unary_ops.count(t)) {
    // The parameters in the order of ops/unary_list.hpp (through the fused grammar's token table).
    float p[2] = {0, 0};
    for (const auto& tok : ops::fused::unary_tokens)
      if (tok.name == t)
        for (int k = 0; k < 2; ++k) {
          p[k] = tok.p[k].dflt;
          if (!tok.p[k].name.empty() && op.has_attr(tok.p[k].name))
            p[k] = tok.p[k].is_bool ? float(op.attr<bool>(tok.p[k].name)) : op.attr<float>(tok.p[k].name);
        }
    static const std::map<std::string, std::pair<std::string, std::string>> names = {
        {"leaky_relu", {"alpha", ""}}, {"elu", {"alpha", ""}}, {"relu6", {"threshold", ""}}, {"hard_sigmoid", {"slope", "offset"}},
        {"swish", {"beta", ""}}, {"pow", {"factor", ""}}, {"clip", {"min", "max"}}};
    if (auto it = names.find(t); it != names.end()) {
      if (op.has_attr(it->second.first)) p[0] = op.attr<float>(it->second.first);
      if (!it->second.second.empty() && op.has_attr(it->second.second)) p[1] = op.attr<float>(it->second.second);
    }
    const auto& x = op.input("X").at(0);
    bind(out_var(op, "Out"), unary(t, p[0], p[1], value(x), dtype(x), op));
    return;
  }
  if (t == "fused_elementwise") return fused(op);
  if (t == "mul") return mul(op);
  if (t == "matmul") return matmul(op);
  if (t == "conv2d" || t == "conv2d_fusion") return conv(op);
  if (t == "pool2d") return pool(op);
  if (t == "batch_norm") {
    if (op.attr_or<std::string>("data_layout", "NCHW") != "NCHW") fail(op, "has data_layout other than NCHW");
    std::string o = fresh("t");
    auto& n = node("BatchNormalization", {in(op, "X"), in(op, "Scale"), in(op, "Bias"), in(op, "Mean"), in(op, "Variance")}, {o}, op);
    attr(n, "epsilon", op.attr<float>("epsilon"));
    attr(n, "momentum", op.attr<float>("momentum"));
    return bind(out_var(op, "Y"), o);
  }
  if (t == "layer_norm") return layer_norm(op);
  if (t == "softmax" || t == "log_softmax") {
    std::string o = fresh("t");
    attr(node(t == "softmax" ? "Softmax" : "LogSoftmax", {in(op, "X")}, {o}, op), "axis", int64_t(op.attr_or<int32_t>("axis", -1)));
    return bind(out_var(op, "Out"), o);
  }
  if (t == "scale") {
    const auto& xn = op.input("X").at(0);
    const DType dt = dtype(xn);
    std::string x = value(xn);
    const double s = op.attr<float>("scale"), b = op.attr<float>("bias");
    const bool after = op.attr_or<bool>("bias_after_scale", true);
    if (!after && b != 0) x = apply("Add", {x, scalar(b, dt)}, op);
    if (s != 1) x = apply("Mul", {x, scalar(s, dt)}, op);
    if (after && b != 0) x = apply("Add", {x, scalar(b, dt)}, op);
    if (s == 1 && b == 0) x = apply("Identity", {x}, op);
    return bind(out_var(op, "Out"), x);
  }
  if (t == "dropout") {  // inference: downgrade_in_infer scales by 1 - p, upscale_in_train passes X through
    const auto& xn = op.input("X").at(0);
    const float p = op.attr<float>("dropout_prob");
    std::string x = value(xn);
    if (op.attr_or<std::string>("dropout_implementation", "downgrade_in_infer") == "downgrade_in_infer" && p != 0)
      x = apply("Mul", {x, scalar(1.0 - p, dtype(xn))}, op);
    else
      x = apply("Identity", {x}, op);
    return bind(out_var(op, "Out"), x);
  }
  if (t == "reshape") {
    std::vector<int64_t> s;
    for (auto d : op.attr<std::vector<int32_t>>("shape")) s.push_back(d);
    return bind(out_var(op, "Out"), apply("Reshape", {in(op, "X"), ints(s)}, op));
  }
  if (t == "transpose") {
    std::string o = fresh("t");
    attr(node("Transpose", {in(op, "X")}, {o}, op), "perm", i64(op.attr<std::vector<int32_t>>("axis")));
    return bind(out_var(op, "Out"), o);
  }
  if (t == "flatten") {
    std::string o = fresh("t");
    attr(node("Flatten", {in(op, "X")}, {o}, op), "axis", int64_t(op.attr<int32_t>("axis")));
    return bind(out_var(op, "Out"), o);
  }
  if (t == "concat") {
    std::vector<std::string> xs;
    for (auto& x : op.input("X")) xs.push_back(value(x));
    std::string o = fresh("t");
    attr(node("Concat", xs, {o}, op), "axis", int64_t(op.attr<int32_t>("axis")));
    return bind(out_var(op, "Out"), o);
  }
  if (t == "sum") {
    std::vector<std::string> xs;
    for (auto& x : op.input("X")) xs.push_back(value(x));
    return bind(out_var(op, "Out"), apply(xs.size() == 1 ? "Identity" : "Sum", xs, op));
  }
  if (t == "mean") {  // Fluid's mean is [1]
    std::string o = fresh("t");
    attr(node("ReduceMean", {in(op, "X")}, {o}, op), "keepdims", int64_t(0));
    return bind(out_var(op, "Out"), apply("Reshape", {o, ints({1})}, op));
  }
  if (t == "squared_l2_norm") {  // Fluid's [1]
    std::string o = fresh("t");
    attr(node("ReduceSumSquare", {in(op, "X")}, {o}, op), "keepdims", int64_t(0));
    return bind(out_var(op, "Out"), apply("Reshape", {o, ints({1})}, op));
  }
  if (t == "split") {
    const auto& xn = op.input("X").at(0);
    const Shape& xs = shape(xn);
    const auto& outs = op.output("Out");
    int64_t axis = op.attr<int32_t>("axis");
    if (axis < 0) axis += xs.rank();
    std::vector<std::string> args{value(xn)}, vals;
    if (!op.attr<std::vector<int32_t>>("sections").empty()) {  // Split's sizes are exact: a -1 section must be known by now
      std::vector<int64_t> sizes;
      for (auto& o : outs) sizes.push_back(shape(o)[int(axis)]);
      if (std::ranges::any_of(sizes, [](int64_t n) { return n < 0; }))
        fail(op, fmt::format("splits X {} into sections [{}] whose sizes are not known before it runs", xs.str(), fmt::join(sizes, ", ")));
      args.push_back(ints(sizes));
    }  // else equal pieces, one per output: Split's default
    for (auto& o : outs) vals.push_back(define(o));
    attr(node("Split", args, vals, op), "axis", axis);
    return;
  }
  if (t == "top_k") {  // TopK's defaults (largest, sorted, lower index first on ties) are oar's order
    std::vector<std::string> args{in(op, "X"), ints({op.attr<int32_t>("k")})};
    std::vector<std::string> vals{define(out_var(op, "Out")), define(out_var(op, "Indices"))};
    attr(node("TopK", args, vals, op), "axis", int64_t(-1));
    return;
  }
  if (t == "cross_entropy") return cross_entropy(op);
  if (t == "assign") return bind(out_var(op, "Out"), apply("Identity", {in(op, "X")}, op));
  if (t == "lookup_table") return lookup(op);
  if (t == "cast") {
    std::string o = fresh("t");
    attr(node("Cast", {in(op, "X")}, {o}, op), "to", int64_t(detail::onnx_type(DType(op.attr<int32_t>("out_dtype")), "cast")));
    return bind(out_var(op, "Out"), o);
  }
  if (t == "squeeze" || t == "unsqueeze") {
    auto axes = i64(op.attr<std::vector<int32_t>>("axes"));
    std::vector<std::string> args{in(op, "X")};
    if (!axes.empty()) args.push_back(ints(axes));
    return bind(out_var(op, "Out"), apply(t == "squeeze" ? "Squeeze" : "Unsqueeze", args, op));
  }
  if (t == "slice") {
    auto v = [&](const char* k) { return ints(i64(op.attr<std::vector<int32_t>>(k))); };
    return bind(out_var(op, "Out"), apply("Slice", {in(op, "Input"), v("starts"), v("ends"), v("axes")}, op));
  }
  if (t == "gather") return bind(out_var(op, "Out"), apply("Gather", {in(op, "X"), in(op, "Index")}, op));
  if (t == "reduce_sum" || t == "reduce_mean" || t == "reduce_max" || t == "reduce_min") return reduce(op);
  if (t == "arg_max" || t == "arg_min") {
    std::string o = fresh("t");
    auto& n = node(t == "arg_max" ? "ArgMax" : "ArgMin", {in(op, "X")}, {o}, op);
    attr(n, "axis", op.attr<int64_t>("axis")), attr(n, "keepdims", int64_t(op.attr<bool>("keepdims")));
    return bind(out_var(op, "Out"), o);
  }
  if (t == "stack") {
    const int64_t axis = op.attr<int32_t>("axis");
    std::vector<std::string> xs;
    for (auto& x : op.input("X")) xs.push_back(apply("Unsqueeze", {value(x), ints({axis})}, op));
    std::string o = fresh("t");
    attr(node("Concat", xs, {o}, op), "axis", axis);
    return bind(out_var(op, "Y"), o);
  }
  if (t == "softmax_with_cross_entropy") return softmax_xent(op);
  static const std::map<std::string, std::string> compare = {{"less_than", "Less"}, {"less_equal", "LessOrEqual"}, {"greater_than", "Greater"},
                                                             {"greater_equal", "GreaterOrEqual"}, {"equal", "Equal"}, {"not_equal", "Equal"}};
  if (auto it = compare.find(t); it != compare.end()) {
    const auto& xn = op.input("X").at(0);
    auto y = fluid_broadcast_y(op, xn, op.input("Y").at(0), op.attr_or<int32_t>("axis", -1));
    std::string o = apply(it->second, {value(xn), y}, op);
    if (t == "not_equal") o = apply("Not", {o}, op);
    return bind(out_var(op, "Out"), o);
  }
  static const std::map<std::string, std::string> logical = {{"logical_and", "And"}, {"logical_or", "Or"}, {"logical_xor", "Xor"}};
  if (auto it = logical.find(t); it != logical.end()) return bind(out_var(op, "Out"), apply(it->second, {in(op, "X"), in(op, "Y")}, op));
  if (t == "logical_not") return bind(out_var(op, "Out"), apply("Not", {in(op, "X")}, op));
  if (t == "sigmoid_cross_entropy_with_logits") {  // max(x, 0) - x l + log(1 + e^-|x|); 0 where l is ignore_index
    const auto& xn = op.input("X").at(0);
    std::string x = value(xn), l = in(op, "Label");
    std::string o = apply("Add", {apply("Sub", {apply("Relu", {x}, op), apply("Mul", {x, l}, op)}, op),
                                  apply("Softplus", {apply("Neg", {apply("Abs", {x}, op)}, op)}, op)}, op);
    const int32_t ii = op.attr_or<int32_t>("ignore_index", -100);
    if (ii != -100) o = apply("Where", {apply("Equal", {l, scalar(ii, dtype(xn))}, op), scalar(0, dtype(xn)), o}, op);
    return bind(out_var(op, "Out"), o);
  }
  if (t == "conv2d_transpose") {
    if (op.attr_or<std::string>("data_format", "NCHW") != "NCHW") fail(op, "has a data_format other than NCHW");
    const Shape& fs = shape(op.input("Filter").at(0));
    auto p = op.attr<std::vector<int32_t>>("paddings");
    std::string o = fresh("t");
    auto& n = node("ConvTranspose", {in(op, "Input"), in(op, "Filter")}, {o}, op);
    attr(n, "kernel_shape", std::vector<int64_t>{fs[2], fs[3]});
    attr(n, "pads", std::vector<int64_t>{p[0], p[1], p[0], p[1]});
    attr(n, "strides", i64(op.attr<std::vector<int32_t>>("strides")));
    attr(n, "dilations", i64(op.attr<std::vector<int32_t>>("dilations")));
    attr(n, "group", int64_t(op.attr<int32_t>("groups")));
    const auto os = op.attr<std::vector<int32_t>>("output_size");
    if (!os.empty()) attr(n, "output_shape", i64(os));
    return bind(out_var(op, "Output"), o);
  }
  if (t == "one_hot") {  // X [N, 1] of class indices -> [N, depth] of 0 and 1
    const DType dt = DType(op.attr_or<int32_t>("dtype", int32_t(DType::f32)));
    std::string ids = apply("Squeeze", {in(op, "X"), ints({-1})}, op);
    Tensor vals(Shape{2}, dt);
    if (dt == DType::f64) vals.data<double>()[0] = 0, vals.data<double>()[1] = 1;
    else if (dt == DType::f32) vals.data<float>()[0] = 0, vals.data<float>()[1] = 1;
    else fail(op, fmt::format("has dtype {} (exported for f32 and f64)", name(dt)));
    std::string o = fresh("t");
    attr(node("OneHot", {ids, ints({op.attr<int32_t>("depth")}), initializer(vals, "one_hot_values")}, {o}, op), "axis", int64_t(-1));
    return bind(out_var(op, "Out"), o);
  }
  if (t == "fill_constant") {
    std::vector<int64_t> dims;
    for (auto v : op.attr<std::vector<int64_t>>("shape")) dims.push_back(v);
    const DType dt = DType(op.attr_or<int32_t>("dtype", int32_t(DType::f32)));
    Tensor c(Shape(dims), dt);
    const double v = op.attr<float>("value");
    for (int64_t i = 0; i < c.numel(); ++i)
      visit_dtype(dt, [&](auto tag) {
        using T = typename decltype(tag)::type;
        if constexpr (std::is_arithmetic_v<T>) c.data<T>()[i] = static_cast<T>(v);
        else fail(op, fmt::format("has dtype {}", name(dt)));
      });
    const std::string& o = out_var(op, "Out");
    return bind(o, apply("Identity", {initializer(c, o)}, op));
  }
  fail(op, "has no ONNX equivalent in this exporter");
}

}  // namespace oar::onnx::export_detail
