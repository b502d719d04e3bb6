// oar/layers/nn.hpp: the network layers: data, fc, embedding, conv2d, conv2d_transpose, pool2d, batch_norm,
// layer_norm, dropout. Each records a creation on the current tape and returns its own small Var class whose
// typed options are fluent setters: `oar::conv2d(x, 16, {3, 5}).stride({1, 2}).padding(1).act(oar::relu)`.
// The bodies (replay, the ops they emit) are in nn-inl.hpp.
#pragma once
#include <array>
#include <source_location>
#include <string_view>

#include "oar/layers/layer_var.hpp"
#include "oar/ops/batch_norm.hpp"
#include "oar/ops/conv2d.hpp"
#include "oar/ops/conv2d_transpose.hpp"
#include "oar/ops/dropout.hpp"
#include "oar/ops/layer_norm.hpp"
#include "oar/ops/lookup_table.hpp"
#include "oar/ops/pool2d.hpp"

namespace oar {

/// data's result. Options: `.lod_level(n)` (default 0).
class DataLayer : public LayerVar<DataLayer> {
 public:
  using LayerVar::LayerVar;
  struct keys {
    static constexpr Attr<int32_t> lod_level{"lod_level"};  // the variable's LoD level: data emits no op
  };
  /// Sequences nested n deep (the variable's LoD level).
  DataLayer& lod_level(int n) { return option(keys::lod_level, n); }
  using Var::lod_level;  // the getter
};

/// A data variable fed at run time. `shape` includes the batch dim (-1 = unknown): data("img", f32, {-1, 784}).
/// Options: `.lod_level(n)`.
DataLayer data(std::string name, DType dtype, Shape shape, std::source_location loc = std::source_location::current());

/// fc's result. Options: `.flatten_dims(k)` (default 1), and `.act`, `.param` / `.params` (one per input), `.bias`.
class FcLayer : public LayerVar<FcLayer> {
 public:
  using LayerVar::LayerVar;
  struct keys {
    static constexpr Attr<int32_t> flatten_dims{"num_flatten_dims"};  // Fluid's fc argument; becomes mul's x_num_col_dims
  };
  /// Each input is flattened to a matrix of rows d0..d(k-1) (mul's x_num_col_dims).
  FcLayer& flatten_dims(int k) { return option(keys::flatten_dims, k); }
};

/// out = act(sum_i flatten(x_i, flatten_dims) * W_i + b)
/// x: [d0..d(k-1), rest...] -> [d0..d(k-1), size]; W_i: [prod(rest), size], Xavier; b: [size], zero.
/// Options: `.flatten_dims(k)`, `.act`, `.param` (per input via `.params`), `.bias(false)`.
///   auto h = oar::fc(img, 200).act(oar::relu);
FcLayer fc(std::vector<Var> inputs, int64_t size, std::source_location loc = std::source_location::current());
FcLayer fc(const Var& input, int64_t size, std::source_location loc = std::source_location::current());

/// embedding's result. Options: `.sparse()`, `.padding_idx(k)`, `.dtype(t)` (of the table; default f32).
class EmbeddingLayer : public LayerVar<EmbeddingLayer> {
 public:
  using LayerVar::LayerVar;
  struct keys {
    static constexpr Attr<bool> sparse = ops::LookupTable::is_sparse;
    static constexpr Attr<int64_t> padding_idx = ops::LookupTable::padding_idx;
    static constexpr Attr<int32_t> dtype{"dtype"};  // the table's dtype: the layer's, lookup_table has no such attribute
  };
  /// The table's gradient is sparse rows (SelectedRows) instead of a dense [vocab, dim] tensor.
  EmbeddingLayer& sparse(bool on = true) { return option(keys::sparse, on); }
  /// Rows of id k are zeros and get no gradient (negative k counts from vocab).
  EmbeddingLayer& padding_idx(int64_t k) { return option(keys::padding_idx, k); }
  /// The table's (and the output's) dtype.
  EmbeddingLayer& dtype(DType t) { return option(keys::dtype, int32_t(t)); }
  using Var::dtype;  // the getter
};

/// out[i] = W[ids[i]]; ids: i64 [N, 1] -> [N, dim]; W: [vocab, dim], Xavier: `oar::embedding(ids, {vocab, dim})`.
/// Options: `.sparse()`, `.padding_idx(k)`, `.dtype(t)`, `.param("shared_w")` to share the table.
EmbeddingLayer embedding(const Var& ids, std::array<int64_t, 2> shape, std::source_location loc = std::source_location::current());

/// The window options conv2d and conv2d_transpose share; each takes `n` or `{h, w}`.
template <class Self>
class ConvOptions : public LayerVar<Self> {
 public:
  ConvOptions() = default;
  explicit ConvOptions(const Var& v) : LayerVar<Self>(v) {}
  struct keys {
    // The layer's own names: each takes n or {h, w} (size2_option) and becomes the op's strides / paddings / dilations.
    static constexpr Attr<std::vector<int32_t>> stride{"stride"}, padding{"padding"}, dilation{"dilation"};
    static constexpr Attr<int32_t> groups = ops::Conv2d::groups;  // conv2d_transpose's is the same (nn-inl.hpp)
  };
  /// Step of the window (default 1).
  Self& stride(Size2 s) { return this->option(keys::stride, s.ints()); }
  /// Zeros added on each side (default 0).
  Self& padding(Size2 p) { return this->option(keys::padding, p.ints()); }
  /// Spacing of the filter's taps (default 1).
  Self& dilation(Size2 d) { return this->option(keys::dilation, d.ints()); }
  /// Channel groups: each sees C / g input channels (default 1).
  Self& groups(int g) { return this->option(keys::groups, g); }
};

/// conv2d's result. Options: `.stride(s)`, `.padding(p)`, `.dilation(d)` (each `n` or `{h, w}`), `.groups(g)`,
/// and `.act`, `.param`, `.bias`.
class Conv2dLayer : public ConvOptions<Conv2dLayer> {
 public:
  using ConvOptions::ConvOptions;
};

/// 2-D convolution. input: [N, C, H, W] -> [N, num_filters, H', W'], H' = (H + 2p - (d (kh - 1) + 1)) / s + 1
/// (W' likewise with kw). filter_size is `k` or `{kh, kw}`; the filter is [num_filters, C / groups, kh, kw],
/// Normal(0, sqrt(2 / (kh kw C))); the bias [num_filters] is added on axis 1.
/// Options: `.stride(s)`, `.padding(p)`, `.dilation(d)`, `.groups(g)`, `.act`, `.bias(false)`.
///   auto c = oar::conv2d(img, 16, {3, 5}).stride({1, 2}).padding({1, 2}).act(oar::relu);
Conv2dLayer conv2d(const Var& input, int64_t num_filters, Size2 filter_size, std::source_location loc = std::source_location::current());

/// conv2d_transpose's result. Options: those of conv2d, and `.output_size({h, w})`.
class Conv2dTransposeLayer : public ConvOptions<Conv2dTransposeLayer> {
 public:
  using ConvOptions::ConvOptions;
  struct keys : ConvOptions::keys {
    static constexpr Attr<std::vector<int32_t>> output_size = ops::Conv2dTranspose::output_size;
  };
  /// Picks [H', W'] among the sizes a stride > 1 allows (default: the smallest).
  Conv2dTransposeLayer& output_size(Size2 s) { return option(keys::output_size, s.ints()); }
};

/// Transposed 2-D convolution. input [N, C, H, W] -> [N, num_filters, H', W'], H' = (H - 1) s - 2p + d (kh - 1) + 1.
/// filter_size is `k` or `{kh, kw}`; the filter is [C, num_filters / groups, kh, kw], Xavier; bias on axis 1.
/// Options: `.stride(s)`, `.padding(p)`, `.dilation(d)`, `.groups(g)`, `.output_size({h, w})`, `.act`, `.bias(false)`.
Conv2dTransposeLayer conv2d_transpose(const Var& input, int64_t num_filters, Size2 filter_size,
                                      std::source_location loc = std::source_location::current());

/// What pool2d takes of each window.
enum class PoolType { max, avg };

/// pool2d's result. Options: `.type(t)`, `.stride(s)` (default: the window), `.padding(p)` (each `n` or
/// `{h, w}`), `.global()`, `.ceil_mode()`, `.exclusive(false)`.
class Pool2dLayer : public LayerVar<Pool2dLayer> {
 public:
  using LayerVar::LayerVar;
  struct keys {
    static constexpr Attr<std::string> type = ops::Pool2d::pooling_type;
    // Fluid's pool2d arguments, n or {h, w} (size2_option); they become the op's strides and paddings.
    static constexpr Attr<std::vector<int32_t>> stride{"pool_stride"}, padding{"pool_padding"};
    static constexpr Attr<bool> global = ops::Pool2d::global_pooling, ceil_mode = ops::Pool2d::ceil_mode, exclusive = ops::Pool2d::exclusive;
  };
  Pool2dLayer& type(PoolType t) { return option(keys::type, std::string(t == PoolType::avg ? "avg" : "max")); }
  /// Step of the window (default: the window's size).
  Pool2dLayer& stride(Size2 s) { return option(keys::stride, s.ints()); }
  /// Padding on each side (default 0); padded elements are never the max and, with exclusive, not averaged.
  Pool2dLayer& padding(Size2 p) { return option(keys::padding, p.ints()); }
  /// One window over the whole image: [N, C, 1, 1].
  Pool2dLayer& global(bool on = true) { return option(keys::global, on); }
  /// Output size rounded up, so a partial last window counts.
  Pool2dLayer& ceil_mode(bool on = true) { return option(keys::ceil_mode, on); }
  /// avg: divide by the window's in-image elements (true, the default) or by kh * kw (false).
  Pool2dLayer& exclusive(bool on = true) { return option(keys::exclusive, on); }
};

/// Max or average pooling over [N, C, H, W] with a `size` (`k` or `{kh, kw}`) window.
/// Options: `.type(oar::PoolType::avg)`, `.stride(s)`, `.padding(p)`, `.global()`, `.ceil_mode()`, `.exclusive(false)`.
///   auto p = oar::pool2d(x, {2, 3}).type(oar::PoolType::avg).stride({2, 3});
Pool2dLayer pool2d(const Var& input, Size2 size, PoolType type = PoolType::max, std::source_location loc = std::source_location::current());
/// The string spelling of early oar, `oar::pool2d(x, 2, "max")`, kept for one release so that old code warns
/// instead of breaking (CHANGELOG.md): "max" or "avg", forwarded to the PoolType overload.
[[deprecated("use oar::pool2d(x, size, oar::PoolType::max) or oar::PoolType::avg")]]
inline Pool2dLayer pool2d(const Var& input, Size2 size, std::string_view type, std::source_location loc = std::source_location::current()) {
  if (type != "max" && type != "avg")
    throw Error(fmt::format("pool2d: pool type \"{}\" is neither \"max\" nor \"avg\" (use oar::PoolType::max or ::avg)", type), Origin(loc, "pool2d"));
  return pool2d(input, size, type == "avg" ? PoolType::avg : PoolType::max, loc);
}

/// batch_norm's result. Options: `.momentum(m)` (0.9), `.epsilon(e)` (1e-5), `.is_test()`, and `.act`,
/// `.param` (scale), `.bias`.
class BatchNormLayer : public LayerVar<BatchNormLayer> {
 public:
  using LayerVar::LayerVar;
  struct keys {
    static constexpr Attr<float> momentum = ops::BatchNorm::momentum, epsilon = ops::BatchNorm::epsilon;
    static constexpr Attr<bool> is_test = ops::BatchNorm::is_test;
  };
  /// running = running * m + batch * (1 - m).
  BatchNormLayer& momentum(double m) { return option(keys::momentum, float(m)); }
  /// Added to the variance.
  BatchNormLayer& epsilon(double e) { return option(keys::epsilon, float(e)); }
  /// Normalize with the running statistics (inference); `Program::clone(true)` sets it too.
  BatchNormLayer& is_test(bool on = true) { return option(keys::is_test, on); }
};

/// Batch normalization over the channel dim 1: y = scale (x - mean) / sqrt(var + eps) + bias; running
/// statistics are persistable, non-trainable globals (mean 0, variance 1).
/// Options: `.momentum(m)`, `.epsilon(e)`, `.is_test()`, `.act`.
BatchNormLayer batch_norm(const Var& input, std::source_location loc = std::source_location::current());

/// layer_norm's result. Options: `.begin_norm_axis(k)` (1), `.epsilon(e)` (1e-5), and `.act`, `.param`, `.bias`.
class LayerNormLayer : public LayerVar<LayerNormLayer> {
 public:
  using LayerVar::LayerVar;
  struct keys {
    static constexpr Attr<int32_t> begin_norm_axis = ops::LayerNorm::begin_norm_axis;
    static constexpr Attr<float> epsilon = ops::LayerNorm::epsilon;
  };
  /// Normalizes over dims k.. of each input.
  LayerNormLayer& begin_norm_axis(int k) { return option(keys::begin_norm_axis, k); }
  /// Added to the variance.
  LayerNormLayer& epsilon(double e) { return option(keys::epsilon, float(e)); }
};

/// Layer normalization over the dims from begin_norm_axis on, with learned scale (1) and bias (0).
/// Options: `.begin_norm_axis(k)`, `.epsilon(e)`, `.act`.
LayerNormLayer layer_norm(const Var& input, std::source_location loc = std::source_location::current());

/// dropout's result. Options: `.is_test()`, `.seed(s)`, `.upscale_in_train()`.
class DropoutLayer : public LayerVar<DropoutLayer> {
 public:
  using LayerVar::LayerVar;
  struct keys {
    static constexpr Attr<bool> is_test = ops::Dropout::is_test, fix_seed = ops::Dropout::fix_seed;
    static constexpr Attr<int32_t> seed = ops::Dropout::seed;
    static constexpr Attr<std::string> implementation = ops::Dropout::dropout_implementation;
  };
  /// Inference: no randomness, out = x (1 - p) (or x with upscale_in_train).
  DropoutLayer& is_test(bool on = true) { return option(keys::is_test, on); }
  /// A fixed seed for this layer's masks instead of the executor's seed stream.
  DropoutLayer& seed(int s) {
    option(keys::fix_seed, true);
    return option(keys::seed, s);
  }
  /// Scales by 1 / (1 - p) in training and leaves test time alone (instead of x (1 - p) at test time).
  DropoutLayer& upscale_in_train(bool on = true) { return option(keys::implementation, std::string(on ? "upscale_in_train" : "downgrade_in_infer")); }
};

/// Dropout with probability p (Fluid's default: no rescale in training, x (1 - p) at test time).
/// Options: `.is_test()`, `.seed(s)`, `.upscale_in_train()`.
DropoutLayer dropout(const Var& x, double p, std::source_location loc = std::source_location::current());

}  // namespace oar

#if OAR_HEADER_ONLY
#include "oar/layers/nn-inl.hpp"
#endif
