// src/onnx/import_shape.cpp: the handlers of shapes, indexing and reductions, with what can be computed at import time (importer.hpp).
#include "src/onnx/importer.hpp"

namespace oar::onnx::import_detail {

void Importer::h_constant() {
  if (auto* a = attr("value")) return set_const(0, detail::from_proto(a->t(), fmt::format("{}: {}", what_, where())));
  if (auto* a = attr("value_float")) return set_const(0, Tensor::from<float>({a->f()}, Shape{}));
  if (auto* a = attr("value_int")) return set_const(0, Tensor::from<int64_t>({a->i()}, Shape{}));
  if (auto* a = attr("value_floats")) {
    std::vector<float> v(a->floats().begin(), a->floats().end());
    return set_const(0, Tensor::from<float>(v, Shape{int64_t(v.size())}));
  }
  if (auto* a = attr("value_ints")) {
    std::vector<int64_t> v(a->ints().begin(), a->ints().end());
    return set_const(0, Tensor::from<int64_t>(v, Shape{int64_t(v.size())}));
  }
  unsupported("a Constant other than value, value_float(s) or value_int(s)");
}

void Importer::h_shape() {  // a constant when the dims asked for are known; else oar's shape op, run with the model
  const Shape s = in_shape(0);
  const int r = s.rank();
  int64_t start = norm_axis(ai("start", 0), r), end = attr("end") ? norm_axis(ai("end", r), r) : r;
  start = std::clamp<int64_t>(start, 0, r), end = std::clamp<int64_t>(end, 0, r);
  std::vector<int64_t> v;
  for (int64_t i = start; i < end; ++i) v.push_back(s[int(i)]);
  if (std::ranges::all_of(v, [](int64_t d) { return d >= 0; })) return set_const(0, i64_tensor(v, Shape{int64_t(v.size())}));
  std::string dims = tmp();
  add("shape", {{"Input", {in(0)}}}, {{"Out", {dims}}});
  std::string d64 = cast_to(dims, DType::i64);
  if (start == 0 && end == r) return add("assign", {{"X", {d64}}}, {{"Out", {out(0)}}}), void();
  add("slice", {{"Input", {d64}}}, {{"Out", {out(0)}}},
      {{"axes", Attribute(std::vector<int32_t>{0})}, {"starts", Attribute(std::vector<int32_t>{int32_t(start)})}, {"ends", Attribute(std::vector<int32_t>{int32_t(end)})}});
}

void Importer::h_size() {
  const Shape s = in_shape(0);
  if (!s.known()) unsupported(fmt::format("the size of {} is not known when the model is imported", s.str()));
  set_const(0, Tensor::from<int64_t>({s.numel()}, Shape{}));
}

void Importer::h_constant_of_shape() {
  const auto dims = as_i64(need_const(0, "shape"));
  Shape s(dims);
  Tensor fill = Tensor::from<float>({0.f}, Shape{1});
  if (auto* a = attr("value")) fill = detail::from_proto(a->t(), fmt::format("{}: {}", what_, where()));
  if (s.numel() > (int64_t(1) << 24)) unsupported("a constant of over 16M elements");
  Tensor t(s, fill.dtype());
  const size_t es = size_of(fill.dtype());
  for (int64_t i = 0; i < t.numel(); ++i) std::memcpy(static_cast<char*>(t.raw()) + size_t(i) * es, fill.raw(), es);
  set_const(0, t);
}

void Importer::h_reshape() {
  auto s = as_i64(need_const(1, "shape"));
  if (ai("allowzero", 0) != 0 && std::count(s.begin(), s.end(), 0) > 0) unsupported("allowzero with a 0 in the shape");
  if (const Tensor* t = const_in(0)) {  // a constant reshaped: computed here
    const Shape& in = t->shape();
    int64_t known = 1, minus = -1;
    for (size_t i = 0; i < s.size(); ++i) {
      if (s[i] == 0) s[i] = in[int(i)];
      if (s[i] == -1) minus = int64_t(i);
      else known *= s[i];
    }
    if (minus >= 0) s[size_t(minus)] = known ? t->numel() / known : 0;
    return set_reshaped_const(t->clone().view(Shape(s)));
  }
  reshape_to(in(0), s, out(0));
}

void Importer::h_flatten() {
  const Shape xs = in_shape(0);
  const int64_t axis = ai("axis", 1) < 0 ? ai("axis", 1) + xs.rank() : ai("axis", 1);
  if (axis < 0 || axis > xs.rank()) fail(fmt::format("axis {} is out of range for rank {}", ai("axis", 1), xs.rank()));
  if (axis == 0) return reshape_to(in(0), {1, -1}, out(0));
  if (axis == xs.rank()) return reshape_to(in(0), {-1, 1}, out(0));
  add("flatten", {{"X", {in(0)}}}, {{"Out", {out(0)}}}, {{"axis", Attribute(int32_t(axis))}});
}

void Importer::h_transpose() {
  const int r = in_shape(0).rank();
  auto perm = ais("perm");
  if (perm.empty())
    for (int i = r - 1; i >= 0; --i) perm.push_back(i);
  add("transpose", {{"X", {in(0)}}}, {{"Out", {out(0)}}}, {{"axis", Attribute(i32(perm))}});
}

void Importer::h_concat() {
  const int r = in_shape(0).rank();
  const int64_t axis = axis_in(ai("axis", 0), r);
  if (all_const()) {  // shapes and index lists: 1-D constants joined here
    if (r == 1) {
      std::vector<int64_t> v;
      DType dt = in_dtype(0);
      if (is_integer(dt)) {
        for (int i = 0; i < num_in(); ++i) {
          auto p = as_i64(*const_in(i));
          v.insert(v.end(), p.begin(), p.end());
        }
        return set_const(0, cast_const(i64_tensor(v, Shape{int64_t(v.size())}), dt));
      }
    }
  }
  std::vector<std::string> xs;
  for (int i = 0; i < num_in(); ++i) xs.push_back(in(i));
  add("concat", {{"X", xs}}, {{"Out", {out(0)}}}, {{"axis", Attribute(int32_t(axis))}});
}

void Importer::h_squeeze() {
  const Shape xs = in_shape(0);
  auto axes = axes_arg(1);
  for (auto& a : axes) a = axis_in(a, xs.rank());
  if (const Tensor* t = const_in(0)) {
    Shape s;
    for (int i = 0; i < xs.rank(); ++i)
      if (axes.empty() ? xs[i] != 1 : std::find(axes.begin(), axes.end(), i) == axes.end()) s.push_back(xs[i]);
    return set_reshaped_const(t->clone().view(s));
  }
  add("squeeze", {{"X", {in(0)}}}, {{"Out", {out(0)}}}, {{"axes", Attribute(i32(axes))}});
}

void Importer::h_unsqueeze() {
  const Shape xs = in_shape(0);
  auto axes = axes_arg(1);
  const int r = xs.rank() + int(axes.size());
  for (auto& a : axes) a = axis_in(a, r);
  std::sort(axes.begin(), axes.end());
  if (const Tensor* t = const_in(0)) {
    Shape s;
    for (int i = 0, j = 0; i < r; ++i) s.push_back(std::binary_search(axes.begin(), axes.end(), i) ? 1 : xs[j++]);
    return set_reshaped_const(t->clone().view(s));
  }
  add("unsqueeze", {{"X", {in(0)}}}, {{"Out", {out(0)}}}, {{"axes", Attribute(i32(axes))}});
}

/// Known indices into a dim of size n (-1: unknown) as i64, the negative ones counted from the end.
Tensor Importer::wrapped(const Tensor& idx, int64_t n) const {
  Tensor w = cast_const(idx, DType::i64).clone();
  for (int64_t i = 0; i < w.numel(); ++i) {
    int64_t& v = w.data<int64_t>()[i];
    if (v < 0 && n < 0) unsupported(fmt::format("the negative index {} into a dim of unknown size", v));
    if (v < 0) v += n;
  }
  return w;
}

void Importer::h_gather() {
  const Shape xs = in_shape(0);
  const int64_t axis = axis_in(ai("axis", 0), xs.rank());
  if (const Tensor* data = const_in(0); data && const_in(1) && xs.rank() == 1 && is_integer(data->dtype())) {  // shape arithmetic
    auto d = as_i64(*data), idx = as_i64(*const_in(1));
    std::vector<int64_t> v;
    for (auto i : idx) {
      if (i < -int64_t(d.size()) || i >= int64_t(d.size())) fail(fmt::format("index {} is out of range for {} values", i, d.size()));
      v.push_back(d[size_t(i < 0 ? i + int64_t(d.size()) : i)]);
    }
    return set_const(0, cast_const(i64_tensor(v, const_in(1)->shape()), data->dtype()));
  }
  const Shape is = in_shape(1);
  if (axis != 0) {  // along dim 0 of X with `axis` moved there, and back: one index dim takes the axis's place
    if (is.rank() > 1) unsupported(fmt::format("indices of rank {} along axis {} (oar gathers along axis 0)", is.rank(), axis));
    std::vector<int64_t> perm = {axis};
    for (int i = 0; i < xs.rank(); ++i)
      if (i != axis) perm.push_back(i);
    const std::string moved = transposed(in(0), perm);
    std::string idx;
    if (const Tensor* t = const_in(1)) {
      idx = const_var("wrapped", wrapped(*t, xs[int(axis)]).view(Shape{t->numel()}));
    } else {
      if (xs[int(axis)] < 0) unsupported("indices computed at run time into a dim of unknown size");
      std::string flat = tmp();
      reshape_to(in(1), {-1}, flat);
      idx = cast_to(wrap_negative(flat, xs[int(axis)]), DType::i64);
    }
    std::string g = tmp();
    add("gather", {{"X", {moved}}, {"Index", {idx}}}, {{"Out", {g}}});
    const std::string back = transposed(g, inverse(perm));
    if (is.rank() == 1) return add("assign", {{"X", {back}}}, {{"Out", {out(0)}}}), void();
    return add("squeeze", {{"X", {back}}}, {{"Out", {out(0)}}}, {{"axes", Attribute(std::vector<int32_t>{int32_t(axis)})}}), void();
  }
  std::string idx;
  if (const Tensor* t = const_in(1)) {
    idx = const_var("wrapped", wrapped(*t, xs[0]));
  } else {
    if (xs[0] < 0) unsupported("indices computed at run time into a dim of unknown size");
    idx = cast_to(wrap_negative(in(1), xs[0]), dtype(in(1)));  // at run time
  }
  if (is.rank() == 1) return add("gather", {{"X", {in(0)}}, {"Index", {idx}}}, {{"Out", {out(0)}}}), void();
  if (!is.known() && xs.rank() == 2) {  // rows of a table (an embedding): lookup_table takes ids of any shape ending in 1
    std::string ids = cast_to(idx, DType::i64), col = tmp();
    add("unsqueeze", {{"X", {ids}}}, {{"Out", {col}}}, {{"axes", Attribute(std::vector<int32_t>{int32_t(is.rank())})}});
    return add("lookup_table", {{"W", {in(0)}}, {"Ids", {col}}}, {{"Out", {out(0)}}}), void();
  }
  if (!is.known()) unsupported(fmt::format("indices of rank {} and unknown shape into data of rank {}", is.rank(), xs.rank()));
  std::string flat = tmp(), g = tmp();
  reshape_to(idx, {-1}, flat);
  add("gather", {{"X", {in(0)}}, {"Index", {flat}}}, {{"Out", {g}}});
  std::vector<int64_t> s(is.begin(), is.end());
  for (int i = 1; i < xs.rank(); ++i) s.push_back(xs[i] < 0 ? 0 : xs[i]);
  if (std::count(s.begin() + is.rank(), s.end(), 0) > 1) unsupported("data with several dims of unknown size");
  reshape_to(g, s, out(0));
}

void Importer::h_cast() {
  const DType to = oar_dtype_or_unsupported(int32_t(ai("to", 0)), "Cast's to");
  if (const Tensor* t = const_in(0)) return set_const(0, cast_const(*t, to));
  const std::string x = in(0);
  need_castable(dtype(x), to);
  add("cast", {{"X", {x}}}, {{"Out", {out(0)}}}, {{"in_dtype", Attribute(int32_t(dtype(x)))}, {"out_dtype", Attribute(int32_t(to))}});
}

void Importer::h_slice() {
  const Shape xs = in_shape(0);
  std::vector<int64_t> starts, ends, axes, steps;
  if (opset_ < 10) {
    starts = ais("starts"), ends = ais("ends"), axes = ais("axes");
  } else {
    starts = as_i64(need_const(1, "starts")), ends = as_i64(need_const(2, "ends"));
    if (has_in(3)) axes = as_i64(need_const(3, "axes"));
    if (has_in(4)) steps = as_i64(need_const(4, "steps"));
  }
  if (axes.empty())
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(int64_t(i));
  for (auto& a : axes) a = axis_in(a, xs.rank());
  for (auto s : steps)
    if (s != 1) unsupported(fmt::format("steps [{}] (oar slices with step 1)", fmt::join(steps, ", ")));
  add("slice", {{"Input", {in(0)}}}, {{"Out", {out(0)}}}, {{"axes", Attribute(i32(axes))}, {"starts", Attribute(i32(starts))}, {"ends", Attribute(i32(ends))}});
}

void Importer::h_reduce() {
  static const std::map<std::string, std::string> base = {{"ReduceSum", "reduce_sum"}, {"ReduceMean", "reduce_mean"}, {"ReduceMax", "reduce_max"},
                                                          {"ReduceMin", "reduce_min"}, {"ReduceSumSquare", "reduce_sum"}, {"ReduceL1", "reduce_sum"},
                                                          {"ReduceL2", "reduce_sum"}, {"ReduceLogSum", "reduce_sum"}, {"ReduceLogSumExp", "reduce_sum"}};
  const std::string& t = node_->op_type();
  std::string x = in(0);
  need_float(x);
  const Shape xs = shape(x);
  if (t == "ReduceProd") return reduce_prod(x);
  std::vector<int64_t> axes = t == "ReduceSum" && opset_ >= 13 ? (has_in(1) ? as_i64(need_const(1, "axes")) : std::vector<int64_t>{}) : ais("axes");
  const bool keep = ai("keepdims", 1) != 0;
  if (axes.empty() && ai("noop_with_empty_axes", 0) != 0) return add("assign", {{"X", {x}}}, {{"Out", {out(0)}}}), void();
  for (auto& a : axes) a = axis_in(a, xs.rank());
  // Element-wise before the sum, and after it.
  if (t == "ReduceSumSquare" || t == "ReduceL2") x = fused_tmp({x}, "x0 square");
  if (t == "ReduceL1") x = fused_tmp({x}, "x0 abs");
  if (t == "ReduceLogSumExp") x = fused_tmp({x}, "x0 exp");
  const bool post = t == "ReduceL2" || t == "ReduceLogSum" || t == "ReduceLogSumExp";
  const bool all = axes.empty() || axes.size() == size_t(xs.rank());
  const bool scalar = all && !keep;  // ONNX gives rank 0, oar's reduce [1]
  std::string r = post || scalar ? tmp() : out(0);
  add(base.at(t), {{"X", {x}}}, {{"Out", {r}}},
      {{"dim", Attribute(i32(axes))}, {"keep_dim", Attribute(keep)}, {"reduce_all", Attribute(axes.empty())}});
  if (post) {
    std::string p = scalar ? tmp() : out(0);
    fused({r}, t == "ReduceL2" ? "x0 sqrt" : "x0 log", p);
    r = p;
  }
  if (scalar) reshape_to(r, {}, out(0));
}

void Importer::reduce_prod(const std::string& x) {
  const Shape xs = shape(x);
  std::vector<int64_t> axes = ais("axes");
  const bool keep = ai("keepdims", 1) != 0;
  for (auto& a : axes) a = axis_in(a, xs.rank());
  const bool scalar = (axes.empty() || axes.size() == size_t(xs.rank())) && !keep;
  const std::map<std::string, Attribute> red = {{"dim", Attribute(i32(axes))}, {"keep_dim", Attribute(keep)}, {"reduce_all", Attribute(axes.empty())}};
  std::string logs = tmp(), negs = tmp(), sg = tmp();
  add("reduce_sum", {{"X", {fused_tmp({x}, "x0 abs log")}}}, {{"Out", {logs}}}, red);
  add("sign", {{"X", {x}}}, {{"Out", {sg}}});
  add("reduce_sum", {{"X", {fused_tmp({sg}, "c:1 x0 sub c:0.5 mul")}}}, {{"Out", {negs}}}, red);
  const std::string expr = fmt::format("x0 exp x1 c:{} mul cos mul", std::numbers::pi);
  if (!scalar) return fused({logs, negs}, expr, out(0));
  reshape_to(fused_tmp({logs, negs}, expr), {}, out(0));
}

void Importer::h_arg() {
  const std::string x = in(0);
  need_float(x);
  const int64_t axis = axis_in(ai("axis", 0), rank(x));
  const std::map<std::string, Attribute> attrs = {{"axis", Attribute(axis)}, {"keepdims", Attribute(ai("keepdims", 1) != 0)}};
  const std::string type = node_->op_type() == "ArgMax" ? "arg_max" : "arg_min";
  if (ai("select_last_index", 0) == 0) return add(type, {{"X", {x}}}, {{"Out", {out(0)}}}, attrs), void();
  // The last of equal extremes: the first one in X reversed along the axis, counted back: n - 1 - i.
  const int64_t n = shape(x)[int(axis)];
  std::string r = tmp(), neg = tmp();
  add(type, {{"X", {reverse(x, int(axis))}}}, {{"Out", {r}}}, attrs);
  add("elementwise_mul", {{"X", {r}}, {"Y", {const_var("minus1", i64_tensor({-1}, Shape{1}))}}}, {{"Out", {neg}}}, {{"axis", Attribute(int32_t(-1))}});
  add("elementwise_add", {{"X", {neg}}, {"Y", {const_var("last", i64_tensor({n - 1}, Shape{1}))}}}, {{"Out", {out(0)}}}, {{"axis", Attribute(int32_t(-1))}});
}

// out[..i..] = data[..indices[..i..]..] along axis: with the axis moved last, a one-hot of each index over the
// axis's n positions [.., m, n] times the data [.., 1, n], summed over n. Only n must be known when the model is
// imported (one_hot's depth); the other dims may be symbolic (a padded batch of sequences [B, T, C] gathered at
// its labels [B, T, 1]), since nothing is reshaped across them.
void Importer::h_gather_elements() {
  const std::string data = in(0);
  const Shape ds = shape(data), is = in_shape(1);
  const int r = ds.rank();
  if (is.rank() != r) unsupported(fmt::format("data {} and indices {} of different ranks", ds.str(), is.str()));
  const int64_t axis = axis_in(ai("axis", 0), r);
  const int64_t n = ds[int(axis)];
  if (n < 0) unsupported(fmt::format("gathering along dim {} of data {}, whose size is unknown (oar needs it for a one-hot)", axis, ds.str()));
  // ONNX lets indices be narrower than data off the axis; oar's product broadcasts instead, so the dims must be
  // equal (or both unknown: equal at run time in the graphs that gather at a padded batch's labels).
  for (int i = 0; i < r; ++i)
    if (i != axis && is[i] != ds[i]) unsupported(fmt::format("indices {} unlike data {} off the axis (oar needs them equal)", is.str(), ds.str()));
  const auto perm = axis_last(r, axis);
  std::string d = transposed(to_f64_if_int(data), perm);
  std::string idx = transposed(wrap_negative(in(1), n), perm);
  std::string i1 = tmp(), hot = tmp(), d1 = tmp(), sum = tmp();
  add("unsqueeze", {{"X", {idx}}}, {{"Out", {i1}}}, {{"axes", Attribute(std::vector<int32_t>{r})}});  // [.., m, 1]
  add("one_hot", {{"X", {i1}}}, {{"Out", {hot}}}, {{"depth", Attribute(int32_t(n))}, {"dtype", Attribute(int32_t(dtype(d)))}});  // [.., m, n]
  add("unsqueeze", {{"X", {d}}}, {{"Out", {d1}}}, {{"axes", Attribute(std::vector<int32_t>{r - 1})}});  // [.., 1, n]
  add("reduce_sum", {{"X", {fused_tmp({d1, hot}, "x0 x1 mul")}}}, {{"Out", {sum}}},
      {{"dim", Attribute(std::vector<int32_t>{r})}, {"keep_dim", Attribute(false)}, {"reduce_all", Attribute(false)}});
  out_like(transposed(sum, inverse(perm)), data);
}

void Importer::h_cumsum() {  // along the axis (moved last): a product with a triangle of ones
  const std::string x = in(0);
  const Shape xs = shape(x);
  const int64_t axis = axis_in(int64_t(need_const(1, "axis").get(0)), xs.rank());
  const int64_t n = xs[int(axis)];
  if (n < 0) unsupported(fmt::format("a cumulative sum over a dim of unknown size in {}", xs.str()));
  const bool excl = ai("exclusive", 0) != 0, rev = ai("reverse", 0) != 0;
  std::string f = to_f64_if_int(x);
  std::vector<double> t(static_cast<size_t>(n * n));
  for (int64_t i = 0; i < n; ++i)  // y_j = sum_i x_i T[i][j]
    for (int64_t j = 0; j < n; ++j) t[size_t(i * n + j)] = rev ? (excl ? i > j : i >= j) : (excl ? i < j : i <= j);
  const auto perm = axis_last(xs.rank(), axis);
  std::string v = transposed(f, perm), y = tmp();
  add("matmul", {{"X", {v}}, {"Y", {const_var("cumsum", cast_const(Tensor::from<double>(t, Shape{n, n}), dtype(f)))}}}, {{"Out", {y}}});
  out_like(transposed(y, inverse(perm)), x);
}

void Importer::h_onehot() {  // off + (on - off) one_hot(index, depth), the new dim moved to `axis`
  const std::string idx = in(0);
  const int64_t depth = int64_t(need_const(1, "depth").get(0));
  const Tensor& values = need_const(2, "values");
  if (values.numel() != 2) fail(fmt::format("values must hold [off, on], got {}", values.numel()));
  const Shape is = shape(idx);
  if (std::count(is.begin(), is.end(), int64_t(-1)) > 1) unsupported(fmt::format("indices {} with several dims of unknown size", is.str()));
  const DType vt = values.dtype();
  if (vt != DType::f32 && vt != DType::f64) unsupported(fmt::format("values of {}", name(vt)));
  std::string i2 = tmp(), hot = tmp(), full = tmp();
  reshape_to(wrap_negative(idx, depth), {-1, 1}, i2);
  add("one_hot", {{"X", {i2}}}, {{"Out", {hot}}}, {{"depth", Attribute(int32_t(depth))}, {"dtype", Attribute(int32_t(vt))}});
  const double off = values.get(0), on = values.get(1);
  std::vector<int64_t> s(is.begin(), is.end());
  s.push_back(depth);
  reshape_to(fused_tmp({hot}, fmt::format("x0 c:{} mul c:{} add", on - off, off)), s, full);
  const int r = is.rank() + 1;
  const int64_t axis = axis_in(ai("axis", -1), r);
  std::vector<int64_t> perm;  // the last dim to `axis`
  for (int i = 0, k = 0; i < r; ++i) perm.push_back(i == axis ? r - 1 : k++);
  add("assign", {{"X", {transposed(full, perm)}}}, {{"Out", {out(0)}}});
}

void Importer::h_range() {
  for (int i = 0; i < 3; ++i) {
    if (!has_in(i)) fail("needs three inputs: start, limit and delta");
    if (const Tensor* t = const_in(i); t && t->numel() != 1) fail(fmt::format("input {} must hold one value, got {}", i, t->shape().str()));
  }
  if (!all_const()) {  // bounds computed when the model runs (a padded length): oar's range op
    const DType dt = in_dtype(0);
    std::vector<std::string> b;
    for (int i = 0; i < 3; ++i) {
      if (in_shape(i).rank() > 1 || (in_shape(i).known() && in_shape(i).numel() != 1)) fail(fmt::format("input {} must be a scalar, got {}", i, in_shape(i).str()));
      b.push_back(cast_to(in(i, false), dt));
    }
    return add("range", {{"Start", {b[0]}}, {"End", {b[1]}}, {"Step", {b[2]}}}, {{"Out", {out(0)}}}), void();
  }
  const double start = const_in(0)->get(0), limit = const_in(1)->get(0), delta = const_in(2)->get(0);
  if (delta == 0) fail("delta is 0");
  const int64_t n = std::max<int64_t>(0, int64_t(std::ceil((limit - start) / delta)));
  if (n > (int64_t(1) << 24)) unsupported("a range of over 16M elements");
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = start + double(i) * delta;
  set_const(0, cast_const(Tensor::from<double>(v, Shape{n}), const_in(0)->dtype()));
}

void Importer::h_expand() {  // X broadcast to a shape: a fused expression that reads X and takes its shape from zeros
  const auto dims = as_i64(need_const(1, "shape"));
  const std::string x = in(0);
  need_float(x);
  Tensor z(Shape(dims), dtype(x));
  std::memset(z.raw(), 0, z.bytes());
  fused({x, const_var("zeros", z)}, "x0", out(0));
}

void Importer::h_eye_like() {  // ones on the k-th diagonal of X's [rows, cols] shape
  const Shape xs = in_shape(0);
  if (xs.rank() != 2 || !xs.known()) fail(fmt::format("needs a 2-D input of known shape, got {}", xs.str()));
  const DType dt = attr("dtype") ? oar_dtype_or_unsupported(int32_t(ai("dtype", 1)), "EyeLike's dtype") : in_dtype(0);
  const int64_t k = ai("k", 0);
  std::vector<double> v(size_t(xs.numel()), 0.0);
  for (int64_t r = 0; r < xs[0]; ++r)
    if (r + k >= 0 && r + k < xs[1]) v[size_t(r * xs[1] + r + k)] = 1;
  set_const(0, cast_const(Tensor::from<double>(v, xs), dt));
}

void Importer::h_tile() {  // each axis repeated by concatenating copies
  std::string x = in(0);
  const auto reps = as_i64(need_const(1, "repeats"));
  if (int(reps.size()) != rank(x)) fail(fmt::format("has {} repeats for rank {}", reps.size(), rank(x)));
  for (size_t a = 0; a < reps.size(); ++a) {
    if (reps[a] < 1) unsupported(fmt::format("repeats {} (oar tiles by 1 or more)", reps[a]));
    if (reps[a] == 1) continue;
    const bool last = std::all_of(reps.begin() + long(a) + 1, reps.end(), [](int64_t r) { return r == 1; });
    std::string o = last ? out(0) : tmp();
    add("concat", {{"X", std::vector<std::string>(size_t(reps[a]), x)}}, {{"Out", {o}}}, {{"axis", Attribute(int32_t(a))}});
    x = o;
  }
  if (std::all_of(reps.begin(), reps.end(), [](int64_t r) { return r == 1; })) add("assign", {{"X", {x}}}, {{"Out", {out(0)}}});
}

void Importer::h_cast_like() {
  const DType to = in_dtype(1);
  if (const Tensor* t = const_in(0)) return set_const(0, cast_const(*t, to));
  const std::string x = in(0);
  need_castable(dtype(x), to);
  add("cast", {{"X", {x}}}, {{"Out", {out(0)}}}, {{"in_dtype", Attribute(int32_t(dtype(x)))}, {"out_dtype", Attribute(int32_t(to))}});
}

void Importer::h_split() {
  const Shape xs = in_shape(0);
  const int64_t axis = axis_in(ai("axis", 0), xs.rank());
  std::vector<int64_t> sections = opset_ >= 13 ? (has_in(1) ? as_i64(need_const(1, "split")) : std::vector<int64_t>{}) : ais("split");
  std::vector<std::string> outs;
  for (int i = 0; i < num_out(); ++i) outs.push_back(has_out(i) ? out(i) : tmp());
  std::map<std::string, Attribute> attrs = {{"axis", Attribute(int32_t(axis))}};
  if (sections.empty()) attrs["num"] = Attribute(int32_t(outs.size()));
  else attrs["sections"] = Attribute(i32(sections));
  add("split", {{"X", {in(0)}}}, {{"Out", outs}}, attrs);
}

}  // namespace oar::onnx::import_detail
