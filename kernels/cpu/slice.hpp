// kernels/cpu/slice.hpp: slice and slice_grad on the CPU, and the same code on CUDA (the op is `any_place`): each
// output row is one contiguous run of the input (byte-wise, so every dtype shares the code), parallel over rows;
// on a GPU one 2-D copy per plane.
// Hand-written: faster than an xt::view assignment, which walks views element by element (oar_bench nd_slice).
#pragma once
#include <array>
#include <cstring>

#include "kernels/cpu/place_io.hpp"
#include "oar/ops/slice.hpp"
#include "oar/device/kernel_context.hpp"
#include "oar/device/thread_pool.hpp"

namespace oar::cpu_kernels {

/// Copies the box (begin[d], out_shape[d]) of a tensor of shape `full` between `full_data` and the dense
/// `box_data`: to_box = true reads the box (slice), false writes it (slice_grad). Element size `es` bytes.
inline void box_copy(const KernelContext& c, char* full_data, const Shape& full, char* box_data, const Shape& box, const int64_t* begin, size_t es,
                     bool to_box) {
  int r = full.rank();
  int64_t n = box.numel();
  if (n == 0) return;
  if (c.place().is_cuda()) {  // one 2-D copy per plane of the box (its last two dims) on the kernel's stream
    std::array<int64_t, Shape::kMaxRank> st;
    if (r) st[size_t(r - 1)] = 1;
    for (int d = r - 2; d >= 0; --d) st[size_t(d)] = st[size_t(d + 1)] * full[d + 1];
    const int64_t last = r ? box[r - 1] : 1, height = r > 1 ? box[r - 2] : 1, planes = n / (last * height);
    const size_t row = size_t(last) * es, pitch = size_t(r > 1 ? st[size_t(r - 2)] : last) * es;
    for (int64_t pl = 0; pl < planes; ++pl) {
      int64_t rem = pl, off = 0;
      for (int d = r - 1; d >= 0; --d) {
        if (d >= r - 2) off += begin[size_t(d)] * st[size_t(d)];  // the plane's own dims start at their begin
        else {
          off += (rem % box[d] + begin[size_t(d)]) * st[size_t(d)];
          rem /= box[d];
        }
      }
      char* f = full_data + size_t(off) * es;
      char* b = box_data + size_t(pl) * size_t(height) * row;
      if (to_box) oar::detail::cuda_copy_rows(c.cuda(), b, row, f, pitch, row, size_t(height));
      else oar::detail::cuda_copy_rows(c.cuda(), f, pitch, b, row, row, size_t(height));
    }
    return;
  }
  if (r == 0) {
    if (to_box) std::memcpy(box_data, full_data, es);
    else std::memcpy(full_data, box_data, es);
    return;
  }
  std::array<int64_t, Shape::kMaxRank> stride;
  stride[size_t(r - 1)] = 1;
  for (int d = r - 2; d >= 0; --d) stride[size_t(d)] = stride[size_t(d + 1)] * full[d + 1];
  int64_t last = box[r - 1], rows = n / last;
  size_t row_bytes = size_t(last) * es;
  parallel_for(0, rows, std::max<int64_t>(1, (int64_t(1) << 16) / int64_t(row_bytes)), [&](int64_t lo, int64_t hi) {
    for (int64_t row = lo; row < hi; ++row) {
      int64_t rem = row, off = begin[size_t(r - 1)];
      for (int d = r - 2; d >= 0; --d) {
        off += (rem % box[d] + begin[size_t(d)]) * stride[size_t(d)];
        rem /= box[d];
      }
      char* f = full_data + size_t(off) * es;
      char* b = box_data + size_t(row) * row_bytes;
      if (to_box) std::memcpy(b, f, row_bytes);
      else std::memcpy(f, b, row_bytes);
    }
  });
}

}  // namespace oar::cpu_kernels

namespace oar::ops {

inline void Slice::eval_cpu(KernelContext& c, const Attrs& a) {
  const LoDTensor& in = c.in(input);
  std::array<int64_t, Shape::kMaxRank> begin{};
  Shape os = in.shape();
  for_each_range(c, in.shape(), a.axes, a.starts, a.ends, [&](int axis, int64_t b, int64_t e) {
    begin[size_t(axis)] = b;
    os[axis] = e - b;
  });
  LoDTensor& ot = c.out(out);
  c.check(&ot != &in, "slice cannot run in place");
  ot.resize(os, in.dtype());
  cpu_kernels::box_copy(c, static_cast<char*>(in.raw()), in.shape(), static_cast<char*>(ot.raw()), os, begin.data(), size_of(in.dtype()), true);
  if (os.rank() > 0 && in.rank() > 0 && os[0] == in.dim(0)) ot.set_lod(in.lod());
  else ot.clear_lod();
}

/// Input@GRAD = zeros of Input's shape with Out@GRAD written into the box.
inline void Slice::eval_grad_cpu(KernelContext& c, const Attrs& a) {
  if (!c.has_out(input_grad)) return;
  const LoDTensor& in = c.in(input);
  const LoDTensor& dout = c.in(out_grad);
  std::array<int64_t, Shape::kMaxRank> begin{};
  Shape os = in.shape();
  for_each_range(c, in.shape(), a.axes, a.starts, a.ends, [&](int axis, int64_t b, int64_t e) {
    begin[size_t(axis)] = b;
    os[axis] = e - b;
  });
  c.check(dout.shape() == os, "Out@GRAD {} does not match the slice {}", dout.shape(), os);
  LoDTensor& din = c.out(input_grad);
  din.resize(in.shape(), dout.dtype());
  cpu_kernels::place_io::zero(c, din.raw(), din.bytes());
  cpu_kernels::box_copy(c, static_cast<char*>(din.raw()), in.shape(), static_cast<char*>(dout.raw()), os, begin.data(), size_of(dout.dtype()), false);
  din.set_lod(in.lod());
}

}  // namespace oar::ops
