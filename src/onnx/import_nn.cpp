// src/onnx/import_nn.cpp: the handlers of matrix products, convolution, pooling, normalization, losses and recurrent layers (importer.hpp).
#include "src/onnx/importer.hpp"

namespace oar::onnx::import_detail {

void Importer::h_matmul() {
  const std::string a = in(0), b = in(1);
  need_float(a);
  add("matmul", {{"X", {a}}, {"Y", {b}}}, {{"Out", {out(0)}}});
}

void Importer::h_gemm() {  // alpha op(A) op(B) + beta C
  const std::string a = in(0), b = in(1);
  need_float(a);
  const float alpha = af("alpha", 1), beta = af("beta", 1);
  const bool c = has_in(2);
  std::string ab = c ? tmp() : out(0);
  add("matmul", {{"X", {a}}, {"Y", {b}}}, {{"Out", {ab}}},
      {{"transpose_X", Attribute(ai("transA", 0) != 0)}, {"transpose_Y", Attribute(ai("transB", 0) != 0)}, {"alpha", Attribute(alpha)}});
  if (c) fused({ab, in(2)}, beta == 1 ? "x0 x1 add" : fmt::format("x0 x1 c:{} mul add", double(beta)), out(0));
}

void Importer::h_conv() {
  const std::string x = in(0), w = in(1);
  need_float(x);
  const Shape xs = shape(x), ws = shape(w);
  if (xs.rank() != 4) unsupported(fmt::format("a {}-D convolution (oar has 2-D)", xs.rank() - 2));
  const auto k = ais("kernel_shape", {ws[2], ws[3]});
  const auto s = ais("strides", {1, 1}), d = ais("dilations", {1, 1});
  auto p = pads2d(xs, k, s, d);
  const std::map<std::string, Attribute> attrs = {
      {"strides", Attribute(i32(s))}, {"paddings", Attribute(p)}, {"dilations", Attribute(i32(d))}, {"groups", Attribute(int32_t(ai("group", 1)))}};
  if (!has_in(2)) return add("conv2d", {{"Input", {x}}, {"Filter", {w}}}, {{"Output", {out(0)}}}, attrs), void();
  std::string c = tmp();
  add("conv2d", {{"Input", {x}}, {"Filter", {w}}}, {{"Output", {c}}}, attrs);
  add("elementwise_add", {{"X", {c}}, {"Y", {in(2)}}}, {{"Out", {out(0)}}}, {{"axis", Attribute(int32_t(1))}});
}

void Importer::h_conv_transpose() {
  const std::string x = in(0), w = in(1);
  need_float(x);
  const Shape xs = shape(x), ws = shape(w);
  if (xs.rank() != 4) unsupported(fmt::format("a {}-D transposed convolution (oar has 2-D)", xs.rank() - 2));
  if (as("auto_pad", "NOTSET") != "NOTSET") unsupported(fmt::format("auto_pad {}", as("auto_pad", "")));
  for (auto v : ais("output_padding", {0, 0}))
    if (v != 0) unsupported(fmt::format("output_padding [{}]", fmt::join(ais("output_padding"), ", ")));
  const auto k = ais("kernel_shape", {ws[2], ws[3]});
  if (k != std::vector<int64_t>{ws[2], ws[3]}) fail(fmt::format("kernel_shape [{}] differs from W {}", fmt::join(k, ", "), ws.str()));
  const auto p = ais("pads", {0, 0, 0, 0});
  if (p.size() != 4 || p[0] != p[2] || p[1] != p[3]) unsupported(fmt::format("pads [{}] (oar pads both sides alike)", fmt::join(p, ", ")));
  std::map<std::string, Attribute> attrs = {{"strides", Attribute(i32(ais("strides", {1, 1})))},
                                            {"paddings", Attribute(std::vector<int32_t>{int32_t(p[0]), int32_t(p[1])})},
                                            {"dilations", Attribute(i32(ais("dilations", {1, 1})))},
                                            {"groups", Attribute(int32_t(ai("group", 1)))}};
  if (attr("output_shape")) {
    auto os = ais("output_shape");
    if (os.size() != 2) unsupported(fmt::format("output_shape [{}]", fmt::join(os, ", ")));
    attrs["output_size"] = Attribute(i32(os));
  }
  if (!has_in(2)) return add("conv2d_transpose", {{"Input", {x}}, {"Filter", {w}}}, {{"Output", {out(0)}}}, attrs), void();
  std::string c = tmp();
  add("conv2d_transpose", {{"Input", {x}}, {"Filter", {w}}}, {{"Output", {c}}}, attrs);
  add("elementwise_add", {{"X", {c}}, {"Y", {in(2)}}}, {{"Out", {out(0)}}}, {{"axis", Attribute(int32_t(1))}});
}

void Importer::h_pool() {
  const bool max = node_->op_type() == "MaxPool";
  only_outputs(1);
  const std::string x = in(0);
  need_float(x);
  const Shape xs = shape(x);
  if (xs.rank() != 4) unsupported(fmt::format("{}-D pooling (oar has 2-D)", xs.rank() - 2));
  const auto k = ais("kernel_shape");
  if (k.size() != 2) fail("needs a kernel_shape of two dims");
  const auto s = ais("strides", {1, 1}), d = ais("dilations", {1, 1});
  if (d != std::vector<int64_t>{1, 1}) unsupported(fmt::format("dilations [{}]", fmt::join(d, ", ")));
  if (ai("storage_order", 0) != 0) unsupported("storage_order 1");
  auto p = pads2d(xs, k, s, d);
  add("pool2d", {{"X", {x}}}, {{"Out", {out(0)}}},
      {{"pooling_type", Attribute(std::string(max ? "max" : "avg"))},
       {"ksize", Attribute(i32(k))},
       {"strides", Attribute(i32(s))},
       {"paddings", Attribute(p)},
       {"ceil_mode", Attribute(ai("ceil_mode", 0) != 0)},
       {"exclusive", Attribute(ai("count_include_pad", 0) == 0)}});
}

void Importer::h_global_pool() {
  const std::string x = in(0);
  need_float(x);
  if (rank(x) != 4) unsupported(fmt::format("{}-D pooling (oar has 2-D)", rank(x) - 2));
  add("pool2d", {{"X", {x}}}, {{"Out", {out(0)}}},
      {{"pooling_type", Attribute(std::string(node_->op_type() == "GlobalMaxPool" ? "max" : "avg"))},
       {"ksize", Attribute(std::vector<int32_t>{1, 1})},
       {"global_pooling", Attribute(true)}});
}

void Importer::h_batch_norm() {
  only_outputs(1);
  if (ai("training_mode", 0) != 0) unsupported("training_mode 1");
  if (ai("spatial", 1) != 1) unsupported("spatial 0 (statistics per element, before opset 9)");
  if (opset_ < 7 && ai("is_test", 0) == 0) unsupported("is_test 0 (training, before opset 7)");
  const std::string x = in(0);
  need_float(x);
  // Fluid's layout: the running statistics updated in place (is_test leaves them), the batch's kept for the gradient.
  const std::string mean = in(3, false), var = in(4, false);  // running statistics, not trained
  add("batch_norm", {{"X", {x}}, {"Scale", {in(1)}}, {"Bias", {in(2)}}, {"Mean", {mean}}, {"Variance", {var}}},
      {{"Y", {out(0)}}, {"MeanOut", {mean}}, {"VarianceOut", {var}}, {"SavedMean", {tmp()}}, {"SavedVariance", {tmp()}}},
      {{"epsilon", Attribute(af("epsilon", 1e-5f))}, {"momentum", Attribute(af("momentum", 0.9f))}, {"is_test", Attribute(true)}});
}

void Importer::h_layer_norm() {
  only_outputs(3);
  const std::string x = in(0);
  need_float(x);
  const Shape xs = shape(x);
  const int64_t axis = axis_in(ai("axis", -1), xs.rank());
  // oar's Scale and Bias are flat: [prod(normalized dims)].
  auto flat = [&](int i) -> std::string {
    if (const Tensor* t = const_in(i)) {
      if (t->rank() == 1) return in(i);
      const_[in_name(i) + "/flat"] = t->view(Shape{t->numel()});
      return materialize(in_name(i) + "/flat");
    }
    std::string o = tmp();
    reshape_to(in(i), {-1}, o);
    return o;
  };
  // Over every dim (axis 0): oar's layer_norm keeps at least one row, so X gets a leading dim of 1.
  std::string xin = x;
  if (axis == 0) {
    xin = tmp();
    add("unsqueeze", {{"X", {x}}}, {{"Out", {xin}}}, {{"axes", Attribute(std::vector<int32_t>{0})}});
  }
  std::vector<SlotArgs> ins = {{"X", {xin}}, {"Scale", {flat(1)}}};
  if (has_in(2)) ins.push_back({"Bias", {flat(2)}});
  const std::string mean = tmp(), var = tmp();
  const float eps = af("epsilon", 1e-5f);
  const std::string y = axis == 0 ? tmp() : out(0);
  add("layer_norm", ins, {{"Y", {y}}, {"Mean", {mean}}, {"Variance", {var}}}, {{"begin_norm_axis", Attribute(int32_t(axis == 0 ? 1 : axis))}, {"epsilon", Attribute(eps)}});
  if (axis == 0) add("squeeze", {{"X", {y}}}, {{"Out", {out(0)}}}, {{"axes", Attribute(std::vector<int32_t>{0})}});
  // ONNX's Mean and InvStdDev keep X's rank, 1 in the normalized dims; oar's statistics are flat [rows].
  if (has_out(1) || has_out(2)) {
    std::vector<int64_t> s;
    for (int i = 0; i < xs.rank(); ++i) s.push_back(i >= axis ? 1 : (xs[i] < 0 ? (i == 0 ? -1 : 0) : xs[i]));
    if (has_out(1)) reshape_to(mean, s, out(1));
    if (has_out(2)) reshape_to(fused_tmp({var}, fmt::format("x0 c:{} add sqrt reciprocal", double(eps))), s, out(2));
  }
}

void Importer::h_softmax() {
  const bool log = node_->op_type() == "LogSoftmax";
  const std::string x = in(0);
  need_float(x);
  const Shape xs = shape(x);
  const std::string type = log ? "log_softmax" : "softmax";
  if (opset_ >= 13) {
    const int64_t axis = axis_in(ai("axis", -1), xs.rank());
    return add(type, {{"X", {x}}}, {{"Out", {out(0)}}}, {{"axis", Attribute(int32_t(axis))}}), void();
  }
  // Before opset 13: over X flattened to 2-D at axis (default 1).
  const int64_t axis = axis_in(ai("axis", 1), xs.rank());
  if (axis == xs.rank() - 1) return add(type, {{"X", {x}}}, {{"Out", {out(0)}}}, {{"axis", Attribute(int32_t(-1))}}), void();
  for (int i = 1; i < xs.rank(); ++i)
    if (xs[i] < 0) unsupported("softmax over flattened dims of unknown size (before opset 13)");
  std::string f = tmp(), s = tmp();
  add("flatten", {{"X", {x}}}, {{"Out", {f}}}, {{"axis", Attribute(int32_t(axis))}});
  add(type, {{"X", {f}}}, {{"Out", {s}}}, {{"axis", Attribute(int32_t(-1))}});
  std::vector<int64_t> back(xs.begin(), xs.end());
  back[0] = xs[0] < 0 ? -1 : xs[0];
  reshape_to(s, back, out(0));
}

void Importer::nll(const std::string& x, const std::string& target, const std::string& weight) {
  need_float(x);
  const Shape xs = shape(x), ts = shape(target);
  const DType dt = dtype(x);
  if (xs.rank() < 2) fail(fmt::format("needs scores [N, C, ...], got {}", xs.str()));
  const int64_t classes = xs[1];
  if (classes < 0) unsupported("a class dim of unknown size");
  for (int i = 2; i < xs.rank(); ++i)
    if (xs[i] < 0) unsupported(fmt::format("scores {} with dims of unknown size", xs.str()));
  if (!is_integer(dtype(target))) fail(fmt::format("takes class indices, got {}", name(dtype(target))));
  std::string scores = x;
  if (xs.rank() > 2) {
    std::vector<int64_t> perm = {0};
    for (int i = 2; i < xs.rank(); ++i) perm.push_back(i);
    perm.push_back(1);
    std::string t = tmp();
    add("transpose", {{"X", {x}}}, {{"Out", {t}}}, {{"axis", Attribute(i32(perm))}});
    scores = t;
  }
  std::string flat = tmp(), idx = tmp();
  reshape_to(scores, {-1, classes}, flat);
  std::string t64 = dtype(target) == DType::i64 ? target : cast_to(target, DType::i64);
  reshape_to(t64, {-1, 1}, idx);  // [M, 1]
  std::string keep;  // 1 where the target counts, in x's dtype
  if (attr("ignore_index")) {
    std::string ne = tmp();
    add("not_equal", {{"X", {idx}}, {"Y", {const_var("ignore_index", i64_tensor({ai("ignore_index", 0)}, Shape{1}))}}}, {{"Out", {ne}}},
        {{"axis", Attribute(int32_t(-1))}});
    std::string safe = tmp();
    add("elementwise_mul", {{"X", {idx}}, {"Y", {cast_to(ne, DType::i64)}}}, {{"Out", {safe}}}, {{"axis", Attribute(int32_t(-1))}});
    idx = safe;
    keep = cast_to(ne, dt);  // [M, 1]
  }
  std::string hot = tmp();
  add("one_hot", {{"X", {idx}}}, {{"Out", {hot}}}, {{"depth", Attribute(int32_t(classes))}, {"dtype", Attribute(int32_t(dt))}});
  std::string picked = tmp();  // [M, 1]: -x[m, t_m]
  add("reduce_sum", {{"X", {fused_tmp({flat, hot}, "x0 x1 mul neg")}}}, {{"Out", {picked}}},
      {{"dim", Attribute(std::vector<int32_t>{1})}, {"keep_dim", Attribute(true)}, {"reduce_all", Attribute(false)}});
  std::string w = keep;
  if (!weight.empty()) {
    std::string flat_idx = tmp(), wm = tmp(), wm2 = tmp();
    reshape_to(idx, {-1}, flat_idx);
    add("gather", {{"X", {weight}}, {"Index", {flat_idx}}}, {{"Out", {wm}}});
    reshape_to(wm, {-1, 1}, wm2);
    w = keep.empty() ? wm2 : fused_tmp({wm2, keep}, "x0 x1 mul");
  }
  std::string loss = w.empty() ? picked : fused_tmp({picked, w}, "x0 x1 mul");
  const std::string reduction = as("reduction", "mean");
  if (reduction == "none") {
    std::vector<int64_t> back = {ts[0] < 0 ? -1 : ts[0]};
    for (int i = 1; i < ts.rank(); ++i) back.push_back(ts[i]);
    return reshape_to(loss, back, out(0));
  }
  auto total = [&](const std::string& v) {
    std::string r = tmp();
    add("reduce_sum", {{"X", {v}}}, {{"Out", {r}}}, {{"dim", Attribute(std::vector<int32_t>{})}, {"keep_dim", Attribute(false)}, {"reduce_all", Attribute(true)}});
    return r;
  };
  std::string r;
  if (reduction == "sum") r = total(loss);
  else if (reduction == "mean") r = w.empty() ? [&] { std::string m = tmp(); add("mean", {{"X", {loss}}}, {{"Out", {m}}}); return m; }()
                                              : fused_tmp({total(loss), total(w)}, "x0 x1 div");
  else fail(fmt::format("reduction '{}' is not one of none, sum, mean", reduction));
  reshape_to(r, {}, out(0));  // a scalar, as ONNX's reduced loss is
}

void Importer::h_nll() { nll(in(0), in(1), has_in(2) ? in(2) : std::string()); }

void Importer::h_softmax_xent() {  // log_softmax over the class axis, then the NLL; log_prob (output 1) when asked
  const std::string x = in(0);
  need_float(x);
  const std::string lp = has_out(1) ? out(1) : tmp();
  add("log_softmax", {{"X", {x}}}, {{"Out", {lp}}}, {{"axis", Attribute(int32_t(1))}});
  nll(lp, in(1), has_in(2) ? in(2) : std::string());
}

void Importer::h_topk() {
  const std::string x = in(0);
  const int r = rank(x);
  if (axis_in(ai("axis", -1), r) != r - 1) unsupported("an axis other than the last");
  if (ai("largest", 1) != 1) unsupported("largest 0 (the k smallest)");
  if (ai("sorted", 1) != 1) unsupported("sorted 0");
  const int64_t k = opset_ >= 10 ? int64_t(need_const(1, "K").get(0)) : ai("k", 1);
  add("top_k", {{"X", {x}}}, {{"Out", {out(0)}}, {"Indices", {has_out(1) ? out(1) : tmp()}}}, {{"k", Attribute(int32_t(k))}});
}

void Importer::h_depth_space() {
  const std::string x = in(0);
  const Shape xs = shape(x);
  if (xs.rank() != 4) fail(fmt::format("needs an [N, C, H, W] input, got {}", xs.str()));
  for (int i = 1; i < 4; ++i)
    if (xs[i] < 0) unsupported(fmt::format("input {} with dims of unknown size", xs.str()));
  const int64_t b = ai("blocksize", 0), c = xs[1], h = xs[2], w = xs[3];
  if (b <= 0) fail("needs a blocksize > 0");
  std::vector<int64_t> s1, perm, s2;
  if (node_->op_type() == "DepthToSpace") {
    if (c % (b * b)) fail(fmt::format("channels {} are not a multiple of blocksize^2 = {}", c, b * b));
    if (as("mode", "DCR") == "DCR") s1 = {0, b, b, c / (b * b), h, w}, perm = {0, 3, 4, 1, 5, 2};
    else s1 = {0, c / (b * b), b, b, h, w}, perm = {0, 1, 4, 2, 5, 3};
    s2 = {0, c / (b * b), h * b, w * b};
  } else {
    if (h % b || w % b) fail(fmt::format("H {} and W {} are not multiples of blocksize {}", h, w, b));
    s1 = {0, c, h / b, b, w / b, b}, perm = {0, 3, 5, 1, 2, 4}, s2 = {0, c * b * b, h / b, w / b};
  }
  std::string r = tmp(), t = tmp();
  reshape_to(x, s1, r);
  add("transpose", {{"X", {r}}}, {{"Out", {t}}}, {{"axis", Attribute(i32(perm))}});
  reshape_to(t, s2, out(0));
}

void Importer::h_instance_norm() {  // per example and channel over the spatial dims: scale (x - mean) / sqrt(var + eps) + B
  const std::string x = in(0);
  need_float(x);
  const Shape xs = shape(x);
  if (xs.rank() < 3) fail(fmt::format("needs [N, C, D1, ...], got {}", xs.str()));
  std::vector<int32_t> axes;
  for (int i = 2; i < xs.rank(); ++i) axes.push_back(i);
  auto per_channel = [&](int i) {  // [C] -> [C, 1, ...] for numpy's broadcast over [N, C, D1, ...]
    std::vector<int64_t> s = {-1};
    for (int k = 2; k < xs.rank(); ++k) s.push_back(1);
    std::string o = tmp();
    reshape_to(in(i), s, o);
    return o;
  };
  const std::map<std::string, Attribute> red = {{"dim", Attribute(axes)}, {"keep_dim", Attribute(true)}, {"reduce_all", Attribute(false)}};
  std::string mean = tmp();
  add("reduce_mean", {{"X", {x}}}, {{"Out", {mean}}}, red);
  std::string d = fused_tmp({x, mean}, "x0 x1 sub");
  std::string var = tmp();
  add("reduce_mean", {{"X", {fused_tmp({d}, "x0 square")}}}, {{"Out", {var}}}, red);
  fused({d, var, per_channel(1), per_channel(2)}, fmt::format("x0 x1 c:{} add sqrt div x2 mul x3 add", double(af("epsilon", 1e-5f))), out(0));
}

void Importer::h_hardmax() {  // one-hot of the first largest along the axis (before opset 13: of X flattened at axis)
  const std::string x = in(0);
  need_float(x);
  const Shape xs = shape(x);
  const int64_t axis = axis_in(ai("axis", opset_ >= 13 ? -1 : 1), xs.rank());
  if (!xs.known()) unsupported(fmt::format("input {} of unknown shape", xs.str()));
  std::vector<int64_t> s2;  // X as [rows, n] with the axis (or the flattened tail) last
  std::string v = x;
  std::vector<int64_t> perm;
  if (opset_ < 13) {
    s2 = {xs.numel(0, int(axis)), xs.numel(int(axis), xs.rank())};
  } else {
    for (int i = 0; i < xs.rank(); ++i)
      if (i != axis) perm.push_back(i);
    perm.push_back(axis);
    if (axis != xs.rank() - 1) {
      v = tmp();
      add("transpose", {{"X", {x}}}, {{"Out", {v}}}, {{"axis", Attribute(i32(perm))}});
    }
    s2 = {xs.numel() / xs[int(axis)], xs[int(axis)]};
  }
  std::string flat = tmp(), am = tmp(), hot = tmp();
  reshape_to(v, s2, flat);
  add("arg_max", {{"X", {flat}}}, {{"Out", {am}}}, {{"axis", Attribute(int64_t(1))}, {"keepdims", Attribute(true)}});
  add("one_hot", {{"X", {am}}}, {{"Out", {hot}}}, {{"depth", Attribute(int32_t(s2[1]))}, {"dtype", Attribute(int32_t(dtype(x)))}});
  if (opset_ < 13 || axis == xs.rank() - 1) return reshape_to(hot, std::vector<int64_t>(xs.begin(), xs.end()), out(0));
  std::vector<int64_t> moved;  // X's dims in the transposed order, then back
  for (auto p : perm) moved.push_back(xs[int(p)]);
  std::string r = tmp();
  reshape_to(hot, moved, r);
  std::vector<int64_t> inv(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) inv[size_t(perm[i])] = int64_t(i);
  add("transpose", {{"X", {r}}}, {{"Out", {out(0)}}}, {{"axis", Attribute(i32(inv))}});
}

void Importer::h_rnn() {
  const bool lstm = node_->op_type() == "LSTM";
  const std::string dir = as("direction", "forward");
  if (dir != "forward" && dir != "reverse") unsupported(fmt::format("direction {}", dir));
  if (attr("clip")) unsupported("clip");
  if (ai("input_forget", 0) != 0) unsupported("input_forget 1");
  if (!lstm && ai("linear_before_reset", 0) != 0) unsupported("linear_before_reset 1");
  if (auto* a = attr("activations")) {
    std::vector<std::string> got(a->strings().begin(), a->strings().end());
    std::vector<std::string> dflt = lstm ? std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"} : std::vector<std::string>{"Sigmoid", "Tanh"};
    if (got != dflt) unsupported(fmt::format("activations [{}]", fmt::join(got, ", ")));
  }
  const bool batch_major = ai("layout", 0) == 1;
  const std::string x = in(0);
  need_float(x);
  const Shape xs = shape(x);
  if (xs.rank() != 3) fail(fmt::format("needs X of rank 3, got {}", xs.str()));
  const Shape ws = in_shape(1), rs = in_shape(2);
  const int64_t g = lstm ? 4 : 3, h = rs.rank() == 3 ? rs[2] : -1, in_size = ws.rank() == 3 ? ws[2] : -1;
  if (h <= 0 || in_size <= 0 || ws[0] != 1 || rs[0] != 1 || ws[1] != g * h || rs[1] != g * h)
    fail(fmt::format("has W {} and R {} (one direction of known sizes)", ws.str(), rs.str()));
  const DType dt = dtype(x);
  // oar block k (LSTM c, i, f, o; GRU u, r, c) is ONNX block src[k] (LSTM i, o, f, c; GRU z, r, h) times sgn[k]:
  // ONNX's rows gathered into oar's order and scaled, as ops, so that W, R and B may be computed at run time
  // and, as parameters, are trained through the gather.
  const std::vector<int64_t> src = lstm ? std::vector<int64_t>{3, 0, 2, 1} : std::vector<int64_t>{0, 1, 2};
  std::vector<int64_t> order;
  std::vector<double> sign;
  for (int64_t k = 0; k < g; ++k)
    for (int64_t j = 0; j < h; ++j) order.push_back(src[size_t(k)] * h + j), sign.push_back(!lstm && k == 0 ? -1.0 : 1.0);
  const std::string order_v = const_var("gate_order", i64_tensor(order, Shape{g * h}));
  const std::string sign_v = const_var("gate_sign", cast_const(Tensor::from<double>(sign, Shape{g * h, 1}), dt));
  auto reorder = [&](const std::string& m, int64_t cols) {  // [g*h, cols] in ONNX's order -> oar's, signed
    std::string gathered = tmp();
    add("gather", {{"X", {m}}, {"Index", {order_v}}}, {{"Out", {gathered}}});
    std::string r2 = tmp();
    reshape_to(gathered, {g * h, cols}, r2);
    return fused_tmp({r2, sign_v}, "x0 x1 mul");
  };
  std::string w2 = tmp(), r2 = tmp();
  reshape_to(in(1), {g * h, in_size}, w2);
  reshape_to(in(2), {g * h, h}, r2);
  const std::string wp = transposed(reorder(w2, in_size), {1, 0});  // [I, g*h]: the input projection
  std::string weight = transposed(reorder(r2, h), {1, 0});        // [h, g*h]: h_{t-1} Weight
  if (!lstm) {  // oar's GRU Weight holds W_ur [D, 2D] row-major, then W_c [D, D]
    std::string ur = tmp(), c = tmp(), urf = tmp(), cf = tmp(), both = tmp(), w3 = tmp();
    add("split", {{"X", {weight}}}, {{"Out", {ur, c}}}, {{"axis", Attribute(int32_t(1))}, {"sections", Attribute(std::vector<int32_t>{int32_t(2 * h), int32_t(h)})}});
    reshape_to(ur, {-1}, urf);
    reshape_to(c, {-1}, cf);
    add("concat", {{"X", {urf, cf}}}, {{"Out", {both}}}, {{"axis", Attribute(int32_t(0))}});
    reshape_to(both, {h, g * h}, w3);
    weight = w3;
  }
  std::string bias;  // [1, g*h] (+ 3h peepholes): Wb + Rb in oar's order
  if (has_in(3)) {
    std::string b2 = tmp(), bs = tmp(), bcol = tmp();
    reshape_to(in(3), {2, g * h}, b2);
    add("reduce_sum", {{"X", {b2}}}, {{"Out", {bs}}}, {{"dim", Attribute(std::vector<int32_t>{0})}, {"keep_dim", Attribute(false)}, {"reduce_all", Attribute(false)}});
    reshape_to(bs, {g * h, 1}, bcol);
    std::string ob = reorder(bcol, 1), row = tmp();
    reshape_to(ob, {1, g * h}, row);
    bias = row;
  } else {
    bias = const_var("bias", cast_const(Tensor::from<double>(std::vector<double>(size_t(g * h), 0.0), Shape{1, g * h}), dt));
  }
  const bool peep = lstm && has_in(7);
  if (peep) {  // ONNX's P is [i, o, f]; oar's peepholes follow the bias as W_ic, W_fc, W_oc
    std::vector<int64_t> pi;
    for (int64_t blk : {0, 2, 1})
      for (int64_t j = 0; j < h; ++j) pi.push_back(blk * h + j);
    std::string p1 = tmp(), pg = tmp(), prow = tmp(), full = tmp();
    reshape_to(in(7), {3 * h}, p1);
    add("gather", {{"X", {p1}}, {"Index", {const_var("peephole_order", i64_tensor(pi, Shape{3 * h}))}}}, {{"Out", {pg}}});
    reshape_to(pg, {1, 3 * h}, prow);
    add("concat", {{"X", {bias, prow}}}, {{"Out", {full}}}, {{"axis", Attribute(int32_t(1))}});
    bias = full;
  }
  // [batch, steps, input] and each sequence's length
  const std::string bx = batch_major ? x : transposed(x, {1, 0, 2});
  const int64_t n = batch_major ? xs[0] : xs[1], t = batch_major ? xs[1] : xs[0];
  std::string lens;
  if (has_in(4)) {
    lens = cast_to(in(4), DType::i64);
  } else {
    if (n < 0 || t < 0) unsupported(fmt::format("no sequence_lens and X {} of unknown size", xs.str()));
    lens = const_var("lengths", i64_tensor(std::vector<int64_t>(size_t(n), t), Shape{n}));
  }
  std::string rows = tmp(), proj = tmp();
  add("sequence_unpad", {{"X", {bx}}, {"Length", {lens}}}, {{"Out", {rows}}});
  add("mul", {{"X", {rows}}, {"Y", {wp}}}, {{"Out", {proj}}},
      {{"x_num_col_dims", Attribute(int32_t(1))}, {"y_num_col_dims", Attribute(int32_t(1))}});
  std::vector<SlotArgs> ins = {{"Input", {proj}}, {"Weight", {weight}}, {"Bias", {bias}}};
  auto state = [&](int i, const char* slot) {  // [1, batch, H] -> [batch, H]
    if (!has_in(i)) return;
    std::string s2 = tmp();
    reshape_to(in(i), {-1, h}, s2);
    ins.push_back({slot, {s2}});
  };
  state(5, "H0");
  if (lstm) state(6, "C0");
  const std::string hidden = tmp(), cell = tmp();
  if (lstm)
    add("lstm", ins, {{"Hidden", {hidden}}, {"Cell", {cell}}, {"BatchGate", {tmp()}}, {"BatchCellPreAct", {tmp()}}},
        {{"use_peepholes", Attribute(peep)}, {"is_reverse", Attribute(dir == "reverse")}});
  else
    add("gru", ins, {{"Hidden", {hidden}}, {"BatchGate", {tmp()}}, {"BatchResetHiddenPrev", {tmp()}}, {"BatchHidden", {tmp()}}},
        {{"is_reverse", Attribute(dir == "reverse")}});
  if (has_out(0)) {  // Y: [steps, 1, batch, H] (layout 1: [batch, steps, 1, H])
    std::string padded = tmp();
    add("sequence_pad", {{"X", {hidden}}, {"PadValue", {const_var("pad", cast_const(Tensor::from<double>({0.0}, Shape{1}), dt))}}},
        {{"Out", {padded}}, {"Length", {tmp()}}},
        {{"padded_length", Attribute(int32_t(t))}});
    std::string y = batch_major ? padded : transposed(padded, {1, 0, 2});
    add("unsqueeze", {{"X", {y}}}, {{"Out", {out(0)}}}, {{"axes", Attribute(std::vector<int32_t>{batch_major ? 2 : 1})}});
  }
  auto last = [&](int i, const std::string& v) {  // Y_h / Y_c: [1, batch, H] (layout 1: [batch, 1, H])
    if (!has_out(i)) return;
    std::string l = tmp();
    add("sequence_pool", {{"X", {v}}}, {{"Out", {l}}, {"MaxIndex", {tmp()}}}, {{"pooltype", Attribute(std::string(dir == "reverse" ? "FIRST" : "LAST"))}});
    add("unsqueeze", {{"X", {l}}}, {{"Out", {out(i)}}}, {{"axes", Attribute(std::vector<int32_t>{batch_major ? 1 : 0})}});
  };
  last(1, hidden);
  if (lstm) last(2, cell);
  else only_outputs(2);
}

}  // namespace oar::onnx::import_detail
