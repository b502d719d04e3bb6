// oar/layers/nn.hpp: the network layers: data, fc, embedding, conv2d, conv2d_transpose, pool2d, batch_norm,
// layer_norm, dropout. Each records a creation on the current tape; options are fluent setters on the result.
#pragma once
#include "oar/layers/activations.hpp"
#include "oar/ops/batch_norm.hpp"
#include "oar/ops/conv2d.hpp"
#include "oar/ops/conv2d_transpose.hpp"
#include "oar/ops/dropout.hpp"
#include "oar/ops/layer_norm.hpp"
#include "oar/ops/lookup_table.hpp"
#include "oar/ops/mul.hpp"
#include "oar/ops/pool2d.hpp"
#include "oar/ops/sum.hpp"

namespace oar {

/// A data variable fed at run time. `shape` includes the batch dim (-1 = unknown): data("img", f32, {-1, 784}).
/// Options: `.set("lod_level", 1)`.
inline Var data(std::string name, DType dtype, Shape shape, std::source_location loc = std::source_location::current()) {
  OAR_CHECK(!name.empty(), "data: a data variable needs a name");
  auto replay = [name, dtype, shape](LayerHelper& h) {
    int lod = h.option<int32_t>("lod_level", 0);
    Block& g = h.main().global_block();
    if (g.has_var(name)) throw Error(fmt::format("data: a variable named '{}' already exists", name), h.origin());
    Variable& v = g.create_var(name, {.dtype = dtype, .shape = shape, .lod_level = lod});
    v.set_stop_gradient(true).set_origin(h.origin());
    return std::vector<std::string>{name};
  };
  return record_layer("data", {}, std::move(replay), loc)[0];
}

/// out = act(sum_i flatten(x_i, num_flatten_dims) * W_i + b)
/// x: [d0..d(k-1), rest...] -> [d0..d(k-1), size]; W_i: [prod(rest), size], Xavier; b: [size], zero.
/// Options: .set("num_flatten_dims", k) (default 1), .act, .param (per input via .params), .bias(false).
///   auto h = oar::fc(img, 200).act(oar::relu);
inline Var fc(std::vector<Var> inputs, int64_t size, std::source_location loc = std::source_location::current()) {
  OAR_CHECK(size > 0, "fc: size must be positive, got {}", size);
  OAR_CHECK(!inputs.empty(), "fc: needs at least one input");
  auto replay = [size](LayerHelper& h) {
    int k = h.option<int32_t>("num_flatten_dims", 1);
    DType dtype = h.input_dtype();
    std::vector<std::string> partial;
    for (size_t i = 0; i < h.num_inputs(); ++i) {
      const Variable& x = h.input_var(i);
      if (x.shape().rank() <= k)
        throw Error(fmt::format("fc: input {} has shape {}, which has no dims after num_flatten_dims = {}", x.name(), x.shape().str(), k), h.origin());
      int64_t in = x.shape().numel(k, x.shape().rank());
      if (in < 0)
        throw Error(fmt::format("fc: input {} has shape {}: the dims after num_flatten_dims = {} must be known", x.name(), x.shape().str(), k), h.origin());
      Variable& w = h.create_parameter(h.param_attr(i), Shape{in, size}, dtype, false);
      Variable& out = h.create_tmp(dtype);
      using M = ops::Mul;
      Operator op{std::string(M::type)};
      op.set_input(M::x, {x.name()}).set_input(M::y, {w.name()}).set_output(M::out, {out.name()});
      op.set_attr(M::x_num_col_dims, int32_t(k)).set_attr(M::y_num_col_dims, int32_t(1));
      h.append_op(std::move(op));
      partial.push_back(out.name());
    }
    std::string pre = partial[0];
    if (partial.size() > 1) {
      Variable& s = h.create_tmp(dtype);
      Operator op{std::string(ops::Sum::type)};
      op.set_input(ops::Sum::x, partial).set_output(ops::Sum::out, {s.name()});
      h.append_op(std::move(op));
      pre = s.name();
    }
    return std::vector<std::string>{h.append_activation(h.append_bias(pre, k))};
  };
  return record_layer("fc", std::move(inputs), std::move(replay), loc)[0];
}
inline Var fc(const Var& input, int64_t size, std::source_location loc = std::source_location::current()) {
  return fc(std::vector<Var>{input}, size, loc);
}

/// out[i] = W[ids[i]]; ids: i64 [N, 1] -> [N, dim]; W: [vocab, dim], Xavier.
/// Options: .set("is_sparse", true), .set("padding_idx", k), .param("shared_w") to share the table.
inline Var embedding(const Var& ids, int64_t vocab, int64_t dim, std::source_location loc = std::source_location::current()) {
  OAR_CHECK(vocab > 0 && dim > 0, "embedding: vocab and dim must be positive, got {} x {}", vocab, dim);
  auto replay = [vocab, dim](LayerHelper& h) {
    DType dtype = DType(h.option<int32_t>("dtype", int32_t(DType::f32)));
    Variable& w = h.create_parameter(h.param_attr(), Shape{vocab, dim}, dtype, false);
    Variable& out = h.create_tmp(dtype);
    int64_t pad = h.option<int64_t>("padding_idx", -1);
    using L = ops::LookupTable;
    Operator op{std::string(L::type)};
    op.set_input(L::w, {w.name()}).set_input(L::ids, {h.input()}).set_output(L::out, {out.name()});
    op.set_attr(L::is_sparse, h.option<bool>("is_sparse", false)).set_attr(L::padding_idx, int64_t(pad < -1 ? vocab + pad : pad));
    h.append_op(std::move(op));
    return std::vector<std::string>{out.name()};
  };
  return record_layer("embedding", {ids}, std::move(replay), loc)[0];
}

/// 2-D convolution. input: [N, C, H, W] -> [N, num_filters, H', W'], H' = (H + 2p - (d (k - 1) + 1)) / s + 1.
/// Filter [num_filters, C / groups, k, k], Normal(0, sqrt(2 / (k^2 C))); bias [num_filters] added on axis 1.
/// Options: .set("stride", s), .set("padding", p), .set("dilation", d), .set("groups", g), .act, .bias(false).
inline Var conv2d(const Var& input, int64_t num_filters, int64_t filter_size, std::source_location loc = std::source_location::current()) {
  OAR_CHECK(num_filters > 0 && filter_size > 0, "conv2d: num_filters and filter_size must be positive");
  auto replay = [num_filters, filter_size](LayerHelper& h) {
    const Variable& x = h.input_var();
    if (x.shape().rank() != 4)
      throw Error(fmt::format("conv2d: input {} must be [N, C, H, W], got {}", x.name(), x.shape().str()), h.origin());
    int s = h.option<int32_t>("stride", 1), p = h.option<int32_t>("padding", 0), d = h.option<int32_t>("dilation", 1), g = h.option<int32_t>("groups", 1);
    int64_t c = x.shape()[1];
    if (c < 0) throw Error(fmt::format("conv2d: the channel dim of {} must be known", x.shape().str()), h.origin());
    if (g <= 0 || c % g != 0 || num_filters % g != 0)
      throw Error(fmt::format("conv2d: groups = {} must divide the input channels {} and num_filters {}", g, c, num_filters), h.origin());
    double std = std::sqrt(2.0 / double(filter_size * filter_size * c));
    Variable& w = h.create_parameter(h.param_attr(), Shape{num_filters, c / g, filter_size, filter_size}, x.dtype(), false, Normal(0, std));
    Variable& out = h.create_tmp(x.dtype());
    using C = ops::Conv2d;
    Operator op{std::string(C::type)};
    op.set_input(C::input, {x.name()}).set_input(C::filter, {w.name()}).set_output(C::output, {out.name()});
    op.set_attr(C::strides, std::vector<int32_t>{s, s}).set_attr(C::paddings, std::vector<int32_t>{p, p});
    op.set_attr(C::dilations, std::vector<int32_t>{d, d}).set_attr(C::groups, int32_t(g));
    h.apply_options(op);
    h.append_op(std::move(op));
    return std::vector<std::string>{h.append_activation(h.append_bias(out.name(), 1, 2))};
  };
  return record_layer("conv2d", {input}, std::move(replay), loc)[0];
}

/// Transposed 2-D convolution. input [N, C, H, W] -> [N, num_filters, H', W'], H' = (H - 1) s - 2p + d (k - 1) + 1.
inline Var conv2d_transpose(const Var& input, int64_t num_filters, int64_t filter_size, std::source_location loc = std::source_location::current()) {
  auto replay = [num_filters, filter_size](LayerHelper& h) {
    const Variable& x = h.input_var();
    if (x.shape().rank() != 4)
      throw Error(fmt::format("conv2d_transpose: input {} must be [N, C, H, W], got {}", x.name(), x.shape().str()), h.origin());
    int s = h.option<int32_t>("stride", 1), p = h.option<int32_t>("padding", 0), d = h.option<int32_t>("dilation", 1), g = h.option<int32_t>("groups", 1);
    int64_t c = x.shape()[1];
    Variable& w = h.create_parameter(h.param_attr(), Shape{c, num_filters / g, filter_size, filter_size}, x.dtype(), false);
    Variable& out = h.create_tmp(x.dtype());
    using C = ops::Conv2dTranspose;
    Operator op{std::string(C::type)};
    op.set_input(C::input, {x.name()}).set_input(C::filter, {w.name()}).set_output(C::output, {out.name()});
    op.set_attr(C::strides, std::vector<int32_t>{s, s}).set_attr(C::paddings, std::vector<int32_t>{p, p});
    op.set_attr(C::dilations, std::vector<int32_t>{d, d}).set_attr(C::groups, int32_t(g));
    h.apply_options(op);
    h.append_op(std::move(op));
    return std::vector<std::string>{h.append_activation(h.append_bias(out.name(), 1, 2))};
  };
  return record_layer("conv2d_transpose", {input}, std::move(replay), loc)[0];
}

/// Max or average pooling over [N, C, H, W]. pool_type: "max" or "avg".
/// Options: .set("pool_stride", s) (default: pool_size), .set("pool_padding", p), .set("global_pooling", true),
/// .set("ceil_mode", true), .set("exclusive", false).
inline Var pool2d(const Var& input, int64_t pool_size, std::string pool_type = "max", std::source_location loc = std::source_location::current()) {
  auto replay = [pool_size, pool_type](LayerHelper& h) {
    int s = h.option<int32_t>("pool_stride", int32_t(pool_size)), p = h.option<int32_t>("pool_padding", 0);
    Variable& out = h.create_tmp(h.input_var().dtype());
    using P = ops::Pool2d;
    Operator op{std::string(P::type)};
    op.set_input(P::x, {h.input()}).set_output(P::out, {out.name()});
    op.set_attr(P::pooling_type, pool_type).set_attr(P::ksize, std::vector<int32_t>{int32_t(pool_size), int32_t(pool_size)});
    op.set_attr(P::strides, std::vector<int32_t>{s, s}).set_attr(P::paddings, std::vector<int32_t>{p, p});
    h.apply_options(op);
    h.append_op(std::move(op));
    return std::vector<std::string>{out.name()};
  };
  return record_layer("pool2d", {input}, std::move(replay), loc)[0];
}

/// Batch normalization over the channel dim 1: y = scale (x - mean) / sqrt(var + eps) + bias; running
/// statistics are persistable, non-trainable globals (mean 0, variance 1). Options: .set("momentum", 0.9),
/// .set("epsilon", 1e-5), .set("is_test", true), .act.
inline Var batch_norm(const Var& input, std::source_location loc = std::source_location::current()) {
  auto replay = [](LayerHelper& h) {
    const Variable& x = h.input_var();
    if (x.shape().rank() < 2 || x.shape()[1] < 0)
      throw Error(fmt::format("batch_norm: input {} needs a known channel dim 1, got {}", x.name(), x.shape().str()), h.origin());
    int64_t c = x.shape()[1];
    DType t = x.dtype();
    Variable& scale = h.create_parameter(h.param_attr(), Shape{c}, t, false, Constant(1));
    Variable& bias = h.create_parameter(h.bias_attr(), Shape{c}, t, true);
    ParamAttr stat;
    stat.trainable = false;
    Variable& mean = h.create_parameter(stat.with_name(h.name() + ".mean"), Shape{c}, t, false, Constant(0));
    Variable& var = h.create_parameter(ParamAttr(stat).with_name(h.name() + ".variance"), Shape{c}, t, false, Constant(1));
    Variable& y = h.create_tmp(t);
    Variable& saved_mean = h.create_tmp(t, true);
    Variable& saved_var = h.create_tmp(t, true);
    using B = ops::BatchNorm;
    Operator op{std::string(B::type)};
    op.set_input(B::x, {x.name()}).set_input(B::scale, {scale.name()}).set_input(B::bias, {bias.name()});
    op.set_input(B::mean, {mean.name()}).set_input(B::variance, {var.name()});
    op.set_output(B::y, {y.name()}).set_output(B::mean_out, {mean.name()}).set_output(B::variance_out, {var.name()});
    op.set_output(B::saved_mean, {saved_mean.name()}).set_output(B::saved_variance, {saved_var.name()});
    h.apply_options(op);
    h.append_op(std::move(op));
    return std::vector<std::string>{h.append_activation(y.name())};
  };
  return record_layer("batch_norm", {input}, std::move(replay), loc)[0];
}

/// Layer normalization over dims from begin_norm_axis (option, default 1) on, with learned scale (1) and bias (0).
inline Var layer_norm(const Var& input, std::source_location loc = std::source_location::current()) {
  auto replay = [](LayerHelper& h) {
    const Variable& x = h.input_var();
    int axis = h.option<int32_t>("begin_norm_axis", 1);
    int64_t n = x.shape().numel(axis, x.shape().rank());
    if (n < 0) throw Error(fmt::format("layer_norm: the dims of {} from {} on must be known", x.shape().str(), axis), h.origin());
    Variable& scale = h.create_parameter(h.param_attr(), Shape{n}, x.dtype(), false, Constant(1));
    Variable& bias = h.create_parameter(h.bias_attr(), Shape{n}, x.dtype(), true);
    Variable& y = h.create_tmp(x.dtype());
    Variable& mean = h.create_tmp(x.dtype(), true);
    Variable& var = h.create_tmp(x.dtype(), true);
    using L = ops::LayerNorm;
    Operator op{std::string(L::type)};
    op.set_input(L::x, {x.name()}).set_input(L::scale, {scale.name()}).set_input(L::bias, {bias.name()});
    op.set_output(L::y, {y.name()}).set_output(L::mean, {mean.name()}).set_output(L::variance, {var.name()});
    op.set_attr(L::begin_norm_axis, int32_t(axis));
    h.apply_options(op);
    h.append_op(std::move(op));
    return std::vector<std::string>{h.append_activation(y.name())};
  };
  return record_layer("layer_norm", {input}, std::move(replay), loc)[0];
}

/// Dropout with probability p (Fluid's default: no rescale in training, x (1 - p) at test time).
/// Options: .set("is_test", true), .set("seed", s), .set("dropout_implementation", "upscale_in_train").
inline Var dropout(const Var& x, double p, std::source_location loc = std::source_location::current()) {
  OAR_CHECK(p >= 0 && p <= 1, "dropout: probability must be in [0, 1], got {}", p);
  using D = ops::Dropout;
  auto v = record_op_layer("dropout", D::type, {{D::x, {x}}}, {{D::dropout_prob, float(p)}}, {{D::out}, {D::mask, {}, true}}, loc);
  return v[0];
}

}  // namespace oar
