// kernels/cuda/launch.hpp: the device half of the CUDA backend as host code calls it: plain functions over raw
// device pointers, defined in this folder's .cu files (nvcc), called by the eval_cuda kernels in this folder's
// .hpp files (the host compiler, inside liboar). Nothing here includes a CUDA or an ir header (the op lists
// are macros alone), so nvcc and the host compiler read the same declarations.
// Every function queues its work on `s` and returns without waiting; it returns the launch's cudaError_t as an
// int (0: none), which the host side turns into an oar::Error naming the op (kernels/cuda/host.hpp).
#pragma once
#include <cstddef>
#include <cstdint>

#include "oar/ops/binary_list.hpp"
#include "oar/ops/lr_formula.hpp"
#include "oar/ops/unary_list.hpp"

struct CUstream_st;

namespace oar::cuda_kernels {

using Stream = CUstream_st*;

/// The element types the device kernels are instantiated for (b8: bool, for cast only).
enum class Elem : int { f32, f64, i32, i64, b8, f16, bf16 };

/// The unary and binary element-wise ops, in the order of their lists.
enum class Unary : int {
#define OAR_UNARY_ENUM(kind, op_type, Functor, a0, d0, a1, d1) Functor,
  OAR_UNARY_OPS(OAR_UNARY_ENUM)
#undef OAR_UNARY_ENUM
};
enum class Binary : int {
#define OAR_BINARY_ENUM(op_type, Op, Functor) Functor,
  OAR_BINARY_OPS(OAR_BINARY_ENUM)
#undef OAR_BINARY_ENUM
};

/// X viewed as [pre, n, post] against Y as [n] (ops::BroadcastDims); `same`: equal shapes, n elements.
struct Broadcast {
  int64_t pre = 1, n = 0, post = 1;
  bool same = true;
};

/// A sum per channel of a tensor seen as [pre, c, post] runs as this many blocks per channel (about 1024 blocks
/// in all, each over at least 1024 elements), so that a few channels still fill the GPU (channel_sum.cuh).
inline int channel_splits(int64_t pre, int64_t c, int64_t post) {
  const int64_t m = pre * post, want = c > 0 ? (1024 + c - 1) / c : 1, most = (m + 1023) / 1024;
  const int64_t s = want < most ? want : most;
  return int(s < 1 ? 1 : s);
}
/// The device scratch such a sum of `values` numbers per element needs.
inline size_t channel_scratch_bytes(int64_t pre, int64_t c, int64_t post, int values) {
  return size_t(channel_splits(pre, c, post)) * size_t(c) * size_t(values) * sizeof(double);
}

// ---- elementwise.cu
/// y = f(x) for n elements (f32, f64); `a`, `b`: the functor's parameters. In place allowed.
int unary(Unary op, float a, float b, Elem t, const void* x, void* y, int64_t n, Stream s);
/// dx = f.grad(x, y, dy); x may be y (an op whose derivative reads only Out).
int unary_grad(Unary op, float a, float b, Elem t, const void* x, const void* y, const void* dy, void* dx, int64_t n, Stream s);
/// out = f(x, y) with y broadcast (f32, f64; i32, i64 for the integer functors).
int binary(Binary op, Elem t, const Broadcast& b, const void* x, const void* y, void* out, Stream s);
/// dx = f.dx(...) (X's shape), dy = f.dy(...) summed over the broadcast dims; either may be null (f32, f64).
/// `scratch`: channel_scratch_bytes(b.pre, b.n, b.post, 1) bytes when dy is summed (!b.same).
int binary_grad(Binary op, Elem t, const Broadcast& b, const void* x, const void* y, const void* dout, void* dx, void* dy, void* scratch, Stream s);
/// out[i] = value for n elements of `bytes` each (1, 2, 4 or 8): `pattern` holds the value's bytes.
int fill(void* out, int64_t n, int bytes, uint64_t pattern, Stream s);
/// out = scale * x + bias for n elements (f32, f64, i32, i64; integers computed in double).
int scale(Elem t, const void* x, void* out, int64_t n, double scale, double bias, Stream s);
/// out += x for n elements (f32, f64, i32, i64).
int accumulate(Elem t, const void* x, void* out, int64_t n, Stream s);
/// out[0] = sum(x) / n (f32, f64), summed in double; 0 / 0 = NaN for n = 0.
int mean(Elem t, const void* x, void* out, int64_t n, Stream s);
/// dx[i] = dout[0] / n (f32, f64).
int mean_grad(Elem t, const void* dout, void* dx, int64_t n, Stream s);

// ---- tensor.cu
/// out = static_cast<To>(x) for n elements between f32, f64, i32, i64 and b8 (bool: x != 0).
int cast(Elem from, Elem to, const void* x, void* out, int64_t n, Stream s);
/// The dims of a permuted copy: out has `dims`, and out's element at index i reads the source at the sum of
/// i's coordinates times `strides` (the source's stride of each out dim).
struct Permute {
  static constexpr int max_rank = 9;
  int rank = 0;
  int64_t dims[max_rank] = {}, strides[max_rank] = {};
};
/// out = x permuted (transpose), elements of `bytes` bytes (1, 2, 4 or 8), n of them.
int permute(int bytes, const Permute& p, const void* x, void* out, int64_t n, Stream s);

// ---- reduce.cu: reduce_sum / mean / max / min over X seen as alternating groups of kept and reduced dims
// (kernels::ReducePlan): out[o] reduces the `count` elements of X at output index o.
enum class Reduce : int { sum, mean, max, min };
struct ReduceGroups {
  static constexpr int max_groups = 9;
  int groups = 0;
  int64_t size[max_groups] = {}, ostride[max_groups] = {}, xstride[max_groups] = {};
  bool red[max_groups] = {};
  int64_t count = 1, out_numel = 1;
};
/// out[o] for every o (f32, f64, i32, i64; sums in double or int64); an empty reduction gives the identity
/// (sum 0, mean NaN for floats and 0 for integers, max -inf or lowest, min +inf or max).
int reduce(Reduce r, Elem t, const ReduceGroups& g, const void* x, void* out, Stream s);
/// dx[i] = dout[o(i)] (sum), / count (mean), or where x[i] == out[o(i)] (max, min; out may be null otherwise).
int reduce_grad(Reduce r, Elem t, const ReduceGroups& g, const void* x, const void* out, const void* dout, void* dx, Stream s);

// ---- nn.cu
/// out[r] = -log(x[r, label[r]]) for hard labels (i64), 0 where label == ignore_index, NaN for a label outside
/// [0, cols) (the CPU's oar::Error for it would need the labels on the host, a copy every step);
/// `soft`: label is [rows, cols] of x's type and out[r] = -sum_j label[r, j] log(x[r, j]). -log(0) is taken as
/// 1e20, as the CPU kernel does.
int cross_entropy(Elem t, bool soft, const void* x, const void* label, void* out, int64_t rows, int64_t cols, int64_t ignore_index, Stream s);
/// dx[r, j] = -dout[r] / x[r, label[r]] at the label, 0 elsewhere (hard); -dout[r] label[r, j] / x[r, j] (soft).
int cross_entropy_grad(Elem t, bool soft, const void* x, const void* label, const void* dout, void* dx, int64_t rows, int64_t cols,
                       int64_t ignore_index, Stream s);
/// softmax_with_cross_entropy of logits x [rows, cols]: sm = softmax(x) per row, loss[r] = lse - (x[r, label] - max)
/// for hard i64 labels (0 at ignore_index, NaN outside [0, cols)), or sum_j label[r, j] (lse - (x[r, j] - max)) (soft).
int softmax_cross_entropy(Elem t, bool soft, const void* x, const void* label, void* sm, void* loss, int64_t rows, int64_t cols, int64_t ignore_index,
                          Stream s);
/// dx = (sm - onehot(label)) dloss per row (hard; 0 at ignore_index), or (sm sum(label) - label) dloss (soft).
int softmax_cross_entropy_grad(Elem t, bool soft, const void* sm, const void* label, const void* dloss, void* dx, int64_t rows, int64_t cols,
                               int64_t ignore_index, Stream s);
/// dropout in training: keep_i = (draw i of the counter stream of `seed`) >= p; out = x keep scale; mask = keep
/// (may be null). The CPU kernel draws the same stream, so a seed gives the same mask on both.
int dropout(Elem t, const void* x, void* out, void* mask, int64_t n, uint64_t seed, double p, double scale, Stream s);
/// lookup_table: out[i] = w[ids[i]] ([n, d] rows), zeros at `pad`, NaN for an id outside [0, v) (the CPU's
/// oar::Error would need the ids on the host).
int lookup_rows(Elem t, const void* w, const int64_t* ids, void* out, int64_t n, int64_t d, int64_t v, int64_t pad, Stream s);
/// Its dense gradient: dw = zeros [v, d], dw[ids[i]] += dout[i] in the order of i (one thread per column, as the
/// CPU kernel sums, so the result is the CPU's), skipping `pad` and ids outside [0, v).
int lookup_rows_grad(Elem t, const int64_t* ids, const void* dout, void* dw, int64_t n, int64_t d, int64_t v, int64_t pad, Stream s);
/// The k largest of each row of x [rows, cols] (f32, f64, i32, i64), largest first (NaN before numbers, equal
/// values by index, as the CPU kernel orders them): out [rows, k] of x's type, indices [rows, k] i64.
int top_k(Elem t, const void* x, void* out, int64_t* indices, int64_t rows, int64_t cols, int64_t k, Stream s);
/// out[r] (i64) = the index along the middle dim of x seen as [outer, n, inner] of the largest (`max`) or the
/// smallest element, the first on ties; NaN wins both, as on the CPU.
int arg_reduce(Elem t, bool max, const void* x, int64_t* out, int64_t outer, int64_t n, int64_t inner, Stream s);
/// accuracy of indices [rows, k] (i64) against labels [rows] (i64, or i32 when `label_i32`): a row is correct
/// when one of its k indices is its label. Writes accuracy (f32 [1]), correct and total (i32 [1]).
int accuracy(const int64_t* indices, const void* label, bool label_i32, int64_t rows, int64_t k, float* accuracy, int32_t* correct, int32_t* total,
             Stream s);

// ---- norm.cu: batch_norm over x as [n, c, s] (s: the spatial size), the CPU kernel's semantics.
/// y = (x - mean) istd scale + bias with the batch statistics (or, `global`, mean_in / var_in); writes the
/// running statistics (mean_out / var_out, may be mean_in / var_in or null), saved mean and inverse std (may be
/// null); ka, kb: scratch of c values; `scratch`: batch_norm_scratch_bytes(n, c, s).
int batch_norm_forward(Elem t, const void* x, void* y, const void* scale, const void* bias, const void* mean_in, const void* var_in, void* mean_out,
                       void* var_out, void* saved_mean, void* saved_istd, void* ka, void* kb, int64_t n, int64_t c, int64_t s, float momentum,
                       double epsilon, bool global, void* scratch, Stream st);
/// dx (may be null), dscale = sum(dy xhat), dbias = sum(dy) (either may be null) from the saved statistics.
int batch_norm_backward(Elem t, const void* x, const void* dy, const void* scale, const void* saved_mean, const void* saved_istd, void* dx, void* dscale,
                        void* dbias, int64_t n, int64_t c, int64_t s, bool global, void* scratch, Stream st);
/// The device scratch either pass needs: two sums per channel, then two factors per channel.
inline size_t batch_norm_scratch_bytes(int64_t n, int64_t c, int64_t s) { return channel_scratch_bytes(n, c, s, 2) + size_t(c) * 2 * sizeof(double); }

// ---- fused.cu: fused_elementwise's postfix program (ops/fused_elementwise.hpp) run per output element
/// One node: kind as ops::fused::Kind (0 input, 1 constant, 2 unary, 3 binary); code as ops::fused::Unary or
/// Binary; the stack slot its value lives in; the input it reads; a unary's parameters; a constant's value.
struct FusedNode {
  uint8_t kind = 0, code = 0, depth = 0;
  int8_t input = -1;
  float p0 = 0, p1 = 0;
  double value = 0;
};
/// How an input is read along the flat output (kernels/common/fused_elementwise.hpp's InputMap): mode 0 the same
/// layout, 1 one value, 2 through the strides of the collapsed output dims (0 where broadcast).
inline constexpr int fused_max_rank = 9;
struct FusedInput {
  const void* data = nullptr;
  int mode = 0, rank = 0;
  int64_t dims[fused_max_rank] = {}, strides[fused_max_rank] = {};
};
/// What one launch takes in its arguments (under the 4 KiB every device accepts).
inline constexpr int fused_max_nodes = 48, fused_max_inputs = 8, fused_max_depth = 16;
/// out[i] = the program at output element i, for i in [0, total) (f32, f64).
int fused_forward(Elem t, const FusedNode* nodes, int num_nodes, const FusedInput* inputs, int num_inputs, void* out, int64_t total, Stream s);
/// The gradient: for each output element i, the nodes' values and then their adjoints from dout[i] back to
/// the inputs; input k's adjoints add up in gradient `target[k]` (-1: not wanted), whose values at element i
/// go to grads[target][i] (an output-shaped array: the caller sums a broadcast input's over its broadcast dims).
/// Every gradient array is written at every element.
int fused_backward(Elem t, const FusedNode* nodes, int num_nodes, const FusedInput* inputs, int num_inputs, const int8_t* target,
                   void* const* grads, int num_grads, const void* dout, int64_t total, Stream s);

// ---- optim.cu (lr is a device scalar of the parameter's type; `skip`, where given, a device bool: the op's
// SkipUpdate, which when true leaves every output as it is, a power's output receiving the power itself)
/// pow_out[0] = pow[0] * beta (Adam's running powers), or pow[0] when skipped.
int scale_scalar(Elem t, const void* pow, void* pow_out, float beta, const bool* skip, Stream s);
/// A SelectedRows gradient's rows grouped by Param row, as one device array `plan`: rows [k] (each Param row
/// once, in the order of first appearance, as cpu_kernels::param_update::merge_rows lists them) | start [k + 1] |
/// src [n] (group i is the value rows src[start[i] .. start[i + 1]), in their order). value: [n, width].
/// sgd: p[rows[i]] -= lr value[src[e]] for each e of group i in order (the CPU's sequential sum).
int sparse_sgd(Elem t, void* p, const void* value, const int64_t* plan, int64_t k, int64_t width, const void* lr, const bool* skip, Stream s);
/// merged[at(i)] = 0 + value[src[e]] over group i's e in order (merge_rows's sums), at(i) = i (`compact`: [k, width])
/// or rows[i] (into a zeroed [height, width], which then is the dense gradient).
int sparse_merge(Elem t, const void* value, const int64_t* plan, int64_t k, int64_t width, bool compact, void* merged, Stream s);
/// adam (adamw: coeff, the group's adam below) on the listed rows alone (lazy_mode): element j of row rows[i]
/// with g = merged[i, j].
int sparse_adam(Elem t, void* p, void* m, void* v, const void* merged, const int64_t* rows, int64_t k, int64_t width, const void* lr,
                const void* beta1_pow, const void* beta2_pow, float beta1, float beta2, float epsilon, float coeff, const bool* skip, Stream s);
/// Several parameters of one dtype updated by one rule in one launch (the update ops' eval_cuda_group, and their
/// eval_cuda as a group of one): each tensor's arrays and device scalars. sgd: p -= lr g. momentum: v = mu v + g;
/// p -= lr (g + mu v) (nesterov) or lr v. adam (with coeff != 0 adamw: p -= lr coeff p first): m = b1 m + (1 - b1)
/// g; v = b2 v + (1 - b2) g^2; p -= lr sqrt(1 - b2^t) / (1 - b1^t) m / (sqrt(v) + eps). adagrad (decay < 0: m += g^2) and
/// decayed_adagrad (m = decay m + (1 - decay) g^2): p -= lr g / (sqrt(m) + eps). adamax: m = b1 m + (1 - b1) g;
/// u = max(b2 u + eps, |g|); p -= lr / (1 - b1^t) m / u. rmsprop: ms = rho ms + (1 - rho) g^2; centered (w not
/// null): w = rho w + (1 - rho) g; mom = mu mom + lr g / sqrt(ms [- w^2] + eps); p -= mom. adadelta: eg = rho eg
/// + (1 - rho) g^2; d = -sqrt((edx + eps) / (eg + eps)) g; edx = rho edx + (1 - rho) d^2; p += d. lamb: the
/// moments as adam's, r = (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps) + coeff p, then p -= lr trust r with trust
/// = ||p|| / ||r|| per tensor (1 when either is 0), the norms summed in double on the device in a fixed order. For
/// adam, adamax and lamb the powers are read by those launches and advanced by one more (pow_out = pow * beta; in
/// place allowed). A tensor whose `skip` holds true is left as it is (its powers copied to their outputs).
enum class UpdateRule : int { sgd, momentum, adam, adagrad, adamax, rmsprop, adadelta, lamb };
struct UpdateTensor {
  void* p = nullptr;
  void* m = nullptr;  ///< momentum's velocity, adam's first moment, adagrad's moment, adamax's m, rmsprop's ms, adadelta's eg, lamb's m1
  void* v = nullptr;  ///< adam's second moment, adamax's u, rmsprop's mom, adadelta's edx, lamb's m2
  void* w = nullptr;  ///< rmsprop's mean gradient (centered; null otherwise)
  const void* g = nullptr;
  const void* lr = nullptr;
  const void* beta1_pow = nullptr;
  const void* beta2_pow = nullptr;
  void* beta1_pow_out = nullptr;  ///< null: not advanced
  void* beta2_pow_out = nullptr;
  const bool* skip = nullptr;  ///< SkipUpdate (null: never skipped)
  int64_t n = 0;
};
struct UpdateArgs {
  UpdateRule rule = UpdateRule::sgd;
  float mu = 0;  ///< momentum
  bool nesterov = false;
  float beta1 = 0, beta2 = 0, epsilon = 0, coeff = 0;  ///< adam (coeff: adamw's decay), adamax, lamb (coeff: its weight decay)
  float decay = -1;                                    ///< decayed_adagrad's decay (< 0: adagrad), rmsprop's and adadelta's rho
};
/// Tensors per launch (the launch's arguments stay under the 4 KiB every device takes).
inline constexpr int max_update_tensors = 32;
/// `scratch`: update_group_scratch_bytes(...) bytes of device memory (lamb's norms and directions; 0 for the others).
int update_group(Elem t, const UpdateArgs& a, const UpdateTensor* tensors, int count, void* scratch, Stream s);
size_t update_group_scratch_bytes(Elem t, const UpdateArgs& a, const UpdateTensor* tensors, int count);
/// lr[0] = f.at(step[0]) for a one-value step of type `step_type`; piecewise with at most lr_max_pieces
/// boundaries (f's host arrays are copied into the launch).
inline constexpr int lr_max_pieces = 16;
int lr_schedule(const ops::LrFormula& f, Elem step_type, const void* step, float* lr, Stream s);

// ---- random.cu: the counter-based generator of kernels/random_counter.hpp, so a seed gives the CPU's values.
/// out[i] = lo + (hi - lo) u_i, kept below hi in f32.
int uniform_random(Elem t, void* out, int64_t n, uint64_t seed, double lo, double hi, Stream s);
/// out[i] = mean + std z_i (z_i standard normal; `truncated`: redrawn until |z| <= 2).
int gaussian_random(Elem t, void* out, int64_t n, uint64_t seed, double mean, double std, bool truncated, Stream s);

// ---- clip_norm.cu: what clipping by norm or global norm and L1 decay add to an update program (the CPU's semantics)
/// out[0] = sum(x^2) over n elements (f32, f64), summed in double in a fixed order (the same bits every run);
/// `scratch`: squared_l2_norm_scratch_bytes(n).
int squared_l2_norm(Elem t, const void* x, void* out, int64_t n, void* scratch, Stream s);
inline size_t squared_l2_norm_scratch_bytes(int64_t n) { return channel_scratch_bytes(n, 1, 1, 1); }
/// dx = 2 dout[0] x (f32, f64).
int squared_l2_norm_grad(Elem t, const void* x, const void* dout, void* dx, int64_t n, Stream s);
/// out = x max_norm / max(||x||_2, max_norm) (f32, f64; the norm as squared_l2_norm's). In place allowed.
/// `scratch`: clip_by_norm_scratch_bytes(n) (the sum's pieces, then the factor).
int clip_by_norm(Elem t, const void* x, void* out, int64_t n, double max_norm, void* scratch, Stream s);
inline size_t clip_by_norm_scratch_bytes(int64_t n) { return channel_scratch_bytes(n, 1, 1, 1) + sizeof(double); }
/// out = 1 for x > 0, -1 for x < 0, else x (0, -0, NaN) (f32, f64, i32, i64). In place allowed.
int sign(Elem t, const void* x, void* out, int64_t n, Stream s);

// ---- norm.cu: layer_norm over x as [rows, k] (k: the dims from begin_norm_axis on), the CPU kernel's semantics.
/// Per row: mean and biased variance in double (two passes), y = (x - mean) istd scale + bias in T, with
/// istd = 1 / sqrt(var + eps); scale, bias [k] may be null. y may be x.
int layer_norm_forward(Elem t, const void* x, const void* scale, const void* bias, void* y, void* mean, void* var, int64_t rows, int64_t k,
                       double epsilon, Stream s);
/// From the forward's mean and variance: dx = istd (g - mean(g) - xhat mean(g xhat)) with g = dy scale (scale may
/// be null: 1); dscale = sum over rows of dy xhat, dbias = sum over rows of dy (in double, a fixed order). dx,
/// dscale, dbias may each be null. `scratch`: layer_norm_scratch_bytes(rows, k).
int layer_norm_backward(Elem t, const void* x, const void* dy, const void* scale, const void* mean, const void* var, void* dx, void* dscale,
                        void* dbias, int64_t rows, int64_t k, double epsilon, void* scratch, Stream s);
/// Each row's istd, then the column sums' pieces.
inline size_t layer_norm_scratch_bytes(int64_t rows, int64_t k) { return size_t(rows) * sizeof(double) + channel_scratch_bytes(rows, k, 1, 2); }

// ---- amp.cu: dynamic loss scaling (ops/amp.hpp) and logical_not.
/// out[i] = x[i] / scale[0] (x and out may be the same); *found set to true when some x[i] is inf or NaN (it is
/// only ever set, never cleared: the caller clears it once before the first tensor).
int unscale_and_check(Elem t, const void* x, void* out, int64_t n, const float* scale, bool* found, Stream s);
/// update_loss_scaling's rule (kernels/loss_scale.hpp) on the device's one-value tensors.
int update_loss_scaling(const bool* found, const float* prev, const int32_t* good_in, const int32_t* bad_in, float* scale, int32_t* good, int32_t* bad,
                        int32_t incr_every, int32_t decr_every, float incr_ratio, float decr_ratio, Stream s);
/// out[i] = !x[i].
int logical_not(const bool* x, bool* out, int64_t n, Stream s);

// ---- logic.cu: the comparison and logical ops, one_hot and sigmoid_cross_entropy_with_logits (the CPU's semantics).
/// The comparisons of ops/compare.hpp's OAR_COMPARE_OPS and its two-input logical ops (OAR_LOGICAL_BINARY_OPS),
/// by op type; logic.cu applies the std:: functor each list line names.
enum class Compare : int { less_than, less_equal, greater_than, greater_equal, equal, not_equal };
enum class Logical : int { logical_and, logical_or, logical_xor };
/// out[i] (bool) = cmp(x[i], y[j]) with y broadcast over x as `b` (f32, f64, i32, i64).
int compare(Compare op, Elem t, const Broadcast& b, const void* x, const void* y, bool* out, Stream s);
/// out[i] = f(x[i], y[i]) for n bools. In place allowed.
int logical(Logical op, const bool* x, const bool* y, bool* out, int64_t n, Stream s);
/// out [n, depth] of type `t` (f32, f64, i32, i64): 1 at [i, label[i]], 0 elsewhere; labels of type `label_t`
/// (i32, i64), each already checked to lie in [0, depth).
int one_hot(Elem t, Elem label_t, const void* label, void* out, int64_t n, int64_t depth, Stream s);
/// out = max(x, 0) - x label + log1p(exp(-|x|)), 0 where label == ignore_index (f32, f64). out may be x or label.
int sigmoid_cross_entropy(Elem t, const void* x, const void* label, void* out, int64_t n, int ignore_index, Stream s);
/// dx = (sigmoid(x) - label) dout (sigmoid from exp(-|x|)), 0 where label == ignore_index. dx may be dout.
int sigmoid_cross_entropy_grad(Elem t, const void* x, const void* label, const void* dout, void* dx, int64_t n, int ignore_index, Stream s);

// ---- sequence_conv.cu: sequence_conv's context columns (the CPU's semantics; f32, f64). `offsets`: S + 1 on the device.
/// col [N, len * D]: col[r, j * D + k] = x[r + start + j, k] when that row lies in r's sequence, else 0.
int sequence_context(Elem t, const void* x, const int64_t* offsets, void* col, int64_t N, int64_t S, int64_t D, int start, int len, Stream s);
/// dx [N, D]: dx[u, k] = the sum over j = 0, 1, ... of dcol[u - start - j, j * D + k] for the rows u - start - j
/// inside u's sequence (the CPU's order).
int sequence_context_grad(Elem t, const void* dcol, const int64_t* offsets, void* dx, int64_t N, int64_t S, int64_t D, int start, int len, Stream s);

// ---- sequence.cu: sequence_pool, sequence_softmax, sequence_expand and their gradients (the CPU's semantics).
/// The pool types of ops::SequencePool::PoolType, in its order.
enum class SeqPool : int { average, sum, sqrt, max, last, first };
/// out[s, d] = pool of x rows [off[s], off[s+1]) at column d, D columns (f32, f64); an empty sequence gives 0 (and
/// max_index -1); max_index (i32, out's size) is written for max alone and may be null. `offsets`: S + 1 on the device.
int sequence_pool(SeqPool type, Elem t, const void* x, const int64_t* offsets, void* out, int32_t* max_index, int64_t S, int64_t D, Stream s);
/// dx [N, D] from dout [S, D]: spread (/1, /len, /sqrt(len)) or given to the row first / last / max_index names, 0
/// elsewhere; max_index (already checked to lie inside each sequence) read for max alone.
int sequence_pool_grad(SeqPool type, Elem t, const void* dout, const int32_t* max_index, const int64_t* offsets, void* dx, int64_t N, int64_t S, int64_t D,
                       Stream s);
/// out = softmax of x inside each sequence [off[s], off[s+1]) of a column (f32, f64); empty sequences write nothing.
int sequence_softmax(Elem t, const void* x, const int64_t* offsets, void* out, int64_t S, Stream s);
/// dx = y (dy - sum over the sequence of dy y).
int sequence_softmax_grad(Elem t, const void* y, const void* dy, const int64_t* offsets, void* dx, int64_t S, Stream s);
/// (sequence_expand's forward is a copy_rows, below.)
/// dx row r (M rows of D, f32, f64) = the sum, from 0 in j's order, of dout rows plan[3r] + j plan[3r+2] for j < plan[3r+1].
int sequence_expand_grad(Elem t, const void* dout, const int64_t* plan, void* dx, int64_t M, int64_t D, Stream s);

// ---- sequence_shape.cu: the row copies of sequence_concat, sequence_pad / unpad, sequence_slice and
// sequence_expand (and the gradients that copy), and sequence_mask. Plans are int64 arrays on the device.
/// For i in [0, rows): out row (dst_rows ? dst_rows[i] : i) = x row (src_rows ? src_rows[i] : i), rows of D
/// elements of `bytes` each (1, 2, 4 or 8: any dtype); a negative src_rows[i] writes a fill row instead:
/// fill[d % fill_D] at column d (fill_D 1: one value for every column; D: a whole row), zeros for a null fill.
/// requires: the rows written are distinct, and out overlaps neither x nor fill.
int copy_rows(int bytes, const void* x, const int64_t* src_rows, void* out, const int64_t* dst_rows, int64_t rows, int64_t D, const void* fill,
              int64_t fill_D, Stream s);
/// y [n, m]: y[i, j] = one (the value's bytes, as fill's pattern) where j < len[i], else all-zero bytes; len i32
/// or i64 (`len_type`), y of `bytes` bytes per element (1, 2, 4 or 8).
int sequence_mask(Elem len_type, const void* len, int bytes, uint64_t one, void* y, int64_t n, int64_t m, Stream s);

// ---- rnn.cu: lstm, gru, lstm_unit and gru_unit (the CPU kernels' math per element: kernels/cpu/lstm.hpp, gru.hpp,
// lstm_unit.hpp); the products h_{t-1} W run on cuBLAS between these launches. Activations are RnnAct's values
// (ops/rnn_common.hpp): 0 identity, 1 sigmoid, 2 tanh, 3 relu. Every function: f32, f64; k rows of D, one thread per
// element; `row_of` indexes the sequence layout (hs, cs) by a step's batch rows.
/// The gate inputs: out row r = x row row_of[r] (x row r without row_of) + bias (may be null), `rows` rows of
/// `width`. (The plain row copies between the layouts are sequence_shape.cu's copy_rows.)
int rnn_gate_inputs(Elem t, const void* x, const int64_t* row_of, const void* bias, void* out, int64_t rows, int64_t width, Stream s);
/// out[j] = the sum over rows of m [rows, width] (in double, a fixed order). `scratch`: channel_scratch_bytes(rows,
/// width, 1, 1).
int rnn_column_sums(Elem t, const void* m, int64_t rows, int64_t width, void* out, void* scratch, Stream s);
/// lstm's cell: D, the activations, the peepholes W_ic | W_fc | W_oc (3D values; null without).
struct LstmCell {
  int64_t d = 0;
  int gate = 1, cell = 2, candidate = 2;
  const void* peep = nullptr;
};
/// forward_row: g [k, 4D] holds the gate inputs and becomes the activated [c~, i, f, o]; c_prev [k, D] may be
/// null (zeros); writes c, h [k, D] and their rows row_of[i] of cs, hs.
int lstm_step(Elem t, const LstmCell& p, void* g, const void* c_prev, void* c, void* h, const int64_t* row_of, void* hs, void* cs, int64_t k, Stream s);
/// backward_row: writes dg [k, 4D]; adds the gradient of c_{t-1} to dc_prev (may be null). c_prev may be null.
int lstm_step_grad(Elem t, const LstmCell& p, const void* g, const void* c, const void* c_prev, const void* dh, const void* dc, void* dg, void* dc_prev,
                   int64_t k, Stream s);
/// The peepholes' gradients into dpeep [3D]: sums over rows of dg_i c_prev, dg_f c_prev (rows from `from` on) and
/// dg_o c (every row); c_prev of batch row r is c row prev[r] for r >= k0, c0 row r (sorted) below k0. `scratch`:
/// channel_scratch_bytes(rows, d, 1, 3).
int lstm_peephole_grad(Elem t, const void* dg, const void* c, const void* c0, const int64_t* prev, int64_t k0, int64_t from, int64_t rows, int64_t d,
                       void* dpeep, void* scratch, Stream s);
/// gru forward_step's first pass: u, r = gate(g's first 2D columns) in place; rh = r * hp (0 without hp).
int gru_gates(Elem t, int gate, void* g, const void* hp, void* rh, int64_t k, int64_t d, Stream s);
/// Its second: c = candidate(g's last D columns) in place; h = hp + u (c - hp) (u c without hp), and h's rows
/// row_of[i] of hs when hs is not null.
int gru_output(Elem t, int candidate, void* g, const void* hp, void* h, const int64_t* row_of, void* hs, int64_t k, int64_t d, Stream s);
/// backward_step's first pass: dg_u, dg_c (dg_r = 0 without hp); dhp += dh (1 - u) when dhp is not null.
int gru_gates_grad(Elem t, int gate, int candidate, const void* g, const void* hp, const void* dh, void* dg, void* dhp, int64_t k, int64_t d, Stream s);
/// Its second, from drh = dg_c W_c^T: dg_r = gate'(drh hp); dhp += drh r when dhp is not null.
int gru_reset_grad(Elem t, int gate, const void* g, const void* hp, const void* drh, void* dg, void* dhp, int64_t k, int64_t d, Stream s);
/// lstm_unit over x [n, 4D] ([i | f | o | g]) and c_prev [n, D]: writes c, h.
int lstm_unit(Elem t, const void* x, const void* c_prev, void* c, void* h, int64_t n, int64_t d, float forget_bias, Stream s);
/// Its gradient: dx [n, 4D] and dc_prev [n, D], either may be null.
int lstm_unit_grad(Elem t, const void* x, const void* c_prev, const void* c, const void* dc, const void* dh, void* dx, void* dc_prev, int64_t n,
                   int64_t d, float forget_bias, Stream s);

// ---- attention.cu
/// One attention problem (a batch entry's or a sequence's head): element offsets of its first row from the
/// bases passed beside it, and row strides (as kernels/common/attention.hpp lays them out).
struct AttnProblem {
  int64_t q, k, v, o, lse, mask;  ///< mask: -1 for none
  int64_t tq, tk, qs, ks, vs, os, lse_stride;
  uint64_t draw0;  ///< the dropout draw of element (0, 0)
};
/// What every problem of a call shares. `rng_key`: fn::CounterRng's key for the dropout draws.
struct AttnShared {
  int64_t d = 0, dv = 0;
  double scale = 1, dropout = 0;
  uint64_t rng_key = 0;
  bool causal = false, mask_bool = false;
};
/// Forward of `count` problems (`problems` in device memory); a block per query row, up to `max_tq` rows each.
int attention_forward(Elem t, const AttnProblem* problems, int64_t count, int64_t max_tq, const AttnShared& sh, const void* q, const void* k,
                      const void* v, const void* mask, void* o, void* lse, Stream s);
/// Backward: dq written, dk and dv added to (zero them first).
int attention_backward(Elem t, const AttnProblem* problems, int64_t count, int64_t max_tq, const AttnShared& sh, const void* q, const void* k,
                       const void* v, const void* mask, const void* o, const void* dout, const void* lse, void* dq, void* dk, void* dv, Stream s);
/// add_position_encoding over `rows` rows of `width` features (pos: each row's position, int64 on the device).
int add_position_encoding(Elem t, const void* x, void* out, const int64_t* pos, int64_t rows, int64_t width, float alpha, float beta, Stream s);
/// x * alpha (the gradient of add_position_encoding).
int scale_by(Elem t, const void* x, void* out, int64_t n, float alpha, Stream s);
/// rotary_position_embedding (sign 1) or its gradient (sign -1) over `rows` rows of `heads` heads of `d`
/// features; `heads_inner`: the heads of a row are adjacent (LoD [N, H, d]), else each row is one head.
int rotary(Elem t, const void* x, void* out, const int64_t* pos, int64_t rows, int64_t heads, int64_t d, float base, int64_t offset, float sign,
           Stream s);

}  // namespace oar::cuda_kernels
