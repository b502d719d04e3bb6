// oar/layers/nn-inl.hpp: the implementation of nn.hpp (included by it when header-only; compiled once into liboar otherwise).
#pragma once
#include "oar/layers/nn.hpp"

#include <cmath>

#include "oar/layers/op_layer.hpp"
#include "oar/ops/batch_norm.hpp"
#include "oar/ops/conv2d.hpp"
#include "oar/ops/conv2d_transpose.hpp"
#include "oar/ops/dropout.hpp"
#include "oar/ops/layer_norm.hpp"
#include "oar/ops/lookup_table.hpp"
#include "oar/ops/mul.hpp"
#include "oar/ops/pool2d.hpp"
#include "oar/ops/sum.hpp"
#include "oar/tape/replay.hpp"

namespace oar {

namespace detail {

/// A layer option key that the replay copies onto the op (LayerHelper::apply_options) is the op's attribute.
template <class A, class B>
constexpr bool same_attr(A a, B b) {
  return a.name == b.name && std::is_same_v<typename A::type, typename B::type>;
}

/// A two-int option: an int n (`.set("padding", 1)`) is {n, n}; two ints (the typed setters) are {h, w}.
OAR_FUNC Size2 size2_option(LayerHelper& h, Attr<std::vector<int32_t>> key, Size2 dflt) {
  const std::string k(key.name);
  auto it = h.creation().opts.attrs.find(k);
  if (it == h.creation().opts.attrs.end()) return dflt;
  const Attribute& a = it->second;
  if (std::holds_alternative<int32_t>(a) || std::holds_alternative<int64_t>(a)) return h.option<int32_t>(k, 0);
  if (std::holds_alternative<std::vector<int32_t>>(a) || std::holds_alternative<std::vector<int64_t>>(a)) {
    auto v = h.option<std::vector<int32_t>>(k, {});
    if (v.size() == 2) return {v[0], v[1]};
  }
  throw Error(fmt::format("{}: option '{}' must be an int or two ints, got {} {}", h.kind(), k, attr_type_name(attr_type(a)), attr_str(a)), h.origin());
}

}  // namespace detail

// The layers' keys are the ops' own Attr constants (nn.hpp); ConvOptions takes conv2d's groups for both convs.
static_assert(detail::same_attr(Conv2dTransposeLayer::keys::groups, ops::Conv2dTranspose::groups));

OAR_FUNC DataLayer data(std::string name, DType dtype, Shape shape, std::source_location loc) {
  OAR_CHECK(!name.empty(), "data: a data variable needs a name");
  auto replay = [name, dtype, shape](LayerHelper& h) {
    int lod = h.option<int32_t>(DataLayer::keys::lod_level, 0);
    Block& g = h.main().global_block();
    if (g.has_var(name)) throw Error(fmt::format("data: a variable named '{}' already exists", name), h.origin());
    Variable& v = g.create_var(name, {.dtype = dtype, .shape = shape, .lod_level = lod});
    v.set_stop_gradient(true).set_origin(h.origin());
    return std::vector<std::string>{name};
  };
  return DataLayer(record_layer("data", {}, std::move(replay), loc)[0]);
}

OAR_FUNC FcLayer fc(std::vector<Var> inputs, int64_t size, std::source_location loc) {
  OAR_CHECK(size > 0, "fc: size must be positive, got {}", size);
  OAR_CHECK(!inputs.empty(), "fc: needs at least one input");
  auto replay = [size](LayerHelper& h) {
    int k = h.option<int32_t>(FcLayer::keys::flatten_dims, 1);
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
  return FcLayer(record_layer("fc", std::move(inputs), std::move(replay), loc)[0]);
}
OAR_FUNC FcLayer fc(const Var& input, int64_t size, std::source_location loc) { return fc(std::vector<Var>{input}, size, loc); }

OAR_FUNC EmbeddingLayer embedding(const Var& ids, std::array<int64_t, 2> shape, std::source_location loc) {
  auto [vocab, dim] = shape;
  OAR_CHECK(vocab > 0 && dim > 0, "embedding: the table shape {{vocab, dim}} must be positive, got {{{}, {}}}", vocab, dim);
  auto replay = [vocab, dim](LayerHelper& h) {
    using K = EmbeddingLayer::keys;
    DType dtype = DType(h.option<int32_t>(K::dtype, int32_t(DType::f32)));
    Variable& w = h.create_parameter(h.param_attr(), Shape{vocab, dim}, dtype, false);
    Variable& out = h.create_tmp(dtype);
    int64_t pad = h.option<int64_t>(K::padding_idx, -1);
    using L = ops::LookupTable;
    Operator op{std::string(L::type)};
    op.set_input(L::w, {w.name()}).set_input(L::ids, {h.input()}).set_output(L::out, {out.name()});
    op.set_attr(L::is_sparse, h.option<bool>(K::sparse, false)).set_attr(L::padding_idx, int64_t(pad < -1 ? vocab + pad : pad));
    h.append_op(std::move(op));
    return std::vector<std::string>{out.name()};
  };
  return EmbeddingLayer(record_layer("embedding", {ids}, std::move(replay), loc)[0]);
}

namespace detail {

/// The window options of conv2d / conv2d_transpose, read at replay.
struct ConvWindow {
  Size2 stride, padding, dilation;
  int32_t groups;
};
template <class Layer>
ConvWindow read_conv_window(LayerHelper& h) {
  using K = typename Layer::keys;
  return {size2_option(h, K::stride, 1), size2_option(h, K::padding, 0), size2_option(h, K::dilation, 1), h.option<int32_t>(K::groups, 1)};
}

}  // namespace detail

namespace detail {

/// Appends conv op C (conv2d or conv2d_transpose: the same slots and window attributes) of x with filter w,
/// then the layer's bias on the channel axis and its activation; returns the output's name.
template <class C>
std::string append_conv(LayerHelper& h, const Variable& x, const Variable& w, const ConvWindow& win) {
  Variable& out = h.create_tmp(x.dtype());
  Operator op{std::string(C::type)};
  op.set_input(C::input, {x.name()}).set_input(C::filter, {w.name()}).set_output(C::output, {out.name()});
  op.set_attr(C::strides, win.stride.ints()).set_attr(C::paddings, win.padding.ints());
  op.set_attr(C::dilations, win.dilation.ints()).set_attr(C::groups, win.groups);
  h.apply_options(op);
  h.append_op(std::move(op));
  return h.append_activation(h.append_bias(out.name(), 1, 2));
}

}  // namespace detail

OAR_FUNC Conv2dLayer conv2d(const Var& input, int64_t num_filters, Size2 filter_size, std::source_location loc) {
  OAR_CHECK(num_filters > 0 && filter_size.h > 0 && filter_size.w > 0, "conv2d: num_filters and filter_size must be positive, got {} and {{{}, {}}}",
            num_filters, filter_size.h, filter_size.w);
  auto replay = [num_filters, filter_size](LayerHelper& h) {
    const Variable& x = h.input_var();
    if (x.shape().rank() != 4)
      throw Error(fmt::format("conv2d: input {} must be [N, C, H, W], got {}", x.name(), x.shape().str()), h.origin());
    detail::ConvWindow win = detail::read_conv_window<Conv2dLayer>(h);
    int64_t c = x.shape()[1], g = win.groups;
    if (c < 0) throw Error(fmt::format("conv2d: the channel dim of {} must be known", x.shape().str()), h.origin());
    if (g <= 0 || c % g != 0 || num_filters % g != 0)
      throw Error(fmt::format("conv2d: groups = {} must divide the input channels {} and num_filters {}", g, c, num_filters), h.origin());
    // He-style: sqrt(2 / fan_in) with fan_in = kh * kw * C.
    double std = std::sqrt(2.0 / double(filter_size.h * filter_size.w * c));
    Variable& w = h.create_parameter(h.param_attr(), Shape{num_filters, c / g, filter_size.h, filter_size.w}, x.dtype(), false, Normal(0, std));
    return std::vector<std::string>{detail::append_conv<ops::Conv2d>(h, x, w, win)};
  };
  return Conv2dLayer(record_layer("conv2d", {input}, std::move(replay), loc)[0]);
}

OAR_FUNC Conv2dTransposeLayer conv2d_transpose(const Var& input, int64_t num_filters, Size2 filter_size, std::source_location loc) {
  OAR_CHECK(num_filters > 0 && filter_size.h > 0 && filter_size.w > 0,
            "conv2d_transpose: num_filters and filter_size must be positive, got {} and {{{}, {}}}", num_filters, filter_size.h, filter_size.w);
  auto replay = [num_filters, filter_size](LayerHelper& h) {
    const Variable& x = h.input_var();
    if (x.shape().rank() != 4)
      throw Error(fmt::format("conv2d_transpose: input {} must be [N, C, H, W], got {}", x.name(), x.shape().str()), h.origin());
    detail::ConvWindow win = detail::read_conv_window<Conv2dTransposeLayer>(h);
    int64_t c = x.shape()[1], g = win.groups;
    if (g <= 0 || num_filters % g != 0)
      throw Error(fmt::format("conv2d_transpose: groups = {} must divide num_filters {}", g, num_filters), h.origin());
    Variable& w = h.create_parameter(h.param_attr(), Shape{c, num_filters / g, filter_size.h, filter_size.w}, x.dtype(), false);
    return std::vector<std::string>{detail::append_conv<ops::Conv2dTranspose>(h, x, w, win)};
  };
  return Conv2dTransposeLayer(record_layer("conv2d_transpose", {input}, std::move(replay), loc)[0]);
}

OAR_FUNC Pool2dLayer pool2d(const Var& input, Size2 size, PoolType type, std::source_location loc) {
  OAR_CHECK(size.h > 0 && size.w > 0, "pool2d: the window must be positive, got {{{}, {}}}", size.h, size.w);
  auto replay = [size, type](LayerHelper& h) {
    Size2 s = detail::size2_option(h, Pool2dLayer::keys::stride, size), p = detail::size2_option(h, Pool2dLayer::keys::padding, 0);
    Variable& out = h.create_tmp(h.input_var().dtype());
    using P = ops::Pool2d;
    Operator op{std::string(P::type)};
    op.set_input(P::x, {h.input()}).set_output(P::out, {out.name()});
    op.set_attr(P::pooling_type, std::string(type == PoolType::avg ? "avg" : "max")).set_attr(P::ksize, size.ints());
    op.set_attr(P::strides, s.ints()).set_attr(P::paddings, p.ints());
    h.apply_options(op);
    h.append_op(std::move(op));
    return std::vector<std::string>{out.name()};
  };
  return Pool2dLayer(record_layer("pool2d", {input}, std::move(replay), loc)[0]);
}

OAR_FUNC BatchNormLayer batch_norm(const Var& input, std::source_location loc) {
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
    h.apply_options(op);  // momentum, epsilon, is_test: BatchNormLayer's keys are the op's attributes
    h.append_op(std::move(op));
    return std::vector<std::string>{h.append_activation(y.name())};
  };
  return BatchNormLayer(record_layer("batch_norm", {input}, std::move(replay), loc)[0]);
}

OAR_FUNC LayerNormLayer layer_norm(const Var& input, std::source_location loc) {
  auto replay = [](LayerHelper& h) {
    const Variable& x = h.input_var();
    int axis = h.option<int32_t>(LayerNormLayer::keys::begin_norm_axis, 1);
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
    h.apply_options(op);  // epsilon
    h.append_op(std::move(op));
    return std::vector<std::string>{h.append_activation(y.name())};
  };
  return LayerNormLayer(record_layer("layer_norm", {input}, std::move(replay), loc)[0]);
}

OAR_FUNC DropoutLayer dropout(const Var& x, double p, std::source_location loc) {
  OAR_CHECK(p >= 0 && p <= 1, "dropout: probability must be in [0, 1], got {}", p);
  using D = ops::Dropout;
  // is_test, seed, fix_seed and dropout_implementation reach the op through apply_options.
  auto v = record_op_layer("dropout", D::type, {{D::x, {x}}}, {{D::dropout_prob, float(p)}}, {{D::out}, {D::mask, {}, true}}, loc);
  return DropoutLayer(v[0]);
}

}  // namespace oar
