// kernels/cuda/elementwise_launch.hpp: the launchers elementwise.cu defines (what they share and how they report: launch.hpp).
#pragma once
#include "kernels/cuda/launch.hpp"

namespace oar::cuda_kernels {

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

}  // namespace oar::cuda_kernels
