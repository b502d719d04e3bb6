// src/onnx/export_attention.cpp: scaled_dot_product_attention (dense; over sequences in
// export_attention_seq.cpp) and the position ops as ONNX nodes; the positions come from Range over the input's
// Shape, so the time dim stays dynamic (exporter.hpp).
#include "src/onnx/exporter.hpp"

namespace oar::onnx::export_detail {

std::string Exporter::dim(const std::string& x, int64_t axis, const Operator& op) {
  return apply("Gather", {apply("Shape", {x}, op), scalar(double(axis), DType::i64)}, op);
}

std::string Exporter::positions(const std::string& x, int64_t time_axis, int64_t shift, const Operator& op) {
  std::string end = dim(x, time_axis, op);
  if (shift != 0) end = apply("Add", {end, scalar(double(shift), DType::i64)}, op);
  std::string p = apply("Range", {scalar(double(shift), DType::i64), end, scalar(1, DType::i64)}, op);
  if (op.has_input("Offset")) {  // each batch row's (or padded sequence's) first position: [B, T]
    p = apply("Add", {apply("Unsqueeze", {p, ints({0})}, op), apply("Unsqueeze", {in(op, "Offset"), ints({1})}, op)}, op);
  }
  std::string o = fresh("t");
  attr(node("Cast", {p}, {o}, op), "to", int64_t(::onnx::TensorProto::DOUBLE));
  return o;
}

void Exporter::position(const Operator& op) {
  const bool rotary = op.type() == "rotary_position_embedding";
  const auto& xn = op.input("X").at(0);
  const bool seq = is_seq(xn);
  const Shape& xs = shape(xn);
  const DType dt = dtype(xn);
  const int64_t d = xs[xs.rank() - 1], half = d / 2;
  if (d < 0) fail(op, fmt::format("has X {} whose last dim is unknown", xs.str()));
  const int rank = xs.rank() + (seq ? 1 : 0);  // a padded sequence has one more dim: [batch, max_len, row dims...]
  if (rank != (rotary ? 4 : 3))
    fail(op, fmt::format("has X {}, which is not {}", xs.str(), rotary ? "[B, H, T, d] or a sequence of [H, d] rows" : "[B, T, D] or a sequence of [D] rows"));
  // [B, H, T, d]; padded [B, T, H, d]; [B, T, D] (dense or padded). A padded step is the row's position in its sequence.
  const int64_t time_axis = rotary && !seq ? 2 : 1;
  const int64_t shift = rotary ? op.attr_or<int32_t>("offset", 0) : 0;
  // The angles in f64, as oar's kernels take them (kernels/cpu/position.hpp), then their sines and cosines cast to X's dtype.
  std::vector<double> freq(static_cast<size_t>(half));
  const double base = rotary ? op.attr_or<float>("base", 10000.f) : 10000.0;
  for (int64_t k = 0; k < half; ++k) freq[size_t(k)] = rotary ? std::pow(base, -2.0 * double(k) / double(d)) : std::pow(base, -double(k) / double(half));
  const std::string x = value(xn);
  std::string angle = apply("Mul", {apply("Unsqueeze", {positions(x, time_axis, shift, op), ints({-1})}, op),
                                    initializer(Tensor::from<double>(freq, Shape{half}), rotary ? "rotary_freq" : "pe_freq")},
                            op);  // [T, half] or [B, T, half]
  auto cast = [&](const std::string& v) {
    std::string o = fresh("t");
    attr(node("Cast", {v}, {o}, op), "to", int64_t(detail::onnx_type(dt, "position")));
    return o;
  };
  const bool per_row = op.has_input("Offset");
  if (!rotary) {  // alpha x + beta [sin | cos]
    std::string pe = fresh("t");
    attr(node("Concat", {cast(apply("Sin", {angle}, op)), cast(apply("Cos", {angle}, op))}, {pe}, op), "axis", int64_t(-1));
    const double alpha = op.attr_or<float>("alpha", 1.f), beta = op.attr_or<float>("beta", 1.f);
    std::string ax = alpha == 1 ? x : apply("Mul", {x, scalar(alpha, dt)}, op);
    if (beta != 1) pe = apply("Mul", {pe, scalar(beta, dt)}, op);
    if (seq) mark_seq(out_var(op, "Out"), xn);
    return bind(out_var(op, "Out"), apply("Add", {ax, pe}, op));
  }
  // X's pairs (x[2i], x[2i + 1]) as u, v [B, H, T, half, 1] (padded: [B, T, H, half, 1]); the angles moved to
  // broadcast over them: [T, half] to [T, half, 1] ([T, 1, half, 1]), or [B, T, half] to [B, 1, T, half, 1]
  // ([B, T, 1, half, 1]).
  std::vector<int64_t> axes = per_row ? std::vector<int64_t>{seq ? 2 : 1, 4} : seq ? std::vector<int64_t>{1, 3} : std::vector<int64_t>{2};
  angle = apply("Unsqueeze", {angle, ints(axes)}, op);
  const std::string c = cast(apply("Cos", {angle}, op)), s = cast(apply("Sin", {angle}, op));
  const std::string u = fresh("t"), v = fresh("t");
  attr(node("Split", {apply("Reshape", {x, ints({0, 0, 0, half, 2})}, op)}, {u, v}, op), "axis", int64_t(-1));
  // (u c - v s, u s + v c), interleaved back
  std::string y = fresh("t");
  attr(node("Concat", {apply("Sub", {apply("Mul", {u, c}, op), apply("Mul", {v, s}, op)}, op), apply("Add", {apply("Mul", {u, s}, op), apply("Mul", {v, c}, op)}, op)}, {y}, op),
       "axis", int64_t(-1));
  if (seq) mark_seq(out_var(op, "Out"), xn);
  bind(out_var(op, "Out"), apply("Reshape", {y, ints({0, 0, 0, d})}, op));
}

void Exporter::attention(const Operator& op) {
  const auto& qn = op.input("Q").at(0);
  for (const char* slot : {"Q", "K", "V"})
    if (is_seq(op.input(slot).at(0))) return attention_seq(op);
  const Shape& qs = shape(qn);
  if (qs.rank() != 4) fail(op, fmt::format("has Q {} (exported for the dense form [B, H, Tq, d] and for LoD sequences [N, H, d])", qs.str()));
  bind(out_var(op, "Out"), attend(op, value(qn), in(op, "K"), in(op, "V"), dtype(qn), attention_scale(op, qs), ""));
}

double Exporter::attention_scale(const Operator& op, const Shape& qs) {
  if (!op.attr_or<bool>("is_test", false) && op.attr_or<float>("dropout_prob", 0.f) > 0)
    fail(op, "drops attention weights at random (is_test is off), which an inference graph does not");
  const double scale = op.attr_or<float>("scale", 0.f);
  if (scale != 0) return scale;
  const int64_t d = qs[qs.rank() - 1];
  if (d < 0) fail(op, fmt::format("has Q {} of unknown head size and no scale", qs.str()));
  return 1.0 / std::sqrt(double(d));
}

std::string Exporter::attend(const Operator& op, const std::string& q, const std::string& k, const std::string& v, DType dt, double scale,
                             const std::string& keep_mask) {
  std::string kt = fresh("t");
  attr(node("Transpose", {k}, {kt}, op), "perm", std::vector<int64_t>{0, 1, 3, 2});
  // oar's kernel scales the product (gemm's alpha, in Q's dtype), then masks.
  std::string s = apply("Mul", {apply("MatMul", {q, kt}, op), scalar(scale, dt)}, op);
  // A query row whose keys are all masked gives zeros in oar, where Softmax would give NaN. Such rows keep every
  // key here and their weights are zeroed after it: no NaN arises (an importer that blends Where's two sides
  // arithmetically, as oar's does, would keep it).
  const double ninf = -std::numeric_limits<double>::infinity();
  auto reduce_max = [&](const std::string& x) {
    std::string o = fresh("t");
    auto& n = node("ReduceMax", {x}, {o}, op);
    attr(n, "axes", std::vector<int64_t>{-1}), attr(n, "keepdims", int64_t(1));
    return o;
  };
  auto cast = [&](const std::string& x, int64_t to) {
    std::string o = fresh("t");
    attr(node("Cast", {x}, {o}, op), "to", to);
    return o;
  };
  std::string keep, additive;  // bool [.., Tq, Tk]; a float mask added to the scores
  if (op.has_input("Mask")) {
    const auto& mn = op.input("Mask").at(0);
    if (dtype(mn) == DType::boolean) keep = value(mn);
    else s = apply("Add", {s, value(mn)}, op), additive = value(mn);
  }
  if (op.attr_or<bool>("causal", false)) {  // query i sees key j when j - i <= Tk - Tq
    const std::string tq = dim(q, 2, op), tk = dim(k, 2, op);
    const std::string rows = apply("Unsqueeze", {apply("Range", {scalar(0, DType::i64), tq, scalar(1, DType::i64)}, op), ints({1})}, op);
    const std::string cols = apply("Range", {scalar(0, DType::i64), tk, scalar(1, DType::i64)}, op);
    const std::string causal = apply("LessOrEqual", {apply("Sub", {cols, rows}, op), apply("Sub", {tk, tq}, op)}, op);  // [Tq, Tk]
    keep = keep.empty() ? causal : apply("And", {keep, causal}, op);
  }
  std::string kf = keep.empty() ? std::string() : cast(keep, detail::onnx_type(dt, "mask"));
  // The caller's 0/1 mask joins as a product: floats broadcast in oar's importer where booleans of unequal
  // shapes would not.
  if (!keep_mask.empty()) kf = kf.empty() ? keep_mask : apply("Mul", {kf, keep_mask}, op);
  std::string seen;  // 1 where a query row keeps some key, else 0: [.., Tq, 1]
  if (!kf.empty()) {
    seen = reduce_max(kf);
    // max(keep, 1 - seen) in floats: oar's importer broadcasts logical ops over equal shapes only
    keep = cast(apply("Max", {kf, apply("Sub", {scalar(1, dt), seen}, op)}, op), ::onnx::TensorProto::BOOL);
    s = apply("Where", {keep, s, scalar(ninf, dt)}, op);
  }
  std::string none;  // an additive mask of -inf over a whole row
  if (!additive.empty()) {
    none = fresh("t");
    attr(node("IsInf", {reduce_max(s)}, {none}, op), "detect_positive", int64_t(0));
    s = apply("Where", {none, scalar(0, dt), s}, op);
  }
  std::string w = fresh("t");
  attr(node("Softmax", {s}, {w}, op), "axis", int64_t(-1));
  if (!seen.empty()) w = apply("Mul", {w, seen}, op);
  if (!none.empty()) w = apply("Where", {none, scalar(0, dt), w}, op);
  return apply("MatMul", {w, v}, op);
}

}  // namespace oar::onnx::export_detail
