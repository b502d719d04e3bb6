// kernels/cuda/nn.hpp: eval_cuda of mul and matmul (cuBLAS), softmax and log_softmax (cuDNN), cross_entropy,
// softmax_with_cross_entropy, top_k, accuracy, dropout and lookup_table with its gradient, dense or SelectedRows
// (kernels/cuda/nn.cu).
#pragma once
#include <cstring>

#include "kernels/common/accuracy.hpp"      // accuracy_out
#include "kernels/common/arg_max.hpp"       // arg_plan
#include "kernels/common/cross_entropy.hpp"  // xent::check_operands
#include "kernels/common/dropout.hpp"       // dropout_plan, dropout_grad_plan
#include "kernels/common/lookup_table.hpp"  // padding_row
#include "kernels/common/matmul.hpp"  // matmul_forward / matmul_backward: the kernel both places run, with their products
#include "kernels/common/place_io.hpp"
#include "kernels/common/softmax.hpp"       // softmax_plan, softmax_grad_plan
#include "kernels/cuda/elementwise_launch.hpp"
#include "kernels/cuda/host.hpp"
#include "kernels/cuda/nn_launch.hpp"
#include "kernels/cuda/tensor_launch.hpp"
#include "oar/ops/accuracy.hpp"
#include "oar/ops/arg_max.hpp"
#include "oar/ops/cross_entropy.hpp"
#include "oar/ops/dropout.hpp"
#include "oar/ops/gather.hpp"
#include "oar/ops/lookup_table.hpp"
#include "oar/ops/matmul.hpp"
#include "oar/ops/mul.hpp"
#include "oar/ops/softmax.hpp"
#include "oar/ops/softmax_with_cross_entropy.hpp"

namespace oar::cuda_kernels {

/// softmax or log_softmax along `axis` through cuDNN: X as NCHW [pre, n, post, 1], one softmax per (N, H).
template <bool log, class Op>
void softmax_forward(KernelContext& c, int axis) {
  const kernels::SoftmaxPlan p = kernels::softmax_plan<Op>(c, axis);
  const LoDTensor& x = p.x;
  LoDTensor& out = p.out;
  const int64_t pre = p.sp.pre, n = p.sp.n, post = p.sp.post;
  c.check(pre <= INT32_MAX && n <= INT32_MAX && post <= INT32_MAX, "X {} is beyond cuDNN's 32-bit sizes", x.shape());
  if (&out != &x) out.resize(x.shape(), x.dtype());
  if (x.numel() > 0)
    float_types(c, x.dtype(), [&](auto z) {
      using T = decltype(z);
      const T one = 1, zero = 0;
      TensorDesc d(c, x.dtype(), int(pre), int(n), int(post), 1);
      check(c, cudnnSoftmaxForward(c.cuda().cudnn(), log ? CUDNN_SOFTMAX_LOG : CUDNN_SOFTMAX_ACCURATE, CUDNN_SOFTMAX_MODE_CHANNEL, &one, d, x.raw(),
                                   &zero, d, out.raw()),
            "cudnnSoftmaxForward");
    });
  if (&out != &x) out.set_lod(x.lod());
}

template <bool log, class Op>
void softmax_backward(KernelContext& c, int axis) {
  if (!c.has_out(Op::x_grad)) return;
  const kernels::SoftmaxGradPlan p = kernels::softmax_grad_plan<Op>(c, axis);
  const LoDTensor &y = p.out, &dy = p.out_grad;
  if (y.numel() > 0)
    float_types(c, y.dtype(), [&](auto z) {
      using T = decltype(z);
      const T one = 1, zero = 0;
      TensorDesc d(c, y.dtype(), int(p.split.pre), int(p.split.n), int(p.split.post), 1);
      check(c, cudnnSoftmaxBackward(c.cuda().cudnn(), log ? CUDNN_SOFTMAX_LOG : CUDNN_SOFTMAX_ACCURATE, CUDNN_SOFTMAX_MODE_CHANNEL, &one, d, y.raw(), d,
                                    dy.raw(), &zero, d, p.x_grad.raw()),
            "cudnnSoftmaxBackward");
    });
}

/// matmul's products on cuBLAS (cpu_kernels::CpuMatmul's counterpart): strided batches, one call each.
struct CudaMatmul {
  using types = type_list<float, double, half, bfloat16>;
  template <class T>
  static void batched(const KernelContext& c, bool ta, bool tb, int64_t m, int64_t n, int64_t k, compute_t<T> alpha, const T* a, int64_t lda,
                      int64_t sa, const T* b, int64_t ldb, int64_t sb, T* out, int64_t ldc, int64_t sc, int64_t batch) {
    if (batch <= 0 || m == 0 || n == 0) return;
    if (batch == 1) return gemm<T>(c, ta, tb, m, n, k, alpha, a, lda, b, ldb, 0, out, ldc);
    c.check(m <= INT32_MAX && n <= INT32_MAX && k <= INT32_MAX && batch <= INT32_MAX, "a batch of {} x {} x {} products is beyond cuBLAS's 32-bit sizes", m,
            k, n);
    const compute_t<T> zero = 0;
    lda = std::max<int64_t>(lda, 1), ldb = std::max<int64_t>(ldb, 1);  // k = 0: as gemm in host.hpp
    // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: B first (as gemm in host.hpp).
    const cublasOperation_t opb = tb ? CUBLAS_OP_T : CUBLAS_OP_N, opa = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasHandle_t h = cublas(c, is_half_v<T>);
    if constexpr (is_half_v<T>)
      check(c,
            cublasGemmStridedBatchedEx(h, opb, opa, int(n), int(m), int(k), &alpha, b, cublas_type<T>(), int(ldb), sb, a, cublas_type<T>(), int(lda), sa,
                                       &zero, out, cublas_type<T>(), int(ldc), sc, int(batch), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
            "cublasGemmStridedBatchedEx");
    else if constexpr (std::is_same_v<T, float>)
      check(c, cublasSgemmStridedBatched(h, opb, opa, int(n), int(m), int(k), &alpha, b, int(ldb), sb, a, int(lda), sa, &zero, out, int(ldc), sc, int(batch)),
            "cublasSgemmStridedBatched");
    else
      check(c, cublasDgemmStridedBatched(h, opb, opa, int(n), int(m), int(k), &alpha, b, int(ldb), sb, a, int(lda), sa, &zero, out, int(ldc), sc, int(batch)),
            "cublasDgemmStridedBatched");
  }
  /// C = sum over the batch of alpha op(A_b) op(B_b): the products accumulate into C.
  template <class T>
  static void batch_sum(const KernelContext& c, bool ta, bool tb, int64_t m, int64_t n, int64_t k, compute_t<T> alpha, const T* a, int64_t lda,
                        int64_t sa, const T* b, int64_t ldb, int64_t sb, T* out, int64_t ldc, int64_t batch) {
    if (batch <= 0) {
      check(c, fill(out, m * ldc, int(sizeof(T)), 0, stream(c)));
      return;
    }
    if constexpr (is_half_v<T>) {
      if (m == 0 || n == 0) return;
      lda = std::max<int64_t>(lda, 1), ldb = std::max<int64_t>(ldb, 1);  // k = 0: as gemm in host.hpp
      // The sum in an f32 buffer, rounded to 16 bits once: beta = 1 into a 16-bit C would round at every term.
      c.check(m <= INT32_MAX && n <= INT32_MAX && k <= INT32_MAX && lda <= INT32_MAX && ldb <= INT32_MAX && ldc <= INT32_MAX,
              "a product of {} x {} x {} is beyond cuBLAS's 32-bit sizes", m, k, n);
      Tensor acc = workspace(c, size_t(m * ldc) * sizeof(float));
      const cublasOperation_t opb = tb ? CUBLAS_OP_T : CUBLAS_OP_N, opa = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
      cublasHandle_t h = cublas(c, true);
      for (int64_t i = 0; i < batch; ++i) {
        const float beta = i ? 1.f : 0.f;
        check(c,
              cublasGemmEx(h, opb, opa, int(n), int(m), int(k), &alpha, b + i * sb, cublas_type<T>(), int(ldb), a + i * sa, cublas_type<T>(), int(lda), &beta,
                           acc.raw(), CUDA_R_32F, int(ldc), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
              "cublasGemmEx");
      }
      check(c, cast(Elem::f32, std::is_same_v<T, half> ? Elem::f16 : Elem::bf16, acc.raw(), out, m * ldc, stream(c)));
      return;
    }
    for (int64_t i = 0; i < batch; ++i) gemm<T>(c, ta, tb, m, n, k, alpha, a + i * sa, lda, b + i * sb, ldb, i ? 1 : 0, out, ldc);
  }
};

/// X as [n, d] with Label checked against it (kernels::xent::check_operands), and hard labels int64 (an int32
/// label is an oar::Error here: the CPU kernel converts it). `g`: a gradient's per-row input.
inline kernels::xent::Rows xent_operands(const KernelContext& c, const LoDTensor& x, std::string_view x_name, const LoDTensor& label, bool soft,
                                         const LoDTensor* g = nullptr, std::string_view g_name = {}) {
  const kernels::xent::Rows r = kernels::xent::check_operands(c, x, x_name, label, soft, g, g_name);
  if (!soft) c.check(label.dtype() == DType::i64, "Label must be int64 on CUDA, got {}", name(label.dtype()));
  return r;
}

}  // namespace oar::cuda_kernels

namespace oar::ops {

inline void Mul::eval_cuda(KernelContext& c, const Attrs& a) {
  const LoDTensor& xt = c.in(x);
  const LoDTensor& yt = c.in(y);
  LoDTensor& ot = c.out(out);
  const int xd = a.x_num_col_dims, yd = a.y_num_col_dims;
  const int64_t m = xt.shape().numel(0, xd), k = xt.shape().numel(xd, xt.rank());
  const int64_t k2 = yt.shape().numel(0, yd), n = yt.shape().numel(yd, yt.rank());
  c.check(k == k2, "X {} has {} columns at x_num_col_dims={}, Y {} has {} rows at y_num_col_dims={}", xt.shape(), k, xd, yt.shape(), k2, yd);
  c.check(xt.dtype() == yt.dtype(), "X is {} but Y is {}", name(xt.dtype()), name(yt.dtype()));
  Shape os = xt.shape().slice(0, xd);
  for (int i = yd; i < yt.rank(); ++i) os.push_back(yt.dim(i));
  ot.resize(os, xt.dtype());
  cuda_kernels::gemm_types(c, xt.dtype(), [&](auto z) {
    using T = decltype(z);
    cuda_kernels::gemm<T>(c, false, false, m, n, k, 1, xt.data<T>(), k, yt.data<T>(), n, 0, ot.data<T>(), n);
  });
  ot.set_lod(xt.lod());
}

inline void Mul::eval_grad_cuda(KernelContext& c, const Attrs& a) {
  const LoDTensor& xt = c.in(x);
  const LoDTensor& yt = c.in(y);
  const LoDTensor& dout = c.in(out_grad);
  const int64_t m = xt.shape().numel(0, a.x_num_col_dims), k = xt.shape().numel(a.x_num_col_dims, xt.rank());
  const int64_t n = yt.shape().numel(a.y_num_col_dims, yt.rank());
  c.check(dout.numel() == m * n, "Out@GRAD {} does not hold {} x {} values", dout.shape(), m, n);
  cuda_kernels::gemm_types(c, xt.dtype(), [&](auto z) {
    using T = decltype(z);
    if (c.has_out(x_grad)) {  // dX = dOut Y^T
      LoDTensor& dx = c.out(x_grad);
      dx.resize(xt.shape(), xt.dtype());
      cuda_kernels::gemm<T>(c, false, true, m, k, n, 1, dout.data<T>(), n, yt.data<T>(), n, 0, dx.data<T>(), k);
      dx.set_lod(xt.lod());
    }
    if (c.has_out(y_grad)) {  // dY = X^T dOut
      LoDTensor& dy = c.out(y_grad);
      dy.resize(yt.shape(), yt.dtype());
      cuda_kernels::gemm<T>(c, true, false, k, n, m, 1, xt.data<T>(), k, dout.data<T>(), n, 0, dy.data<T>(), n);
    }
  });
}

inline void Matmul::eval_cuda(KernelContext& c, const Attrs& a) { kernels::matmul_forward<cuda_kernels::CudaMatmul>(c, a); }
inline void Matmul::eval_grad_cuda(KernelContext& c, const Attrs& a) { kernels::matmul_backward<cuda_kernels::CudaMatmul>(c, a); }

inline void Softmax::eval_cuda(KernelContext& c, const Attrs& a) { cuda_kernels::softmax_forward<false, Softmax>(c, a.axis); }
inline void Softmax::eval_grad_cuda(KernelContext& c, const Attrs& a) { cuda_kernels::softmax_backward<false, Softmax>(c, a.axis); }
inline void LogSoftmax::eval_cuda(KernelContext& c, const Attrs& a) { cuda_kernels::softmax_forward<true, LogSoftmax>(c, a.axis); }
inline void LogSoftmax::eval_grad_cuda(KernelContext& c, const Attrs& a) { cuda_kernels::softmax_backward<true, LogSoftmax>(c, a.axis); }

inline void CrossEntropy::eval_cuda(KernelContext& c, const Attrs& a) {
  const LoDTensor& xt = c.in(x);
  const LoDTensor& lt = c.in(label);
  LoDTensor& yt = c.out(y);
  const kernels::xent::Rows r = cuda_kernels::xent_operands(c, xt, "X", lt, a.soft_label);
  const int64_t n = r.n, d = r.d;
  const cuda_kernels::Elem t = cuda_kernels::elem(c, xt.dtype());
  yt.resize(detail::ce_loss_shape(xt.shape()), xt.dtype());
  cuda_kernels::check(c, cuda_kernels::cross_entropy(t, a.soft_label, xt.raw(), lt.raw(), yt.raw(), n, d, a.ignore_index, cuda_kernels::stream(c)));
  yt.set_lod(xt.lod());
}

inline void CrossEntropy::eval_grad_cuda(KernelContext& c, const Attrs& a) {
  if (!c.has_out(x_grad)) return;
  const LoDTensor& xt = c.in(x);
  const LoDTensor& lt = c.in(label);
  const LoDTensor& dy = c.in(y_grad);
  LoDTensor& dx = c.out(x_grad);
  const kernels::xent::Rows r = cuda_kernels::xent_operands(c, xt, "X", lt, a.soft_label, &dy, "Y@GRAD");
  const int64_t n = r.n, d = r.d;
  const cuda_kernels::Elem t = cuda_kernels::elem(c, xt.dtype());
  dx.resize(xt.shape(), xt.dtype());
  cuda_kernels::check(
      c, cuda_kernels::cross_entropy_grad(t, a.soft_label, xt.raw(), lt.raw(), dy.raw(), dx.raw(), n, d, a.ignore_index, cuda_kernels::stream(c)));
  dx.set_lod(xt.lod());
}

inline void SoftmaxWithCrossEntropy::eval_cuda(KernelContext& c, const Attrs& a) {
  const LoDTensor& x = c.in(logits);
  const LoDTensor& lt = c.in(label);
  LoDTensor& sm = c.out(softmax);
  LoDTensor& loss_t = c.out(loss);
  const kernels::xent::Rows r = cuda_kernels::xent_operands(c, x, "Logits", lt, a.soft_label);
  const int64_t n = r.n, d = r.d;
  const cuda_kernels::Elem t = cuda_kernels::elem(c, x.dtype());
  sm.resize(x.shape(), x.dtype());
  loss_t.resize(detail::ce_loss_shape(x.shape()), x.dtype());
  cuda_kernels::check(c, cuda_kernels::softmax_cross_entropy(t, a.soft_label, x.raw(), lt.raw(), sm.raw(), loss_t.raw(), n, d, a.ignore_index,
                                                             cuda_kernels::stream(c)));
  sm.set_lod(x.lod());
  loss_t.set_lod(x.lod());
}

inline void SoftmaxWithCrossEntropy::eval_grad_cuda(KernelContext& c, const Attrs& a) {
  if (!c.has_out(logits_grad)) return;
  const LoDTensor& sm = c.in(softmax);
  const LoDTensor& lt = c.in(label);
  const LoDTensor& dl = c.in(loss_grad);
  LoDTensor& dx = c.out(logits_grad);
  const kernels::xent::Rows r = cuda_kernels::xent_operands(c, sm, "Softmax", lt, a.soft_label, &dl, "Loss@GRAD");
  const int64_t n = r.n, d = r.d;
  const cuda_kernels::Elem t = cuda_kernels::elem(c, sm.dtype());
  dx.resize(sm.shape(), sm.dtype());
  cuda_kernels::check(c, cuda_kernels::softmax_cross_entropy_grad(t, a.soft_label, sm.raw(), lt.raw(), dl.raw(), dx.raw(), n, d, a.ignore_index,
                                                                  cuda_kernels::stream(c)));
  dx.set_lod(sm.lod());
}

inline void Dropout::eval_cuda(KernelContext& c, const Attrs& a) {
  const LoDTensor& xt = c.in(x);
  LoDTensor& ot = c.out(out);
  const kernels::DropoutPlan plan = kernels::dropout_plan(c, a);
  LoDTensor* mask_t = plan.mask;
  const cuda_kernels::Elem t = cuda_kernels::elem(c, xt.dtype());
  if (&ot != &xt) ot.resize(xt.shape(), xt.dtype());
  if (mask_t) mask_t->resize(xt.shape(), xt.dtype());
  const int64_t n = xt.numel();
  if (a.is_test) {
    cuda_kernels::check(c, cuda_kernels::scale(t, xt.raw(), ot.raw(), n, keep_scale(a), 0.0, cuda_kernels::stream(c)));
    if (mask_t) {
      uint64_t one = 0;
      if (t == cuda_kernels::Elem::f32) { const float v = 1; std::memcpy(&one, &v, sizeof v); }
      else { const double v = 1; std::memcpy(&one, &v, sizeof v); }
      cuda_kernels::check(c, cuda_kernels::fill(mask_t->raw(), n, int(size_of(xt.dtype())), one, cuda_kernels::stream(c)));
    }
  } else {
    cuda_kernels::check(c, cuda_kernels::dropout(t, xt.raw(), ot.raw(), mask_t ? mask_t->raw() : nullptr, n, plan.seed, a.dropout_prob, keep_scale(a),
                                                 cuda_kernels::stream(c)));
  }
  if (&ot != &xt) ot.set_lod(xt.lod());
}

inline void Dropout::eval_grad_cuda(KernelContext& c, const Attrs& a) {
  if (!c.has_out(x_grad)) return;
  const kernels::DropoutGradPlan plan = kernels::dropout_grad_plan(c);
  const LoDTensor& dout = plan.out_grad;
  LoDTensor& dx = plan.x_grad;
  const cuda_kernels::Elem t = cuda_kernels::elem(c, dout.dtype());
  dx.resize(dout.shape(), dout.dtype());
  const cuda_kernels::Broadcast same{1, dout.numel(), 1, true};
  cuda_kernels::check(c, cuda_kernels::binary(cuda_kernels::Binary::Mul, t, same, dout.raw(), plan.mask.raw(), dx.raw(), cuda_kernels::stream(c)));
  cuda_kernels::check(c, cuda_kernels::scale(t, dx.raw(), dx.raw(), dx.numel(), keep_scale(a), 0.0, cuda_kernels::stream(c)));
  dx.set_lod(dout.lod());
}

}  // namespace oar::ops

namespace oar::cuda_kernels {

/// lookup_table's SelectedRows gradient, as the CPU makes it: rows = the non-padding ids in order (repeats
/// kept), height = V, value = their Out@GRAD rows, on the device. The rows are host data, so the ids come to
/// the host: the stream is synchronized first (the ids may be a kernel's output), and they are checked there
/// against [0, V) as the CPU checks them.
inline void lookup_sparse_grad(const KernelContext& c, Value& gv, const LoDTensor& ids_t, const LoDTensor& dout, DType w_type, int64_t v, int64_t d,
                               int64_t pad) {
  const Elem t = elem(c, w_type);
  c.check(dout.dtype() == w_type, "Out@GRAD is {} but W is {}", name(dout.dtype()), name(w_type));
  c.device().synchronize();
  const Tensor host_ids = ids_t.to(cpu());
  const std::span<const int64_t> idv = kernels::lookup_ids(c, host_ids, v, pad);
  // NOTE: the variable was created as a tensor (its kind comes from the forward program); as on the CPU, the
  // kernel switches the value's kind.
  if (!gv.is_selected_rows()) gv.reset();
  SelectedRows& sr = gv.selected_rows();
  sr.height = v;
  sr.rows.clear();
  thread_local std::vector<int64_t> src;  // the Out@GRAD row of each listed row
  src.clear();
  for (size_t i = 0; i < idv.size(); ++i)
    if (idv[i] != pad) {
      sr.rows.push_back(idv[i]);
      src.push_back(int64_t(i));
    }
  const int64_t k = int64_t(sr.rows.size());
  sr.value.resize(Shape{k, d}, w_type, c.place());
  if (k * d == 0) return;
  if (k == int64_t(idv.size())) {  // no padding id: the value is Out@GRAD
    const size_t row = size_t(d) * size_of(w_type);  // row by row: one pitch of the whole tensor may pass cudaMemcpy2D's limit
    detail::cuda_copy_rows(c.cuda(), sr.value.raw(), row, dout.raw(), row, row, size_t(k));
    return;
  }
  const Tensor dev_src = kernels::place_io::upload(c, src);
  check(c, lookup_rows(t, dout.raw(), dev_src.data<int64_t>(), sr.value.raw(), k, d, int64_t(idv.size()), -1, stream(c)));
}

}  // namespace oar::cuda_kernels

namespace oar::ops {

inline void LookupTable::eval_cuda(KernelContext& c, const Attrs& a) {
  const LoDTensor& wt = c.in(w);
  const LoDTensor& ids_t = c.in(ids);
  c.check(wt.rank() == 2, "W must be [V, D], got {}", wt.shape());
  c.check(ids_t.dtype() == DType::i64, "Ids must be i64, got {}", name(ids_t.dtype()));
  const int64_t v = wt.dim(0), d = wt.dim(1), pad = kernels::padding_row(a.padding_idx, v);
  Shape os = ids_t.shape();
  c.check(os.rank() >= 1 && os[os.rank() - 1] == 1, "Ids must end in a dim of 1 ([N, 1]), got {}", os);
  os[os.rank() - 1] = d;
  LoDTensor& ot = c.out(out);
  const cuda_kernels::Elem t = cuda_kernels::elem(c, wt.dtype());
  ot.resize(os, wt.dtype());
  cuda_kernels::check(c, cuda_kernels::lookup_rows(t, wt.raw(), ids_t.data<int64_t>(), ot.raw(), ids_t.numel(), d, v, pad, cuda_kernels::stream(c)));
  ot.set_lod(ids_t.lod());
}

inline void LookupTable::eval_grad_cuda(KernelContext& c, const Attrs& a) {
  Value* gv = c.out_value(w_grad);
  if (!gv) return;
  const LoDTensor& wt = c.in(w);
  const LoDTensor& ids_t = c.in(ids);
  const LoDTensor& dout = c.in(out_grad);
  c.check(ids_t.dtype() == DType::i64, "Ids must be i64, got {}", name(ids_t.dtype()));
  const int64_t v = wt.dim(0), d = wt.dim(1), pad = kernels::padding_row(a.padding_idx, v), n = ids_t.numel();
  c.check(dout.numel() == n * d, "Out@GRAD {} does not hold {} rows of {}", dout.shape(), n, d);
  const cuda_kernels::Elem t = cuda_kernels::elem(c, wt.dtype());
  if (a.is_sparse) {
    cuda_kernels::lookup_sparse_grad(c, *gv, ids_t, dout, wt.dtype(), v, d, pad);
    return;
  }
  LoDTensor& dw = gv->tensor();
  dw.set_place(c.place());
  dw.resize(wt.shape(), wt.dtype());
  cuda_kernels::check(c, cuda_kernels::lookup_rows_grad(t, ids_t.data<int64_t>(), dout.raw(), dw.raw(), n, d, v, pad, cuda_kernels::stream(c)));
}

}  // namespace oar::ops

namespace oar::cuda_kernels {

/// An index tensor (i32 or i64) as int64 on the device: its own memory, or an i32 one converted into `wide`.
inline const int64_t* index_i64(const KernelContext& c, const Tensor& idx, Tensor& wide) {
  c.check(idx.dtype() == DType::i64 || idx.dtype() == DType::i32, "Index must be i32 or i64, got {}", name(idx.dtype()));
  if (idx.dtype() == DType::i64) return idx.data<int64_t>();
  wide = Tensor(idx.shape(), DType::i64, c.place());
  check(c, cast(Elem::i32, Elem::i64, idx.raw(), wide.raw(), idx.numel(), stream(c)));
  return wide.data<int64_t>();
}

}  // namespace oar::cuda_kernels

namespace oar::ops {

// gather is lookup_table without padding: rows of X by Index, and the gradient summed in the CPU's order. An
// index outside [0, rows) gives a NaN row (the CPU's oar::Error would need the indices on the host).
inline void Gather::eval_cuda(KernelContext& c, const NoAttrs&) {
  const LoDTensor& xt = c.in(x);
  const LoDTensor& it = c.in(index);
  c.check(xt.rank() >= 1, "X must have rank >= 1, got {}", xt.shape());
  LoDTensor& ot = c.out(out);
  c.check(&ot != &xt, "gather cannot run in place");
  Tensor wide;
  const int64_t* idx = cuda_kernels::index_i64(c, it, wide);
  const cuda_kernels::Elem t = cuda_kernels::elem(c, xt.dtype());
  Shape os = xt.shape();
  os[0] = it.numel();
  ot.resize(os, xt.dtype());
  ot.clear_lod();
  cuda_kernels::check(c, cuda_kernels::lookup_rows(t, xt.raw(), idx, ot.raw(), it.numel(), xt.shape().numel(1, xt.rank()), xt.dim(0), -1,
                                                   cuda_kernels::stream(c)));
}

inline void Gather::eval_grad_cuda(KernelContext& c, const NoAttrs&) {
  if (!c.has_out(x_grad)) return;
  const LoDTensor& xt = c.in(x);
  const LoDTensor& it = c.in(index);
  const LoDTensor& dout = c.in(out_grad);
  const int64_t d = xt.shape().numel(1, xt.rank());
  c.check(dout.numel() == it.numel() * d, "Out@GRAD {} does not match {} rows of X {}", dout.shape(), it.numel(), xt.shape());
  Tensor wide;
  const int64_t* idx = cuda_kernels::index_i64(c, it, wide);
  const cuda_kernels::Elem t = cuda_kernels::elem(c, xt.dtype());
  LoDTensor& dx = c.out(x_grad);
  dx.resize(xt.shape(), xt.dtype());
  cuda_kernels::check(c, cuda_kernels::lookup_rows_grad(t, idx, dout.raw(), dx.raw(), it.numel(), d, xt.dim(0), -1, cuda_kernels::stream(c)));
}

inline void TopK::eval_cuda(KernelContext& c, const Attrs& a) {
  const LoDTensor& xt = c.in(x);
  c.check(xt.rank() >= 1, "X must have rank >= 1, got {}", xt.shape());
  const int64_t kv = a.k, n = xt.dim(xt.rank() - 1), rows = xt.shape().numel(0, xt.rank() - 1);
  c.check(kv <= n, "k = {} is more than the last dim of X {}", kv, xt.shape());
  Shape os = xt.shape();
  os[os.rank() - 1] = kv;
  LoDTensor& ot = c.out(out);
  LoDTensor& ind = c.out(indices);
  const cuda_kernels::Elem t = cuda_kernels::elem(c, xt.dtype(), true);
  ot.resize(os, xt.dtype());
  ind.resize(os, DType::i64);
  cuda_kernels::check(c, cuda_kernels::top_k(t, xt.raw(), ot.raw(), ind.data<int64_t>(), rows, n, kv, cuda_kernels::stream(c)));
  ot.set_lod(xt.lod());
  ind.set_lod(xt.lod());
}

}  // namespace oar::ops

namespace oar::cuda_kernels {

template <bool Max>
void arg_reduce(KernelContext& c, const ops::tensor_detail::ArgAttrs& a) {
  using N = ops::tensor_detail::ArgNames;
  const LoDTensor& x = c.in(N::x);
  const kernels::ArgPlan p = kernels::arg_plan(c, x, a);
  LoDTensor& out = c.out(N::out);
  const Elem t = elem(c, x.dtype(), true);
  out.resize(p.out, DType::i64);
  check(c, cuda_kernels::arg_reduce(t, Max, x.raw(), out.data<int64_t>(), p.outer, p.n, p.inner, stream(c)));
  out.clear_lod();
}

}  // namespace oar::cuda_kernels

namespace oar::ops {

inline void ArgMax::eval_cuda(KernelContext& c, const Attrs& a) { cuda_kernels::arg_reduce<true>(c, a); }
inline void ArgMin::eval_cuda(KernelContext& c, const Attrs& a) { cuda_kernels::arg_reduce<false>(c, a); }

inline void Accuracy::eval_cuda(KernelContext& c, const NoAttrs&) {
  const LoDTensor& ind = c.in(indices);
  const LoDTensor& lt = c.in(label);
  c.check(ind.rank() == 2, "Indices must be [N, k], got {}", ind.shape());
  c.check(ind.dtype() == DType::i64, "Indices must be int64 on CUDA, got {}", name(ind.dtype()));
  const int64_t n = ind.dim(0), k = ind.dim(1);
  c.check(lt.numel() == n, "Label {} must hold one label per row of Indices {}", lt.shape(), ind.shape());
  c.check(lt.dtype() == DType::i64 || lt.dtype() == DType::i32, "Label must be int64 or int32, got {}", name(lt.dtype()));
  const kernels::AccuracyOut o = kernels::accuracy_out(c);
  cuda_kernels::check(c, cuda_kernels::accuracy(ind.data<int64_t>(), lt.raw(), lt.dtype() == DType::i32, n, k, o.accuracy.data<float>(),
                                                o.correct.data<int32_t>(), o.total.data<int32_t>(), cuda_kernels::stream(c)));
}

}  // namespace oar::ops
