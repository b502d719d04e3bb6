// src/onnx/import_elementwise.cpp: the element-wise handlers: arithmetic, activations, comparisons and logic, on floats as fused expressions (importer.hpp).
#include "src/onnx/importer.hpp"

namespace oar::onnx::import_detail {

void Importer::h_unary() {
  static const std::map<std::string, std::string> tok = {{"Relu", "relu"},         {"Sigmoid", "sigmoid"},   {"Tanh", "tanh"}, {"Exp", "exp"},
                                                         {"Log", "log"},           {"Sqrt", "sqrt"},         {"Abs", "abs"},   {"Reciprocal", "reciprocal"},
                                                         {"Softsign", "softsign"}, {"Softplus", "softplus"}, {"Erf", "erf"},   {"Neg", "neg"},
                                                         {"Floor", "floor"},       {"Ceil", "ceil"},         {"Round", "round"}, {"Sin", "sin"},
                                                         {"Cos", "cos"},           {"Tan", "tan"},           {"Asin", "asin"}, {"Acos", "acos"},
                                                         {"Atan", "atan"},         {"Sinh", "sinh"},         {"Cosh", "cosh"}, {"Asinh", "asinh"},
                                                         {"Acosh", "acosh"},       {"Atanh", "atanh"}};
  only_outputs(1);
  const std::string x = in(0);
  const DType dt = dtype(x);
  if ((dt == DType::i32 || dt == DType::i64) && (node_->op_type() == "Neg" || node_->op_type() == "Abs")) {  // exact in f64
    std::string r = fused_tmp({cast_to(x, DType::f64)}, "x0 " + tok.at(node_->op_type()));
    out_as(r, dt);
    return;
  }
  fused({x}, "x0 " + tok.at(node_->op_type()), out(0));
}

void Importer::no_legacy_broadcast() const {
  if (opset_ < 7 && ai("broadcast", 0) != 0) unsupported("the legacy broadcast attribute (before opset 7)");
}

void Importer::h_binary() {
  no_legacy_broadcast();
  static const std::map<std::string, std::string> tok = {{"Add", "add"}, {"Sub", "sub"}, {"Mul", "mul"}, {"Div", "div"}, {"Pow", "pow"}};
  const std::string& t = tok.at(node_->op_type());
  if (all_const() && is_integer(in_dtype(0)) && is_integer(in_dtype(1)) && t != "pow") return fold_int_binary(t);
  if (node_->op_type() == "Pow" && const_in(1) && const_in(1)->numel() == 1 && is_float(in_dtype(0))) {
    const double e = const_in(1)->get(0);
    if (e == 2) return fused({in(0)}, "x0 square", out(0));
    return add("pow", {{"X", {in(0)}}}, {{"Out", {out(0)}}}, {{"factor", Attribute(float(e))}}), void();
  }
  std::string a = in(0), b = in(1);
  if (node_->op_type() == "Pow" && dtype(b) != dtype(a)) b = cast_to(b, dtype(a));
  const DType dt = dtype(a);
  if (dt == DType::f32 || dt == DType::f64) return fused({a, b}, "x0 x1 " + t, out(0));
  if (t == "pow" && (dt == DType::i32 || dt == DType::i64)) {  // in f64, exact for the integers a power can reach
    std::string p = fused_tmp({cast_to(a, DType::f64), cast_to(b, DType::f64)}, "x0 x1 pow");
    out_as(p, dt);
    return;
  }
  fluid_binary(a, b, "elementwise_" + t, t == "add" || t == "mul", "", t == "div" || t == "pow" ? kFloats : kNumbers, true);
}

void Importer::fluid_binary(std::string a, std::string b, const std::string& type, bool commutes, const std::string& flipped,
                  std::initializer_list<DType> dtypes, bool broadcasts) {
  if (std::find(dtypes.begin(), dtypes.end(), dtype(a)) == dtypes.end())
    unsupported(fmt::format("its inputs are {}; oar's {} runs on {}", name(dtype(a)), type, fmt::join(dtypes | std::views::transform(name), ", ")));
  if (!broadcasts && shape(a) != shape(b)) unsupported(fmt::format("{} and {} differ in shape; oar's {} broadcasts nothing", shape(a).str(), shape(b).str(), type));
  auto fits = [&](const Shape& x, const Shape& y) {
    if (x == y) return true;  // one shape (an unknown batch dim on both: they must agree when run)
    if (y.known() && y.numel() == 1) return true;
    if (y.rank() > x.rank()) return false;
    for (int i = 1; i <= y.rank(); ++i)
      if (y[y.rank() - i] != x[x.rank() - i] || y[y.rank() - i] < 0) return false;
    return true;
  };
  std::string op = type;
  if (!fits(shape(a), shape(b)) && !fits(shape(b), shape(a)) && dtype(a) == dtype(b) && dtype(a) != DType::f32 && dtype(a) != DType::f64) {
    // each broadcast against the other, as in [1, T] < [N, 1]: both spread to the common shape through a sum
    // with the other times 0, in f64 (exact for these integers and booleans), and cast back
    const DType dt = dtype(a);
    const std::string fa = cast_to(a, DType::f64), fb = cast_to(b, DType::f64);
    a = cast_to(fused_tmp({fa, fb}, "x0 x1 c:0 mul add"), dt);
    b = cast_to(fused_tmp({fb, fa}, "x0 x1 c:0 mul add"), dt);
  }
  if (!fits(shape(a), shape(b))) {
    if (!fits(shape(b), shape(a)) || (!commutes && flipped.empty()))
      unsupported(fmt::format("{} over {} and {} with numpy's broadcast (oar broadcasts Y over X's last dims)", name(dtype(a)),
                              shape(a).str(), shape(b).str()));
    std::swap(a, b);
    if (!commutes) op = flipped;
  }
  if (dtype(a) != dtype(b)) fail(fmt::format("mixes {} and {}", name(dtype(a)), name(dtype(b))));
  std::map<std::string, Attribute> attrs;
  if (broadcasts) attrs["axis"] = Attribute(int32_t(-1));
  add(op, {{"X", {a}}, {"Y", {b}}}, {{"Out", {out(0)}}}, attrs);
}

void Importer::h_compare() {
  no_legacy_broadcast();
  static const std::map<std::string, std::pair<std::string, std::string>> ops = {{"Equal", {"equal", "equal"}},
                                                                               {"Less", {"less_than", "greater_than"}},
                                                                               {"Greater", {"greater_than", "less_than"}},
                                                                               {"LessOrEqual", {"less_equal", "greater_equal"}},
                                                                               {"GreaterOrEqual", {"greater_equal", "less_equal"}}};
  const auto& [type, flipped] = ops.at(node_->op_type());
  fluid_binary(in(0), in(1), type, type == "equal", flipped, kNumbers, true);
}

void Importer::h_logical() {
  no_legacy_broadcast();
  static const std::map<std::string, std::string> ops = {{"And", "logical_and"}, {"Or", "logical_or"}, {"Xor", "logical_xor"}};
  fluid_binary(in(0), in(1), ops.at(node_->op_type()), true, "", kBools, false);
}

void Importer::h_not() { add("logical_not", {{"X", {in(0)}}}, {{"Out", {out(0)}}}); }

void Importer::fold_int_binary(const std::string& t) {
  const Tensor &a = *const_in(0), &b = *const_in(1);
  Shape s;
  if (!ops::fused::broadcast(a.shape(), b.shape(), s)) fail(fmt::format("cannot broadcast {} with {}", a.shape().str(), b.shape().str()));
  auto av = as_i64(a), bv = as_i64(b);
  std::vector<int64_t> o(size_t(s.numel()));
  // numpy broadcast by index arithmetic (constants here are small: shapes and indices)
  auto index = [&](const Shape& from, int64_t flat) {
    int64_t idx = 0, stride = 1;
    for (int d = s.rank() - 1, fd = from.rank() - 1; d >= 0; --d, --fd) {
      const int64_t coord = flat % s[d];
      flat /= s[d];
      if (fd >= 0) {
        if (from[fd] != 1) idx += coord * stride;
        stride *= from[fd];
      }
    }
    return idx;
  };
  for (int64_t i = 0; i < s.numel(); ++i) {
    const int64_t x = av[size_t(index(a.shape(), i))], y = bv[size_t(index(b.shape(), i))];
    if (t == "div" && y == 0) fail("divides by zero");
    o[size_t(i)] = t == "add" ? x + y : t == "sub" ? x - y : t == "mul" ? x * y : x / y;
  }
  set_const(0, cast_const(i64_tensor(o, s), a.dtype()));
}

Tensor Importer::cast_const(const Tensor& t, DType to) {
  if (t.dtype() == to) return t;
  Tensor o(t.shape(), to);
  for (int64_t i = 0; i < t.numel(); ++i) {
    const double v = t.get(i);
    visit_dtype(to, [&](auto tag) {
      using T = typename decltype(tag)::type;
      if constexpr (std::is_arithmetic_v<T>) o.data<T>()[i] = static_cast<T>(v);
      else throw Error(fmt::format("no constant conversion to {}", name(to)));
    });
  }
  return o;
}

void Importer::need_castable(DType from, DType to) const {
  for (DType t : {from, to})
    if (t != DType::boolean && t != DType::i32 && t != DType::i64 && t != DType::f16 && t != DType::f32 && t != DType::f64 && t != DType::bf16)
      unsupported(fmt::format("a cast from {} to {} (oar casts between bool, i32, i64, f16, f32, f64, bf16)", name(from), name(to)));
}

std::string Importer::cast_to(const std::string& x, DType to) {
  if (dtype(x) == to) return x;
  std::string o = tmp();
  add("cast", {{"X", {x}}}, {{"Out", {o}}}, {{"in_dtype", Attribute(int32_t(dtype(x)))}, {"out_dtype", Attribute(int32_t(to))}});
  return o;
}

void Importer::h_variadic() {  // Sum, Mean, Max, Min over any number of inputs
  static const std::map<std::string, std::string> tok = {{"Sum", "add"}, {"Mean", "add"}, {"Max", "max"}, {"Min", "min"}};
  std::vector<std::string> xs;
  std::string e = "x0";
  for (int i = 0; i < num_in(); ++i) {
    xs.push_back(in(i));
    if (i > 0) e += fmt::format(" x{} {}", i, tok.at(node_->op_type()));
  }
  if (xs.empty()) fail("has no inputs");
  if (node_->op_type() == "Mean") e += fmt::format(" c:{} div", xs.size());
  fused(xs, e, out(0));
}

void Importer::h_leaky_relu() { unary_op("leaky_relu", {{"alpha", Attribute(af("alpha", 0.01f))}}); }

void Importer::h_elu() { unary_op("elu", {{"alpha", Attribute(af("alpha", 1.0f))}}); }

void Importer::h_hard_sigmoid() { unary_op("hard_sigmoid", {{"slope", Attribute(af("alpha", 0.2f))}, {"offset", Attribute(af("beta", 0.5f))}}); }

void Importer::h_selu() {  // gamma (x > 0 ? x : alpha (e^x - 1))
  const std::string x = in(0);
  need_float(x);
  std::string e = tmp();
  add("elu", {{"X", {x}}}, {{"Out", {e}}}, {{"alpha", Attribute(af("alpha", 1.67326319217681884765625f))}});
  add("scale", {{"X", {e}}}, {{"Out", {out(0)}}}, {{"scale", Attribute(af("gamma", 1.05070102214813232421875f))}});
}

void Importer::h_hard_swish() {  // x hard_sigmoid(x) with alpha 1/6, beta 1/2
  const std::string x = in(0);
  need_float(x);
  std::string h = tmp();
  add("hard_sigmoid", {{"X", {x}}}, {{"Out", {h}}}, {{"slope", Attribute(1.0f / 6)}, {"offset", Attribute(0.5f)}});
  fused({x, h}, "x0 x1 mul", out(0));
}

void Importer::h_prelu() { fused({in(0), in(1)}, "x0 relu x1 x0 neg relu mul sub", out(0)); }

void Importer::h_clip() {
  const std::string x = in(0);
  need_float(x);
  float lo = -std::numeric_limits<float>::max(), hi = std::numeric_limits<float>::max();
  if (opset_ < 11) {
    lo = af("min", lo), hi = af("max", hi);
  } else if ((has_in(1) && !const_in(1)) || (has_in(2) && !const_in(2))) {  // bounds computed at run time
    std::vector<std::string> xs = {x};
    std::string e = "x0";
    if (has_in(1)) xs.push_back(in(1)), e += fmt::format(" x{} max", xs.size() - 1);
    if (has_in(2)) xs.push_back(in(2)), e += fmt::format(" x{} min", xs.size() - 1);
    return fused(xs, e, out(0));
  } else {
    if (has_in(1)) lo = float(need_const(1, "min").get(0));
    if (has_in(2)) hi = float(need_const(2, "max").get(0));
  }
  add("clip", {{"X", {x}}}, {{"Out", {out(0)}}}, {{"min", Attribute(lo)}, {"max", Attribute(hi)}});
}

void Importer::h_identity() {
  if (const Tensor* t = const_in(0)) return set_reshaped_const(*t);
  add("assign", {{"X", {in(0)}}}, {{"Out", {out(0)}}});
}

void Importer::h_dropout() {  // inference: the identity, and a mask of all true (training_mode is not supported)
  only_outputs(2);
  if (has_in(2) && need_const(2, "training_mode").get(0) != 0) unsupported("training_mode is true");
  if (ai("is_test", 1) == 0 && opset_ < 7) unsupported("is_test 0");
  const std::string x = in(0);
  add("assign", {{"X", {x}}}, {{"Out", {out(0)}}});
  if (has_out(1)) {
    if (!shape(x).known()) unsupported(fmt::format("a mask output for an input of unknown shape {}", shape(x).str()));
    Tensor m(shape(x), DType::boolean);
    std::memset(m.raw(), 1, m.bytes());
    set_const(1, m);
  }
}

void Importer::h_sign() { unary_op("sign"); }

void Importer::h_thresholded_relu() {  // x where x > alpha, else 0
  const std::string x = in(0);
  need_float(x);
  std::string gt = tmp();
  add("greater_than", {{"X", {x}}, {"Y", {const_var("alpha", cast_const(Tensor::from<double>({double(af("alpha", 1.0f))}, Shape{1}), dtype(x)))}}},
      {{"Out", {gt}}}, {{"axis", Attribute(int32_t(-1))}});
  fused({x, cast_to(gt, dtype(x))}, "x0 x1 mul", out(0));
}

void Importer::h_celu() {  // max(0, x) + min(0, alpha (e^(x / alpha) - 1))
  const double a = af("alpha", 1.0f);
  fused({in(0)}, fmt::format("x0 relu x0 c:{} div exp c:1 sub c:{} mul c:0 min add", a, a), out(0));
}

void Importer::h_where() {  // c x + (1 - c) y with the condition as 0 or 1: exact for finite x and y
  // One side a single infinity (a masked max fills with -inf): c x + log c is x where c is 1 and -inf where it
  // is 0 (+inf: c x - log c), where the blend would give 0 inf = NaN.
  auto inf_sign = [&](int i) {
    const Tensor* t = const_in(i);
    return t && t->numel() == 1 && is_float(t->dtype()) && std::isinf(t->get(0)) ? (t->get(0) > 0 ? 1 : -1) : 0;
  };
  if (const int sy = inf_sign(2), sx = inf_sign(1); (sx != 0) != (sy != 0)) {
    const std::string v = in(sx ? 2 : 1);
    need_float(v);
    std::string c = cast_to(in(0), dtype(v));
    if (sx) c = fused_tmp({c}, "c:1 x0 sub");  // the weight of y
    return fused({c, v}, (sx ? sx : sy) < 0 ? "x0 x1 mul x0 log add" : "x0 x1 mul x0 log sub", out(0));
  }
  const std::string x = in(1), y = in(2);
  const DType dt = dtype(x);
  if (dt == DType::i32 || dt == DType::i64) {  // in f64, exact for integers below 2^53
    std::string r = fused_tmp({cast_to(in(0), DType::f64), cast_to(x, DType::f64), cast_to(y, DType::f64)}, "x0 x1 mul c:1 x0 sub x2 mul add");
    out_as(r, dt);
    return;
  }
  need_float(x);
  fused({cast_to(in(0), dt), x, y}, "x0 x1 mul c:1 x0 sub x2 mul add", out(0));
}

void Importer::h_isnan() {  // x != x
  const std::string x = in(0);
  add("not_equal", {{"X", {x}}, {"Y", {x}}}, {{"Out", {out(0)}}}, {{"axis", Attribute(int32_t(-1))}});
}

void Importer::h_isinf() {  // x == +inf or x == -inf, as asked
  const std::string x = in(0);
  need_float(x);
  const bool pos = ai("detect_positive", 1) != 0, neg = ai("detect_negative", 1) != 0;
  if (!pos && !neg) unsupported("detect_positive and detect_negative both 0");
  auto eq = [&](double v, const std::string& o) {
    const std::string inf = const_var(v > 0 ? "+inf" : "-inf", cast_const(Tensor::from<double>({v}, Shape{1}), dtype(x)));
    add("equal", {{"X", {x}}, {"Y", {inf}}}, {{"Out", {o}}}, {{"axis", Attribute(int32_t(-1))}});
  };
  const double inf = std::numeric_limits<double>::infinity();
  if (pos && neg) {
    std::string a = tmp(), b = tmp();
    eq(inf, a), eq(-inf, b);
    add("logical_or", {{"X", {a}}, {"Y", {b}}}, {{"Out", {out(0)}}});
  } else if (pos || neg) {
    eq(pos ? inf : -inf, out(0));
  } else {
    unsupported("detect_positive and detect_negative both 0");
  }
}

void Importer::h_trilu() {  // X times a constant mask of its last two dims (upper: j - i >= k; lower: j - i <= k)
  const std::string x = in(0);
  const Shape xs = shape(x);
  if (xs.rank() < 2 || xs[xs.rank() - 1] < 0 || xs[xs.rank() - 2] < 0) unsupported(fmt::format("input {} (its last two dims must be known)", xs.str()));
  const bool upper = ai("upper", 1) != 0;
  const int64_t rows = xs[xs.rank() - 2], cols = xs[xs.rank() - 1];
  if (has_in(1) && !const_in(1)) {  // k at run time: the mask from sign(j - i - k + 1/2) (upper) or sign(k - (j - i) + 1/2)
    std::vector<double> d(static_cast<size_t>(rows * cols));
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) d[size_t(i * cols + j)] = double(j - i);
    std::string dv = const_var("trilu_diag", Tensor::from<double>(d, Shape{rows, cols})), sg = tmp();
    add("sign", {{"X", {fused_tmp({dv, cast_to(in(1), DType::f64)}, upper ? "x0 x1 sub c:0.5 add" : "x1 x0 sub c:0.5 add")}}}, {{"Out", {sg}}});
    const std::string xf = dtype(x) == DType::f64 ? x : cast_to(to_f64_if_int(x), DType::f64);  // the mask is f64
    return out_like(fused_tmp({xf, sg}, "x0 x1 c:1 add c:0.5 mul mul"), x);
  }
  const int64_t k = has_in(1) ? int64_t(need_const(1, "k").get(0)) : 0;
  std::vector<double> m(static_cast<size_t>(rows * cols));
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) m[size_t(i * cols + j)] = (upper ? j - i >= k : j - i <= k) ? 1 : 0;
  const DType dt = dtype(x);
  const bool ints = dt == DType::i32 || dt == DType::i64;
  const std::string mask = const_var("trilu_mask", cast_const(Tensor::from<double>(m, Shape{rows, cols}), ints ? DType::f64 : dt));
  if (!ints) return fused({x, mask}, "x0 x1 mul", out(0));
  std::string r = fused_tmp({cast_to(x, DType::f64), mask}, "x0 x1 mul");
  out_as(r, dt);
}

void Importer::h_mod() {  // fmod 0: a - b floor(a / b) (the sign of b); fmod 1: a - b trunc(a / b) (the sign of a); in f64 for integers
  const std::string a0 = in(0), b0 = in(1);
  const DType dt = dtype(a0);
  const bool ints = dt == DType::i32 || dt == DType::i64;
  if (!ints) need_float(a0);
  const std::string a = ints ? cast_to(a0, DType::f64) : a0, b = ints ? cast_to(b0, DType::f64) : b0;
  std::string r;
  if (ai("fmod", 0) == 0) {
    if (!ints) unsupported("fmod 0 on floats");
    r = fused_tmp({a, b}, "x0 x1 x0 x1 div floor mul sub");
  } else {
    std::string q = fused_tmp({a, b}, "x0 x1 div"), sg = tmp();
    add("sign", {{"X", {q}}}, {{"Out", {sg}}});
    r = fused_tmp({a, b, q, sg}, "x0 x1 x3 x2 abs floor mul mul sub");
  }
  out_as(r, dt);
}

}  // namespace oar::onnx::import_detail
