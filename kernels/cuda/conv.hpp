// kernels/cuda/conv.hpp: eval_cuda of conv2d, conv2d_transpose and pool2d on cuDNN, and of batch_norm (kernels/cuda/batch_norm.cu).
// A convolution's descriptors and algorithms (forward, data gradient, filter gradient) are made once per shape,
// the algorithms by cuDNN's heuristics (the first in full f32 math, or TF32 under set_cuda_tf32) or, under
// set_cuda_conv_search, by a timed search, and kept (never the coarse Winograd in full f32: conv_pick.hpp);
// workspaces come from the device's caching allocator.
#pragma once
#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>

#include "kernels/common/batch_norm.hpp"         // bn_plan, bn_grad_plan: the checks both devices make
#include "kernels/common/conv2d_transpose.hpp"  // conv2d_transpose_geom: the same
#include "kernels/cuda/batch_norm_launch.hpp"
#include "kernels/cuda/conv_pick.hpp"
#include "kernels/cuda/elementwise_launch.hpp"
#include "kernels/cuda/host.hpp"
#include "oar/ops/batch_norm.hpp"
#include "oar/ops/conv2d.hpp"
#include "oar/ops/conv2d_fusion.hpp"
#include "oar/ops/conv2d_transpose.hpp"
#include "oar/ops/pool2d.hpp"

namespace oar::cuda_kernels {

/// The four cuDNN descriptors of one convolution.
class ConvDescs {
 public:
  ConvDescs(const KernelContext& c, DType t, bool tf32, const Shape& x, const Shape& f, const Shape& y, const ops::detail::ConvAttrs& a) {
    const cudnnDataType_t dt = t == DType::f64 ? CUDNN_DATA_DOUBLE : t == DType::f16 ? CUDNN_DATA_HALF : t == DType::bf16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT;
    const bool sixteen = t == DType::f16 || t == DType::bf16;
    for (const Shape* s : {&x, &f, &y})
      for (int i = 0; i < 4; ++i) c.check((*s)[i] <= INT32_MAX, "{} is beyond cuDNN's 32-bit sizes", *s);
    check(c, cudnnCreateTensorDescriptor(&x_), "cudnnCreateTensorDescriptor");
    check(c, cudnnCreateTensorDescriptor(&y_), "cudnnCreateTensorDescriptor");
    check(c, cudnnCreateFilterDescriptor(&f_), "cudnnCreateFilterDescriptor");
    check(c, cudnnCreateConvolutionDescriptor(&conv_), "cudnnCreateConvolutionDescriptor");
    check(c, cudnnSetTensor4dDescriptor(x_, CUDNN_TENSOR_NCHW, dt, int(x[0]), int(x[1]), int(x[2]), int(x[3])), "cudnnSetTensor4dDescriptor");
    check(c, cudnnSetTensor4dDescriptor(y_, CUDNN_TENSOR_NCHW, dt, int(y[0]), int(y[1]), int(y[2]), int(y[3])), "cudnnSetTensor4dDescriptor");
    check(c, cudnnSetFilter4dDescriptor(f_, dt, CUDNN_TENSOR_NCHW, int(f[0]), int(f[1]), int(f[2]), int(f[3])), "cudnnSetFilter4dDescriptor");
    check(c,
          cudnnSetConvolution2dDescriptor(conv_, a.paddings[0], a.paddings[1], a.strides[0], a.strides[1], a.dilations[0], a.dilations[1],
                                          CUDNN_CROSS_CORRELATION, sixteen ? CUDNN_DATA_FLOAT : dt),  // 16-bit data accumulates in f32
          "cudnnSetConvolution2dDescriptor");
    check(c, cudnnSetConvolutionGroupCount(conv_, a.groups), "cudnnSetConvolutionGroupCount");
    // Full f32 math unless set_cuda_tf32 allows TF32 (the CPU kernels' precision by default); 16-bit data on
    // tensor cores.
    check(c, cudnnSetConvolutionMathType(conv_, math(t, tf32)), "cudnnSetConvolutionMathType");
  }
  /// The math type convolutions of `t` run in: tensor cores for the 16-bit floats; for f32 FMA (full f32), or
  /// the default (TF32 allowed) when `tf32` (set_cuda_tf32, read once per plan).
  static cudnnMathType_t math(DType t, bool tf32) {
    if (t == DType::f16 || t == DType::bf16) return CUDNN_TENSOR_OP_MATH;
    return tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;
  }
  ~ConvDescs() {
    cudnnDestroyConvolutionDescriptor(conv_);
    cudnnDestroyFilterDescriptor(f_);
    cudnnDestroyTensorDescriptor(y_);
    cudnnDestroyTensorDescriptor(x_);
  }
  ConvDescs(const ConvDescs&) = delete;
  ConvDescs& operator=(const ConvDescs&) = delete;

  cudnnTensorDescriptor_t x_ = nullptr, y_ = nullptr;
  cudnnFilterDescriptor_t f_ = nullptr;
  cudnnConvolutionDescriptor_t conv_ = nullptr;
};

/// Which pass of a convolution an algorithm serves.
enum class ConvPass { forward, data, filter };

/// One pass of one convolution as cuDNN runs it: its descriptors, its algorithm and that algorithm's workspace.
struct ConvPlan {
  const ConvDescs* d = nullptr;
  int algo = -1;
  size_t bytes = 0;
};

/// The device memory a timed search may give one algorithm: half of what is free, at most 1 GiB.
inline size_t conv_search_limit(const KernelContext& c) {
  size_t free = 0, total = 0;
  check(c, int(cudaMemGetInfo(&free, &total)));
  return std::min<size_t>(free / 2, size_t(1) << 30);
}

/// Scratch for a timed search: as much of conv_search_limit as the device gives (halved until an allocation
/// succeeds; none below 1 MiB). `limit` is set to its size.
inline Tensor conv_search_space(const KernelContext& c, size_t& limit) {
  for (limit = conv_search_limit(c); limit >= (size_t(1) << 20); limit /= 2) {
    try {
      return workspace(c, limit);
    } catch (const Error&) {  // out of device memory: try half
    }
  }
  limit = 0;
  return Tensor();
}

/// One pass's algorithm and its workspace bytes: the timed search's pick (`timed`), else the heuristics' (both
/// conv_pick, without the coarse Winograd where coarse_winograd_excluded says so); an oar::Error when cuDNN offers
/// none. `find`, `heuristic` and `size` make the pass's cuDNN calls.
template <class Perf, int N, class Find, class Heuristic, class Size>
std::pair<int, size_t> conv_choose(const KernelContext& c, DType t, bool tf32, bool timed, const Shape& x, const Shape& f, Find&& find, Heuristic&& heuristic,
                                   Size&& size) {
  Perf perf[N];
  int got = 0, algo = -1;
  const int excluded = coarse_winograd_excluded(t == DType::f32, tf32, f[2], f[3]) ? winograd_nonfused(perf) : -1;
  if (timed) {
    size_t limit = 0;
    const Tensor ws = conv_search_space(c, limit);
    check(c, find(perf, &got, ws.raw(), limit), "cudnnFindConvolution*AlgorithmEx");
    algo = conv_pick(perf, got, ConvDescs::math(t, tf32), true, limit, false, excluded);
  }
  if (algo < 0) {  // after a search that kept nothing, still a deterministic algorithm where cuDNN has one
    check(c, heuristic(perf, &got), "cudnnGetConvolution*Algorithm_v7");
    algo = conv_pick(perf, got, ConvDescs::math(t, tf32), false, 0, timed, excluded);
  }
  c.check(algo >= 0, "cuDNN offers no algorithm for Input {} and Filter {}", x, f);
  size_t bytes = 0;
  check(c, size(algo, &bytes), "cudnnGetConvolution*WorkspaceSize");
  return {algo, bytes};
}

/// The plan of (pass, shapes, window, dtype, device, TF32 setting, search setting), made on first use of the
/// shape and kept: descriptors built once; the algorithm cuDNN's heuristics' first choice (conv_pick), or under
/// set_cuda_conv_search the fastest deterministic one of a timed search on the call's own tensors (`in0`, `in1`
/// the pass's inputs, `out` its output, which the search overwrites before the pass writes it). A step then
/// makes no cuDNN set-up calls at all (descriptors and workspace queries cost more host time than the
/// launches). While a CUDA graph is captured no search can run: the heuristic's choice serves that call and is
/// not kept.
inline ConvPlan conv_plan(const KernelContext& c, ConvPass pass, const Shape& x, const Shape& f, const Shape& y, const ops::detail::ConvAttrs& a,
                          DType t, const void* in0, const void* in1, void* out) {
  using Key = std::tuple<int, int, bool, bool, std::array<int64_t, 4>, std::array<int64_t, 4>, std::array<int32_t, 7>>;
  struct Entry {
    std::unique_ptr<ConvDescs> d;
    int algo[3] = {-1, -1, -1};
    size_t bytes[3] = {};
  };
  static std::mutex mu;
  static std::map<Key, Entry> cache;
  static std::map<int, std::mutex> searching;  // per device: two timed searches on one GPU would time each other
  // Each switch read once: the key, the descriptors' math type and the choice must agree even when another
  // thread flips one meanwhile (a switch applies to kernels that start after it).
  const bool search = cuda_conv_search();
  const bool tf32 = cuda_tf32();
  const Key key{c.place().device, int(t), tf32, search, {x[0], x[1], x[2], x[3]}, {f[0], f[1], f[2], f[3]},
                {a.strides[0], a.strides[1], a.paddings[0], a.paddings[1], a.dilations[0], a.dilations[1], a.groups}};
  const int p = int(pass);
  Entry* entry = nullptr;
  std::mutex* device_search = nullptr;
  {
    std::lock_guard lock(mu);
    Entry& e = cache[key];  // a map's entries stay put: used below without the lock
    if (!e.d) e.d = std::make_unique<ConvDescs>(c, t, tf32, x, f, y, a);
    if (e.algo[p] >= 0) return {e.d.get(), e.algo[p], e.bytes[p]};
    entry = &e;
    device_search = &searching[c.place().device];
  }
  // The choice is made without the cache's lock, so that a timed search does not hold up the first calls of
  // other shapes and devices; two threads meeting a new shape at once may both choose, and the first is kept.
  const ConvDescs& d = *entry->d;
  cudnnHandle_t h = c.cuda().cudnn();
  cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
  check(c, int(cudaStreamIsCapturing(stream(c), &capturing)));
  const bool timed = search && capturing == cudaStreamCaptureStatusNone;
  std::unique_lock<std::mutex> searching_here;
  if (timed) {
    searching_here = std::unique_lock(*device_search);
    std::lock_guard lock(mu);
    if (entry->algo[p] >= 0) return {&d, entry->algo[p], entry->bytes[p]};  // the search that just ended was of this shape
  }
  int algo = -1;
  size_t bytes = 0;
  // Each pass's cuDNN calls, in their own argument orders: the timed search, the heuristics, the workspace size.
  if (pass == ConvPass::forward) {
    std::tie(algo, bytes) = conv_choose<cudnnConvolutionFwdAlgoPerf_t, CUDNN_CONVOLUTION_FWD_ALGO_COUNT>(
        c, t, tf32, timed, x, f,
        [&](auto* perf, int* got, void* ws, size_t limit) {
          return cudnnFindConvolutionForwardAlgorithmEx(h, d.x_, in0, d.f_, in1, d.conv_, d.y_, out, CUDNN_CONVOLUTION_FWD_ALGO_COUNT, got, perf, ws, limit);
        },
        [&](auto* perf, int* got) { return cudnnGetConvolutionForwardAlgorithm_v7(h, d.x_, d.f_, d.conv_, d.y_, CUDNN_CONVOLUTION_FWD_ALGO_COUNT, got, perf); },
        [&](int algo, size_t* b) { return cudnnGetConvolutionForwardWorkspaceSize(h, d.x_, d.f_, d.conv_, d.y_, cudnnConvolutionFwdAlgo_t(algo), b); });
  } else if (pass == ConvPass::data) {
    std::tie(algo, bytes) = conv_choose<cudnnConvolutionBwdDataAlgoPerf_t, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT>(
        c, t, tf32, timed, x, f,
        [&](auto* perf, int* got, void* ws, size_t limit) {
          return cudnnFindConvolutionBackwardDataAlgorithmEx(h, d.f_, in0, d.y_, in1, d.conv_, d.x_, out, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, got, perf,
                                                             ws, limit);
        },
        [&](auto* perf, int* got) {
          return cudnnGetConvolutionBackwardDataAlgorithm_v7(h, d.f_, d.y_, d.conv_, d.x_, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, got, perf);
        },
        [&](int algo, size_t* b) {
          return cudnnGetConvolutionBackwardDataWorkspaceSize(h, d.f_, d.y_, d.conv_, d.x_, cudnnConvolutionBwdDataAlgo_t(algo), b);
        });
  } else {
    std::tie(algo, bytes) = conv_choose<cudnnConvolutionBwdFilterAlgoPerf_t, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT>(
        c, t, tf32, timed, x, f,
        [&](auto* perf, int* got, void* ws, size_t limit) {
          return cudnnFindConvolutionBackwardFilterAlgorithmEx(h, d.x_, in0, d.y_, in1, d.conv_, d.f_, out, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, got,
                                                               perf, ws, limit);
        },
        [&](auto* perf, int* got) {
          return cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, d.x_, d.y_, d.conv_, d.f_, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, got, perf);
        },
        [&](int algo, size_t* b) {
          return cudnnGetConvolutionBackwardFilterWorkspaceSize(h, d.x_, d.y_, d.conv_, d.f_, cudnnConvolutionBwdFilterAlgo_t(algo), b);
        });
  }
  if (timed || !search) {  // a heuristic stand-in for a search that could not run is not kept
    std::lock_guard lock(mu);
    if (entry->algo[p] < 0) {
      entry->algo[p] = algo;
      entry->bytes[p] = bytes;
    }
    return {&d, entry->algo[p], entry->bytes[p]};
  }
  return {&d, algo, bytes};
}

/// The three passes of the convolution x (*) f = y on cuDNN, through its kept plan. conv2d runs them as they
/// are; conv2d_transpose runs them with its Output as x and its Input as y.
inline void conv_forward(const KernelContext& c, const ops::detail::ConvAttrs& a, const Tensor& x, const Tensor& f, Tensor& y) {
  gemm_types(c, x.dtype(), [&](auto z) {
    using T = decltype(z);
    const compute_t<T> one = 1, zero = 0;
    const ConvPlan p = conv_plan(c, ConvPass::forward, x.shape(), f.shape(), y.shape(), a, x.dtype(), x.raw(), f.raw(), y.raw());
    Tensor ws = workspace(c, p.bytes);
    check(c,
          cudnnConvolutionForward(c.cuda().cudnn(), &one, p.d->x_, x.raw(), p.d->f_, f.raw(), p.d->conv_, cudnnConvolutionFwdAlgo_t(p.algo), ws.raw(),
                                  p.bytes, &zero, p.d->y_, y.raw()),
          "cudnnConvolutionForward");
  });
}
/// dx from dy (dx already has x's shape).
inline void conv_data_grad(const KernelContext& c, const ops::detail::ConvAttrs& a, const Tensor& f, const Tensor& dy, Tensor& dx) {
  gemm_types(c, dx.dtype(), [&](auto z) {
    using T = decltype(z);
    const compute_t<T> one = 1, zero = 0;
    const ConvPlan p = conv_plan(c, ConvPass::data, dx.shape(), f.shape(), dy.shape(), a, dx.dtype(), f.raw(), dy.raw(), dx.raw());
    Tensor ws = workspace(c, p.bytes);
    check(c,
          cudnnConvolutionBackwardData(c.cuda().cudnn(), &one, p.d->f_, f.raw(), p.d->y_, dy.raw(), p.d->conv_, cudnnConvolutionBwdDataAlgo_t(p.algo),
                                       ws.raw(), p.bytes, &zero, p.d->x_, dx.raw()),
          "cudnnConvolutionBackwardData");
  });
}
/// df from x and dy (df already has the filter's shape).
inline void conv_filter_grad(const KernelContext& c, const ops::detail::ConvAttrs& a, const Tensor& x, const Tensor& dy, Tensor& df) {
  gemm_types(c, x.dtype(), [&](auto z) {
    using T = decltype(z);
    const compute_t<T> one = 1, zero = 0;
    const ConvPlan p = conv_plan(c, ConvPass::filter, x.shape(), df.shape(), dy.shape(), a, x.dtype(), x.raw(), dy.raw(), df.raw());
    Tensor ws = workspace(c, p.bytes);
    check(c,
          cudnnConvolutionBackwardFilter(c.cuda().cudnn(), &one, p.d->x_, x.raw(), p.d->y_, dy.raw(), p.d->conv_, cudnnConvolutionBwdFilterAlgo_t(p.algo),
                                         ws.raw(), p.bytes, &zero, p.d->f_, df.raw()),
          "cudnnConvolutionBackwardFilter");
  });
}
/// A convolution gradient's outputs, each present one sized like its input (x, f); false when the batch or the
/// output gradient `dy` is empty (no channels out): then both gradients are zeros and nothing is left to do.
inline bool conv_grad_outputs(KernelContext& c, Slot x_grad, Slot f_grad, const Tensor& x, const Tensor& f, const Tensor& dy, LoDTensor*& dx,
                              LoDTensor*& df) {
  dx = c.out_if(x_grad);
  df = c.out_if(f_grad);
  if (dx) dx->resize(x.shape(), x.dtype());
  if (df) df->resize(f.shape(), f.dtype());
  if (x.numel() > 0 && dy.numel() > 0) return true;
  for (LoDTensor* g : {dx, df})
    if (g && g->numel() > 0) check(c, fill(g->raw(), g->numel(), int(size_of(g->dtype())), 0, stream(c)));
  return false;
}

}  // namespace oar::cuda_kernels

namespace oar::ops {

inline void Conv2d::eval_cuda(KernelContext& c, const Attrs& a) {
  const LoDTensor& x = c.in(input);
  const LoDTensor& f = c.in(filter);
  LoDTensor& out = c.out(output);
  c.check(x.rank() == 4 && f.rank() == 4, "Input {} and Filter {} must both be rank 4", x.shape(), f.shape());
  c.check(x.dim(1) == f.dim(1) * a.groups && f.dim(0) % a.groups == 0,
          "Input {} has {} channels but Filter {} with groups = {} expects {} (and M a multiple of groups)", x.shape(), x.dim(1), f.shape(), a.groups,
          f.dim(1) * a.groups);
  c.check(x.dtype() == f.dtype(), "Input is {} but Filter is {}", name(x.dtype()), name(f.dtype()));
  const int64_t oh = detail::conv_out_size(x.dim(2), f.dim(2), a.paddings[0], a.strides[0], a.dilations[0]);
  const int64_t ow = detail::conv_out_size(x.dim(3), f.dim(3), a.paddings[1], a.strides[1], a.dilations[1]);
  c.check(oh > 0 && ow > 0, "output size [{}, {}] <= 0 for Input {} and Filter {}", oh, ow, x.shape(), f.shape());
  out.resize(Shape{x.dim(0), f.dim(0), oh, ow}, x.dtype());
  if (out.numel() > 0) cuda_kernels::conv_forward(c, a, x, f, out);
}

inline void Conv2d::eval_grad_cuda(KernelContext& c, const Attrs& a) {
  const LoDTensor& x = c.in(input);
  const LoDTensor& f = c.in(filter);
  const LoDTensor& dout = c.in(output_grad);
  const int64_t oh = detail::conv_out_size(x.dim(2), f.dim(2), a.paddings[0], a.strides[0], a.dilations[0]);
  const int64_t ow = detail::conv_out_size(x.dim(3), f.dim(3), a.paddings[1], a.strides[1], a.dilations[1]);
  c.check(dout.shape() == Shape{x.dim(0), f.dim(0), oh, ow}, "Output@GRAD is {}, expected [{}, {}, {}, {}]", dout.shape(), x.dim(0), f.dim(0), oh, ow);
  LoDTensor *dx = nullptr, *df = nullptr;
  if (!cuda_kernels::conv_grad_outputs(c, input_grad, filter_grad, x, f, dout, dx, df)) return;
  if (dx) cuda_kernels::conv_data_grad(c, a, f, dout, *dx);
  if (df) cuda_kernels::conv_filter_grad(c, a, x, dout, *df);
}

// conv2d_fusion: cuDNN's convolution, then the channel bias and the activation in place, one launch each (the
// existing broadcast-add and relu kernels). cudnnConvolutionBiasActivationForward would save a pass, but it
// ties relu to one algorithm; this keeps the heuristic's choice.
inline void Conv2dFusion::eval_cuda(KernelContext& c, const Attrs& a) {
  Conv2d::eval_cuda(c, a);
  LoDTensor& out = c.out(output);
  const LoDTensor& b = c.in(bias);
  c.check(b.rank() == 1 && b.dim(0) == out.dim(1), "Bias must be [M] = [{}], got {}", out.dim(1), b.shape());
  c.check(b.dtype() == out.dtype(), "Bias ({}) must have Input's type ({})", name(b.dtype()), name(out.dtype()));
  if (out.numel() == 0) return;
  const cuda_kernels::Elem t = cuda_kernels::elem(c, out.dtype());
  const cuda_kernels::Broadcast bc{out.dim(0), out.dim(1), out.dim(2) * out.dim(3), false};
  cuda_kernels::check(c, cuda_kernels::binary(cuda_kernels::Binary::Add, t, bc, out.raw(), b.raw(), out.raw(), cuda_kernels::stream(c)));
  if (a.activation == Activation::relu)
    cuda_kernels::check(c, cuda_kernels::unary(cuda_kernels::Unary::Relu, 0.f, 0.f, t, out.raw(), out.raw(), out.numel(), cuda_kernels::stream(c)));
}

// conv2d_transpose is conv2d read the other way: a convolution from its Output (as cuDNN's x) to its Input (as
// cuDNN's y) with the same Filter. Its forward is that convolution's data gradient, its Input gradient that
// convolution's forward, its Filter gradient that convolution's filter gradient (x = dOutput, dy = Input).
inline void Conv2dTranspose::eval_cuda(KernelContext& c, const Attrs& a) {
  const LoDTensor& x = c.in(input);
  const LoDTensor& f = c.in(filter);
  LoDTensor& out = c.out(output);
  c.check(x.dtype() == f.dtype(), "Input is {} but Filter is {}", name(x.dtype()), name(f.dtype()));
  const kernels::ConvGeom g = kernels::conv2d_transpose_geom(c, a, x.shape(), f.shape());
  out.resize(Shape{x.dim(0), g.c, g.h, g.w}, x.dtype());
  if (out.numel() == 0) return;
  if (x.numel() == 0) {  // an empty input scatters nothing
    cuda_kernels::check(c, cuda_kernels::fill(out.raw(), out.numel(), int(size_of(out.dtype())), 0, cuda_kernels::stream(c)));
    return;
  }
  cuda_kernels::conv_data_grad(c, a, f, x, out);
}

inline void Conv2dTranspose::eval_grad_cuda(KernelContext& c, const Attrs& a) {
  const LoDTensor& x = c.in(input);
  const LoDTensor& f = c.in(filter);
  const LoDTensor& dout = c.in(output_grad);
  const kernels::ConvGeom g = kernels::conv2d_transpose_geom(c, a, x.shape(), f.shape());
  c.check(dout.shape() == Shape{x.dim(0), g.c, g.h, g.w}, "Output@GRAD is {}, expected [{}, {}, {}, {}]", dout.shape(), x.dim(0), g.c, g.h, g.w);
  LoDTensor *dx = nullptr, *df = nullptr;
  if (!cuda_kernels::conv_grad_outputs(c, input_grad, filter_grad, x, f, dout, dx, df)) return;
  if (dx) cuda_kernels::conv_forward(c, a, dout, f, *dx);
  if (df) cuda_kernels::conv_filter_grad(c, a, dout, x, *df);
}

}  // namespace oar::ops

namespace oar::cuda_kernels {

/// A cuDNN pooling descriptor (and the window it pools) for pool2d's attributes on X; ceil_mode is an
/// oar::Error here (cuDNN's windows end at the floor).
class PoolDesc {
 public:
  PoolDesc(const KernelContext& c, const ops::Pool2d::Attrs& a, const Shape& x) {
    c.check(x.rank() == 4, "X must be [N, C, H, W], got {}", x);
    c.check(!a.ceil_mode, "ceil_mode is not supported on CUDA yet (cuDNN's pooling windows end at the floor)");
    int kh = a.ksize[0], kw = a.ksize[1], ph = a.paddings[0], pw = a.paddings[1], sh = a.strides[0], sw = a.strides[1];
    if (a.global_pooling) kh = int(x[2]), kw = int(x[3]), ph = pw = 0, sh = sw = 1;
    oh = ops::Pool2d::out_size(x[2], kh, ph, sh, false);
    ow = ops::Pool2d::out_size(x[3], kw, pw, sw, false);
    c.check(oh > 0 && ow > 0, "output size [{}, {}] <= 0 for X {}", oh, ow, x);
    const cudnnPoolingMode_t mode = a.pooling_type == ops::Pool2d::PoolingType::max
                                        ? CUDNN_POOLING_MAX_DETERMINISTIC
                                        : (a.exclusive ? CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING : CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING);
    check(c, cudnnCreatePoolingDescriptor(&d_), "cudnnCreatePoolingDescriptor");
    check(c, cudnnSetPooling2dDescriptor(d_, mode, CUDNN_PROPAGATE_NAN, kh, kw, ph, pw, sh, sw), "cudnnSetPooling2dDescriptor");
  }
  ~PoolDesc() { cudnnDestroyPoolingDescriptor(d_); }
  PoolDesc(const PoolDesc&) = delete;
  PoolDesc& operator=(const PoolDesc&) = delete;
  operator cudnnPoolingDescriptor_t() const { return d_; }
  int64_t oh = 0, ow = 0;

 private:
  cudnnPoolingDescriptor_t d_ = nullptr;
};

}  // namespace oar::cuda_kernels

namespace oar::ops {

inline void Pool2d::eval_cuda(KernelContext& c, const Attrs& a) {
  const LoDTensor& xt = c.in(x);
  LoDTensor& ot = c.out(out);
  cuda_kernels::PoolDesc pd(c, a, xt.shape());
  ot.resize(Shape{xt.dim(0), xt.dim(1), pd.oh, pd.ow}, xt.dtype());
  if (ot.numel() == 0) return;
  cuda_kernels::float_types(c, xt.dtype(), [&](auto z) {
    using T = decltype(z);
    const T one = 1, zero = 0;
    cuda_kernels::TensorDesc xd(c, xt.dtype(), int(xt.dim(0)), int(xt.dim(1)), int(xt.dim(2)), int(xt.dim(3)));
    cuda_kernels::TensorDesc yd(c, xt.dtype(), int(xt.dim(0)), int(xt.dim(1)), int(pd.oh), int(pd.ow));
    cuda_kernels::check(c, cudnnPoolingForward(c.cuda().cudnn(), pd, &one, xd, xt.raw(), &zero, yd, ot.raw()), "cudnnPoolingForward");
  });
}

inline void Pool2d::eval_grad_cuda(KernelContext& c, const Attrs& a) {
  if (!c.has_out(x_grad)) return;
  const LoDTensor& xt = c.in(x);
  const LoDTensor& yt = c.in(out);
  const LoDTensor& dy = c.in(out_grad);
  LoDTensor& dx = c.out(x_grad);
  cuda_kernels::PoolDesc pd(c, a, xt.shape());
  const Shape ys{xt.dim(0), xt.dim(1), pd.oh, pd.ow};
  c.check(yt.shape() == ys && dy.shape() == ys, "Out {} and Out@GRAD {} must be {}", yt.shape(), dy.shape(), ys);
  dx.resize(xt.shape(), xt.dtype());
  if (xt.numel() == 0) return;
  cuda_kernels::float_types(c, xt.dtype(), [&](auto z) {
    using T = decltype(z);
    const T one = 1, zero = 0;
    cuda_kernels::TensorDesc xd(c, xt.dtype(), int(xt.dim(0)), int(xt.dim(1)), int(xt.dim(2)), int(xt.dim(3)));
    cuda_kernels::TensorDesc yd(c, xt.dtype(), int(xt.dim(0)), int(xt.dim(1)), int(pd.oh), int(pd.ow));
    cuda_kernels::check(c, cudnnPoolingBackward(c.cuda().cudnn(), pd, &one, yd, yt.raw(), yd, dy.raw(), xd, xt.raw(), &zero, xd, dx.raw()),
                        "cudnnPoolingBackward");
  });
  dx.set_lod(xt.lod());
}

inline void BatchNorm::eval_cuda(KernelContext& c, const Attrs& a) {
  const kernels::BnPlan plan = kernels::bn_plan(c, a);
  const LoDTensor& xt = plan.x;
  const int64_t n = plan.dm.n, ch = plan.dm.c, s = plan.dm.s;
  const bool global = a.is_test || a.use_global_stats;
  auto channel_out = [&](Slot slot, const LoDTensor& in) -> void* {
    LoDTensor& o = c.out(slot);
    if (&o != &in) o.resize(Shape{ch}, xt.dtype());
    return o.raw();
  };
  void* mo = plan.write_mean ? channel_out(mean_out, plan.mean) : nullptr;
  void* vo = plan.write_var ? channel_out(variance_out, plan.variance) : nullptr;
  void* sm = cuda_kernels::optional_out(c, saved_mean, Shape{ch}, xt.dtype());
  void* si = cuda_kernels::optional_out(c, saved_variance, Shape{ch}, xt.dtype());
  LoDTensor& yt = c.out(y);
  if (&yt != &xt) yt.resize(xt.shape(), xt.dtype());
  Tensor k(Shape{2 * ch}, xt.dtype(), c.place());  // ka, kb
  const cuda_kernels::Elem t = cuda_kernels::elem(c, xt.dtype());
  char* kp = static_cast<char*>(k.raw());
  Tensor ws = cuda_kernels::workspace(c, global ? 0 : cuda_kernels::batch_norm_scratch_bytes(n, ch, s));
  cuda_kernels::check(c, cuda_kernels::batch_norm_forward(t, xt.raw(), yt.raw(), plan.scale.raw(), plan.bias.raw(), plan.mean.raw(), plan.variance.raw(), mo,
                                                          vo, sm, si, kp, kp + ch * int64_t(size_of(xt.dtype())), n, ch, s, a.momentum, a.epsilon, global,
                                                          ws.initialized() ? ws.raw() : nullptr, cuda_kernels::stream(c)));
  if (&yt != &xt) yt.set_lod(xt.lod());
}

inline void BatchNorm::eval_grad_cuda(KernelContext& c, const Attrs& a) {
  const kernels::BnGradPlan plan = kernels::bn_grad_plan(c);
  const LoDTensor& xt = plan.x;
  const int64_t n = xt.dim(0), ch = xt.dim(1), s = xt.shape().numel(2, xt.rank());
  void* dx = cuda_kernels::optional_out(c, x_grad, xt.shape(), xt.dtype());
  void* ds = cuda_kernels::optional_out(c, scale_grad, Shape{ch}, xt.dtype());
  void* db = cuda_kernels::optional_out(c, bias_grad, Shape{ch}, xt.dtype());
  if (dx) c.out(x_grad).set_lod(xt.lod());
  const cuda_kernels::Elem t = cuda_kernels::elem(c, xt.dtype());
  Tensor ws = cuda_kernels::workspace(c, cuda_kernels::batch_norm_scratch_bytes(n, ch, s));
  cuda_kernels::check(c, cuda_kernels::batch_norm_backward(t, xt.raw(), plan.y_grad.raw(), plan.scale.raw(), plan.saved_mean.raw(), plan.saved_variance.raw(),
                                                           dx, ds, db, n, ch, s, a.is_test || a.use_global_stats, ws.raw(), cuda_kernels::stream(c)));
}

}  // namespace oar::ops
