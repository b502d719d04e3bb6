// kernels/cuda/host.hpp: what the host side of every CUDA kernel shares: the stream, the element type a DType
// launches as, and the checks that turn a failed launch, cuBLAS or cuDNN call into an oar::Error naming the op
// and the user's line. Compiled by the host compiler (inside liboar), never by nvcc.
#pragma once
#include <algorithm>

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include "kernels/cuda/launch.hpp"
#include "oar/device/kernel_context.hpp"

namespace oar::cuda_kernels {

inline Stream stream(const KernelContext& c) { return c.cuda().stream(); }

/// `bytes` of device scratch from the place's caching allocator (none for 0), freed in stream order.
inline Tensor workspace(const KernelContext& c, size_t bytes) { return bytes ? Tensor(Shape{int64_t(bytes)}, DType::u8, c.place()) : Tensor(); }

/// Output `slot` resized to `shape` of dtype `t`, as device memory; null when the op's caller did not ask for it.
inline void* optional_out(const KernelContext& c, Slot slot, const Shape& shape, DType t) {
  if (!c.has_out(slot)) return nullptr;
  LoDTensor& o = c.out(slot);
  o.resize(shape, t);
  return o.raw();
}

/// The element type of `t` for the device kernels; an oar::Error naming the op for a dtype they lack.
inline Elem elem(const KernelContext& c, DType t, bool integers = false) {
  switch (t) {
    case DType::f32: return Elem::f32;
    case DType::f64: return Elem::f64;
    case DType::i32: if (integers) return Elem::i32; break;
    case DType::i64: if (integers) return Elem::i64; break;
    default: break;
  }
  c.fail("no CUDA kernel for dtype {} (it has: float32, float64{})", name(t), integers ? ", int32, int64" : "");
}

/// Calls f(T{}) for f32 or f64 `t`, else an oar::Error naming the op.
template <class F>
void float_types(const KernelContext& c, DType t, F&& f) {
  if (t == DType::f32) f(float{});
  else if (t == DType::f64) f(double{});
  else c.fail("no CUDA kernel for dtype {} (it has: float32, float64)", name(t));
}

/// Calls f(T{}) for the types the products and convolutions take: f32, f64, and the 16-bit floats (half,
/// bfloat16: stored in 16 bits, multiplied on tensor cores and accumulated in f32), else an oar::Error.
template <class F>
void gemm_types(const KernelContext& c, DType t, F&& f) {
  if (t == DType::f32) f(float{});
  else if (t == DType::f64) f(double{});
  else if (t == DType::f16) f(half{});
  else if (t == DType::bf16) f(bfloat16{});
  else c.fail("no CUDA kernel for dtype {} (it has: float32, float64, float16, bfloat16)", name(t));
}

/// cuBLAS's name of the 16-bit float type T.
template <class T>
constexpr cudaDataType_t cublas_type() {
  return std::is_same_v<T, half> ? CUDA_R_16F : CUDA_R_16BF;
}

/// An oar::Error naming the op when a launch failed (`err`: a cudaError_t, 0 for none).
inline void check(const KernelContext& c, int err) {
  if (err != 0) [[unlikely]]
    c.fail("CUDA kernel launch failed on {}: {} ({})", c.place().str(), cudaGetErrorString(cudaError_t(err)), err);
}
inline void check(const KernelContext& c, cublasStatus_t st, const char* what) {
  if (st != CUBLAS_STATUS_SUCCESS) [[unlikely]]
    c.fail("cuBLAS: {} failed on {}: {} ({})", what, c.place().str(), cublasGetStatusString(st), int(st));
}
inline void check(const KernelContext& c, cudnnStatus_t st, const char* what) {
  if (st != CUDNN_STATUS_SUCCESS) [[unlikely]]
    c.fail("cuDNN: {} failed on {}: {} ({})", what, c.place().str(), cudnnGetErrorString(st), int(st));
}

/// A cuDNN tensor descriptor for the life of one kernel call.
class TensorDesc {
 public:
  TensorDesc(const KernelContext& c, DType t, int n, int ch, int h, int w) {
    check(c, cudnnCreateTensorDescriptor(&d_), "cudnnCreateTensorDescriptor");
    c.check(t == DType::f32 || t == DType::f64, "no cuDNN tensor of {} here (f32 and f64)", name(t));
    check(c, cudnnSetTensor4dDescriptor(d_, CUDNN_TENSOR_NCHW, t == DType::f64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT, n, ch, h, w),
          "cudnnSetTensor4dDescriptor");
  }
  ~TensorDesc() { cudnnDestroyTensorDescriptor(d_); }
  TensorDesc(const TensorDesc&) = delete;
  TensorDesc& operator=(const TensorDesc&) = delete;
  operator cudnnTensorDescriptor_t() const { return d_; }

 private:
  cudnnTensorDescriptor_t d_ = nullptr;
};

/// The context's cuBLAS handle in the math mode set_cuda_tf32 asks for (TF32 tensor cores, or full f32); for
/// 16-bit operands (`sixteen`) with every reduction in f32 too (cuBLAS may otherwise reduce split-K partial
/// sums in the output's 16 bits).
inline cublasHandle_t cublas(const KernelContext& c, bool sixteen = false) {
  cublasHandle_t h = c.cuda().cublas();
  const int mode = int(cuda_tf32() ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH) |
                   (sixteen ? int(CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION) : 0);
  check(c, cublasSetMathMode(h, cublasMath_t(mode)), "cublasSetMathMode");
  return h;
}

/// Row-major C[m, n] = alpha op(A) op(B) + beta C on cuBLAS (f32, f64, or a 16-bit float accumulated in f32):
/// the column-major product C^T = op(B)^T op(A)^T, so B goes first.
template <class T>
void gemm(const KernelContext& c, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, compute_t<T> alpha, const T* a, int64_t lda,
          const T* b, int64_t ldb, compute_t<T> beta, T* out, int64_t ldc) {
  if (m == 0 || n == 0) return;
  c.check(m <= INT32_MAX && n <= INT32_MAX && k <= INT32_MAX && lda <= INT32_MAX && ldb <= INT32_MAX && ldc <= INT32_MAX,
          "a product of {} x {} x {} is beyond cuBLAS's 32-bit sizes", m, k, n);
  cublasHandle_t h = cublas(c, is_half_v<T>);
  const cublasOperation_t ta = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, tb = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  // k = 0 (out = beta * out) comes with rows of no width, whose leading dimension the caller may give as 0;
  // cuBLAS wants at least 1 even where it reads nothing.
  lda = std::max<int64_t>(lda, 1), ldb = std::max<int64_t>(ldb, 1);
  if constexpr (is_half_v<T>)
    check(c,
          cublasGemmEx(h, ta, tb, int(n), int(m), int(k), &alpha, b, cublas_type<T>(), int(ldb), a, cublas_type<T>(), int(lda), &beta, out,
                       cublas_type<T>(), int(ldc), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
          "cublasGemmEx");
  else if constexpr (std::is_same_v<T, float>)
    check(c, cublasSgemm(h, ta, tb, int(n), int(m), int(k), &alpha, b, int(ldb), a, int(lda), &beta, out, int(ldc)), "cublasSgemm");
  else
    check(c, cublasDgemm(h, ta, tb, int(n), int(m), int(k), &alpha, b, int(ldb), a, int(lda), &beta, out, int(ldc)), "cublasDgemm");
}

}  // namespace oar::cuda_kernels
