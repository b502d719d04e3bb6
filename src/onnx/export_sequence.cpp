// src/onnx/export_sequence.cpp: sequences (LoD level 1) as padded tensors with their lengths: row-wise ops, lstm / gru as ONNX LSTM / GRU, sequence_pool (exporter.hpp).
#include "src/onnx/exporter.hpp"

namespace oar::onnx::export_detail {

void Exporter::row_wise(const Operator& op) {
  const std::string& t = op.type();
  static const std::set<std::string> rows = {"lookup_table", "mul", "elementwise_add", "elementwise_sub", "elementwise_mul", "elementwise_div",
                                             "fused_elementwise", "scale", "dropout", "softmax", "log_softmax", "relu", "sigmoid", "tanh",
                                             "exp", "log", "sqrt", "abs", "square", "softplus", "softsign", "gelu", "leaky_relu", "elu",
                                             "relu6", "hard_sigmoid", "swish", "pow", "clip", "cross_entropy", "reshape"};
  if (!rows.count(t))
    fail(op, "reads a sequence, and only row-wise ops, lstm, gru, sequence_pool, attention and the position ops are exported over sequences");
  for (auto& n : op.input_names()) {  // a dense operand must broadcast over every row alike: a parameter
    if (is_seq(n) || param(n)) continue;
    fail(op, fmt::format("mixes the sequence with '{}', which is neither a sequence nor a parameter", n));
  }
  if (t == "mul" && op.attr<int32_t>("x_num_col_dims") != 1) fail(op, "flattens a sequence's rows (x_num_col_dims != 1)");
  if ((t == "softmax" || t == "log_softmax") && op.attr_or<int32_t>("axis", -1) != -1 && op.attr_or<int32_t>("axis", -1) != 1)
    fail(op, "normalizes across a sequence's rows");
  std::string first;  // the rows' lengths: a row-wise op over two sequences pairs their rows, so any one's
  for (auto& n : op.input_names())
    if (first.empty() && is_seq(n)) first = n;
  for (auto& n : op.output_names()) mark_seq(n, first);  // before emitting: bind() keeps the name
  if (t == "reshape") return row_reshape(op);
  emit_dense(op);
}

void Exporter::row_reshape(const Operator& op) {
  const auto& xn = op.input("X").at(0);
  const Shape& xs = shape(xn);
  const auto s = op.attr<std::vector<int32_t>>("shape");
  // The rows stay rows when dim 0 copies the row count (0), or is inferred (-1) from row dims that keep their size.
  bool keeps = !s.empty() && s[0] == 0;
  if (!s.empty() && s[0] == -1) {
    int64_t row = 1, want = 1;
    for (int i = 1; i < xs.rank(); ++i) row = xs[i] < 0 || row < 0 ? -1 : row * xs[i];
    for (size_t i = 1; i < s.size(); ++i) {
      const int64_t d = s[i] == 0 ? (int(i) < xs.rank() ? xs[int(i)] : -1) : s[i];
      want = d < 0 || want < 0 ? -1 : want * d;
    }
    keeps = row >= 0 && row == want;
  }
  if (!keeps)
    fail(op, fmt::format("reshapes the rows of a sequence {} to [{}], which need not keep one row per step (dim 0 must be 0, or -1 with the rows' size kept)",
                         xs.str(), fmt::join(s, ", ")));
  // Padded [batch, max_len, row dims...]: the two leading dims copied, a 0 in the row dims still copying its own.
  std::vector<int64_t> p = {0, 0};
  for (size_t i = 1; i < s.size(); ++i) p.push_back(s[i]);
  bind(out_var(op, "Out"), apply("Reshape", {value(xn), ints(p)}, op));
}

std::string Exporter::step_mask(const std::string& x, const std::string& lengths, DType dt, const Operator& op) {
  auto shp = apply("Shape", {x}, op);
  auto t = apply("Gather", {shp, ints({1})}, op);  // [1]: max_len
  auto tl = apply("Squeeze", {t, ints({0})}, op);
  auto range = apply("Range", {scalar(0, DType::i64), tl, scalar(1, DType::i64)}, op);
  auto less = apply("Less", {apply("Unsqueeze", {range, ints({0})}, op), apply("Unsqueeze", {lengths, ints({1})}, op)}, op);
  std::string o = fresh("t");
  attr(node("Cast", {less}, {o}, op), "to", int64_t(detail::onnx_type(dt, "mask")));
  return o;
}

void Exporter::rnn(const Operator& op) {
  const bool lstm = op.type() == "lstm";
  const auto& xn = op.input("Input").at(0);
  if (!is_seq(xn)) fail(op, "runs over an input that is not an exported sequence");
  const Tensor* w = param(op.input("Weight").at(0));
  if (!w) fail(op, "has a Weight that is not a parameter");
  const Tensor* b = op.has_input("Bias") ? param(op.input("Bias").at(0)) : nullptr;
  if (op.has_input("Bias") && !b) fail(op, "has a Bias that is not a parameter");
  const DType dt = w->dtype();
  const int64_t h = w->dim(0), g = lstm ? 4 : 3;
  Tensor wc = w->to(cpu()), bc = b ? b->to(cpu()) : Tensor();
  auto wv = [&](int64_t r, int64_t c) { return wc.get(r * g * h + c); };
  auto bv = [&](int64_t c) { return b ? bc.get(c) : 0.0; };
  // ONNX gate k <- oar gate src[k], with sign sgn[k]
  std::vector<int64_t> src = lstm ? std::vector<int64_t>{1, 3, 2, 0} : std::vector<int64_t>{0, 1, 2};
  std::vector<double> sgn = lstm ? std::vector<double>{1, 1, 1, 1} : std::vector<double>{-1, 1, 1};
  std::vector<double> W(size_t(g * h * g * h), 0.0), R(size_t(g * h * h), 0.0), B(size_t(2 * g * h), 0.0);
  for (int64_t k = 0; k < g; ++k)
    for (int64_t j = 0; j < h; ++j) {
      const int64_t row = k * h + j, col = src[size_t(k)] * h + j;
      W[size_t(row * g * h + col)] = sgn[size_t(k)];
      B[size_t(row)] = sgn[size_t(k)] * bv(col);
      for (int64_t i = 0; i < h; ++i) {
        double r;
        if (lstm) r = wv(i, col);
        else if (k < 2) r = wc.get(i * 2 * h + col);  // GRU: W_ur [D, 2D] first, then W_c [D, D]
        else r = wc.get(2 * h * h + i * h + j);
        R[size_t(row * h + i)] = sgn[size_t(k)] * r;
      }
    }
  auto tensor = [&](const std::vector<double>& v, Shape s) {
    Tensor t(s, dt);
    for (size_t i = 0; i < v.size(); ++i) dt == DType::f64 ? void(t.data<double>()[i] = v[i]) : void(t.data<float>()[i] = float(v[i]));
    return t;
  };
  const std::string base = op.input("Weight").at(0);
  std::string steps = fresh("t"), lens = fresh("t");  // [max_len, batch, G]; sequence_lens is int32
  attr(node("Transpose", {value(xn)}, {steps}, op), "perm", std::vector<int64_t>{1, 0, 2});
  attr(node("Cast", {lengths_of(xn)}, {lens}, op), "to", int64_t(::onnx::TensorProto::INT32));
  std::vector<std::string> in = {steps, initializer(tensor(W, {1, g * h, g * h}), base + "_W"), initializer(tensor(R, {1, g * h, h}), base + "_R"),
                                 initializer(tensor(B, {1, 2 * g * h}), base + "_B"), lens};
  // H0 and C0 [batch, D] (one row per sequence, in batch order) as initial_h / initial_c [1, batch, D].
  auto initial = [&](std::string_view slot) {
    if (!op.has_input(slot)) return std::string();
    const auto& n = op.input(slot).at(0);
    if (is_seq(n)) fail(op, fmt::format("has an initial state {} that is a sequence (it must be [batch, D])", slot));
    return apply("Unsqueeze", {value(n), ints({0})}, op);
  };
  const std::string h0 = initial("H0"), c0 = lstm ? initial("C0") : std::string();
  const bool peep = lstm && op.attr_or<bool>("use_peepholes", true);
  if (!h0.empty() || !c0.empty() || peep) in.push_back(h0);
  if (!c0.empty() || peep) in.push_back(c0);
  if (peep) {
    if (!b || bc.numel() < 7 * h) fail(op, "uses peepholes without their weights in Bias");
    std::vector<double> P(size_t(3 * h));
    for (int64_t j = 0; j < h; ++j) P[size_t(j)] = bv(4 * h + j), P[size_t(h + j)] = bv(6 * h + j), P[size_t(2 * h + j)] = bv(5 * h + j);
    in.push_back(initializer(tensor(P, {1, 3 * h}), base + "_P"));
  }
  static const std::map<std::string, std::string> acts = {{"sigmoid", "Sigmoid"}, {"tanh", "Tanh"}, {"relu", "Relu"}, {"identity", "Identity"}};
  auto act = [&](const char* k, const char* d) {
    auto it = acts.find(op.attr_or<std::string>(k, d));
    if (it == acts.end()) fail(op, fmt::format("has {} '{}', which ONNX's recurrent ops lack", k, op.attr_or<std::string>(k, d)));
    return it->second;
  };
  std::string y = fresh("t");
  auto& n = node(lstm ? "LSTM" : "GRU", in, {y}, op);
  attr(n, "hidden_size", h);
  if (op.attr_or<bool>("is_reverse", false)) attr(n, "direction", std::string("reverse"));
  auto* a = n.add_attribute();
  a->set_name("activations"), a->set_type(::onnx::AttributeProto::STRINGS);
  if (lstm) {
    for (auto s2 : {act("gate_activation", "sigmoid"), act("cell_activation", "tanh"), act("candidate_activation", "tanh")}) a->add_strings(s2);
  } else {
    for (auto s2 : {act("gate_activation", "sigmoid"), act("activation", "tanh")}) a->add_strings(s2);
  }
  // Y [max_len, 1, batch, H] -> [batch, max_len, H]
  std::string yo = fresh("t");
  attr(node("Transpose", {apply("Squeeze", {y, ints({1})}, op)}, {yo}, op), "perm", std::vector<int64_t>{1, 0, 2});
  const std::string& hidden = out_var(op, "Hidden");
  mark_seq(hidden, xn);
  bind(hidden, yo);
  if (lstm)
    for (auto& c : op.output("Cell"))
      if (c != hidden) seq_bad_.insert(c);  // the per-step cell is not exported: reading it is refused
}

void Exporter::sequence_pool(const Operator& op) {
  const auto& xn = op.input("X").at(0);
  if (!is_seq(xn)) fail(op, "pools an input that is not an exported sequence");
  const std::string type = op.attr<std::string>("pooltype");
  const DType dt = dtype(xn);
  std::string x = value(xn);
  const int rank = shape(xn).rank() + 1;  // padded: one more dim than oar's rows
  std::vector<int64_t> tail;  // unsqueeze the [batch, max_len] mask to x's rank
  for (int i = 2; i < rank; ++i) tail.push_back(i);
  if (type == "FIRST") {
    std::string o = fresh("t");
    attr(node("Gather", {x, ints({0})}, {o}, op), "axis", int64_t(1));
    return bind(out_var(op, "Out"), apply("Squeeze", {o, ints({1})}, op));
  }
  const std::string& lengths = lengths_of(xn);
  std::string mask = step_mask(x, lengths, dt, op);
  std::string m = tail.empty() ? mask : apply("Unsqueeze", {mask, ints(tail)}, op);
  auto reduce = [&](const std::string& type2, const std::string& v) {
    std::string o = fresh("t");
    if (type2 == "ReduceSum") {
      attr(node(type2, {v, ints({1})}, {o}, op), "keepdims", int64_t(0));
    } else {
      auto& n = node(type2, {v}, {o}, op);
      attr(n, "axes", std::vector<int64_t>{1}), attr(n, "keepdims", int64_t(0));
    }
    return o;
  };
  if (type == "MAX") {
    std::string cond = fresh("t");
    attr(node("Cast", {m}, {cond}, op), "to", int64_t(::onnx::TensorProto::BOOL));
    auto sel = apply("Where", {cond, x, scalar(-std::numeric_limits<double>::infinity(), dt)}, op);
    return bind(out_var(op, "Out"), reduce("ReduceMax", sel));
  }
  if (type == "LAST") {  // the step at length - 1: a one-hot mask over the steps
    auto shp = apply("Shape", {x}, op);
    auto tl = apply("Squeeze", {apply("Gather", {shp, ints({1})}, op), ints({0})}, op);
    auto range = apply("Range", {scalar(0, DType::i64), tl, scalar(1, DType::i64)}, op);
    auto last = apply("Sub", {lengths, scalar(1, DType::i64)}, op);
    auto eq = apply("Equal", {apply("Unsqueeze", {range, ints({0})}, op), apply("Unsqueeze", {last, ints({1})}, op)}, op);
    std::string f = fresh("t");
    attr(node("Cast", {eq}, {f}, op), "to", int64_t(detail::onnx_type(dt, "mask")));
    std::string fm = tail.empty() ? f : apply("Unsqueeze", {f, ints(tail)}, op);
    return bind(out_var(op, "Out"), reduce("ReduceSum", apply("Mul", {x, fm}, op)));
  }
  std::string sum = reduce("ReduceSum", apply("Mul", {x, m}, op));
  if (type == "SUM") return bind(out_var(op, "Out"), sum);
  std::string len = fresh("t");
  attr(node("Cast", {lengths}, {len}, op), "to", int64_t(detail::onnx_type(dt, "lengths")));
  std::vector<int64_t> lt = {1};
  for (int i = 2; i < rank - 1; ++i) lt.push_back(i);
  std::string l2 = apply("Unsqueeze", {len, ints(lt)}, op);
  if (type == "AVERAGE") return bind(out_var(op, "Out"), apply("Div", {sum, l2}, op));
  if (type == "SQRT") return bind(out_var(op, "Out"), apply("Div", {sum, apply("Sqrt", {l2}, op)}, op));
  fail(op, fmt::format("has pooltype '{}', which is not exported", type));
}

}  // namespace oar::onnx::export_detail
