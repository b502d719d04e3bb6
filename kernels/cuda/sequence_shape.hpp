// kernels/cuda/sequence_shape.hpp: eval_cuda of sequence_concat, sequence_pad, sequence_unpad, sequence_slice
// (with their gradients) and sequence_mask (device side: kernels/cuda/sequence_shape.cu). Each starts from the
// plan it shares with its CPU kernel (kernels/common: the same checks, messages, output shapes and LoD; the
// inputs whose values a plan reads, Length, Offset and the lengths, come to the host through place_io::host),
// then turns it into a row plan on the host that copy_rows follows on the device. sequence_reshape and lod_reset are `any_place`.
#pragma once
#include <cstring>
#include <vector>

#include "kernels/common/place_io.hpp"
#include "kernels/common/sequence_concat.hpp"
#include "kernels/common/sequence_mask.hpp"
#include "kernels/common/sequence_pad.hpp"
#include "kernels/common/sequence_slice.hpp"
#include "kernels/cuda/host.hpp"
#include "kernels/cuda/sequence_shape_launch.hpp"

namespace oar::cuda_kernels {

/// A row plan made on the host, on the kernel's device.
inline Tensor device_rows(const KernelContext& c, const std::vector<int64_t>& v) { return kernels::place_io::upload(c, v); }

/// copy_rows of `rows` rows of D elements of `t` (elements of size_of(t) bytes), an oar::Error naming the op if
/// the launch fails.
inline void copy_rows(const KernelContext& c, DType t, const void* x, const int64_t* src_rows, void* out, const int64_t* dst_rows, int64_t rows, int64_t D,
                      const void* fill = nullptr, int64_t fill_D = 1) {
  check(c, copy_rows(int(size_of(t)), x, src_rows, out, dst_rows, rows, D, fill, fill_D, stream(c)));
}

/// For sequence_concat: Out's row of each row of each input, the inputs' rows one input after another
/// (`first[k]`: where input k's rows start). Out's sequence s holds the inputs' sequences s in input order.
inline std::vector<int64_t> concat_rows(const KernelContext& c, size_t n, size_t S, std::vector<int64_t>& first) {
  using Op = ops::SequenceConcat;
  first.assign(n + 1, 0);
  for (size_t k = 0; k < n; ++k) first[k + 1] = first[k] + c.in(Op::x, k).dim(0);
  std::vector<int64_t> pos(size_t(first[n]));
  int64_t at = 0;
  for (size_t s = 0; s < S; ++s)
    for (size_t k = 0; k < n; ++k) {
      const std::vector<size_t>& l = c.in(Op::x, k).lod()[0];
      for (size_t r = l[s]; r < l[s + 1]; ++r) pos[size_t(first[k]) + r] = at++;
    }
  return pos;
}

}  // namespace oar::cuda_kernels

namespace oar::ops {

/// Out row pos[k][r] = X[k] row r: one scatter per input. requires: Out is none of the inputs.
inline void SequenceConcat::eval_cuda(KernelContext& c, const NoAttrs&) {
  const kernels::ConcatPlan p = kernels::concat_plan(c);
  LoDTensor& ot = *p.out;
  if (ot.numel() > 0) {
    std::vector<int64_t> first;
    const Tensor pos = cuda_kernels::device_rows(c, cuda_kernels::concat_rows(c, p.n, p.S, first));
    for (size_t k = 0; k < p.n; ++k)
      cuda_kernels::copy_rows(c, ot.dtype(), c.in(x, k).raw(), nullptr, ot.raw(), pos.data<int64_t>() + first[k], first[k + 1] - first[k], p.D);
  }
  ot.set_lod(*p.lod);
}

/// X@GRAD[k] row r = Out@GRAD row pos[k][r]: one gather per wanted input.
inline void SequenceConcat::eval_grad_cuda(KernelContext& c, const NoAttrs&) {
  const kernels::ConcatGradPlan p = kernels::concat_grad_plan(c);
  const LoDTensor& dout = c.in(out_grad);
  if (dout.numel() > 0) {
    std::vector<int64_t> first;
    const Tensor pos = cuda_kernels::device_rows(c, cuda_kernels::concat_rows(c, p.n, p.S, first));
    for (size_t k = 0; k < p.n; ++k)
      if (c.has_out(x_grad, k))
        cuda_kernels::copy_rows(c, dout.dtype(), dout.raw(), pos.data<int64_t>() + first[k], c.out(x_grad, k).raw(), nullptr, first[k + 1] - first[k], p.D);
  }
  for (size_t k = 0; k < p.n; ++k)
    if (c.has_out(x_grad, k)) c.out(x_grad, k).set_lod(c.in(x, k).lod());
}

/// Out[s, t] = X row (sequence s's first + t) for t < its length, PadValue's row (or its one value) after;
/// Length is written from the host.
inline void SequencePad::eval_cuda(KernelContext& c, const Attrs& a) {
  namespace ss = kernels::seq_shape;
  const ss::PadPlan p = ss::pad_plan(c, a);
  const LoDTensor& xt = c.in(x);
  const LoDTensor& pv = c.in(pad_value);
  std::vector<int64_t> len(size_t(p.seqs)), src(size_t(p.seqs * p.padded));
  for (int64_t s = 0; s < p.seqs; ++s) {
    const int64_t b = int64_t(ss::top_offset(*p.lod, size_t(s)));
    len[size_t(s)] = p.len(s);
    for (int64_t t = 0; t < p.padded; ++t) src[size_t(s * p.padded + t)] = t < len[size_t(s)] ? b + t : -1;
  }
  kernels::place_io::store(c, *p.length, len.data());
  if (p.out->numel() > 0) {
    const Tensor dsrc = cuda_kernels::device_rows(c, src);
    cuda_kernels::copy_rows(c, xt.dtype(), xt.raw(), dsrc.data<int64_t>(), p.out->raw(), nullptr, p.seqs * p.padded, p.step, pv.raw(), pv.numel());
  }
}

/// X@GRAD row (sequence s's first + t) = Out@GRAD[s, t].
inline void SequencePad::eval_grad_cuda(KernelContext& c, const Attrs&) {
  namespace ss = kernels::seq_shape;
  if (!c.has_out(x_grad)) return;
  const ss::PadGradPlan p = ss::pad_grad_plan(c);
  const LoDTensor& xt = c.in(x);
  const LoDTensor& dout = c.in(out_grad);
  if (xt.numel() > 0) {
    std::vector<int64_t> src(size_t(xt.dim(0)), -1);
    for (int64_t s = 0; s < p.seqs; ++s) {
      const int64_t b = int64_t(ss::top_offset(*p.lod, size_t(s))), len = int64_t(ss::top_offset(*p.lod, size_t(s + 1))) - b;
      for (int64_t t = 0; t < len; ++t) src[size_t(b + t)] = s * p.padded + t;
    }
    const Tensor dsrc = cuda_kernels::device_rows(c, src);
    cuda_kernels::copy_rows(c, xt.dtype(), dout.raw(), dsrc.data<int64_t>(), p.x_grad->raw(), nullptr, xt.dim(0), p.step);
  }
  p.x_grad->set_lod(xt.lod());
}

/// Out row (offset of s + t) = X[s, t] for t < Length[s] (Length comes to the host).
inline void SequenceUnpad::eval_cuda(KernelContext& c, const NoAttrs&) {
  namespace ss = kernels::seq_shape;
  const ss::UnpadPlan p = ss::unpad_plan(c);
  const LoDTensor& xt = c.in(x);
  const std::vector<size_t>& offs = (*p.lod)[0];
  if (p.out->numel() > 0) {
    std::vector<int64_t> src(offs.back());
    for (int64_t s = 0; s < p.seqs; ++s)
      for (int64_t t = 0; t < p.len[s]; ++t) src[offs[size_t(s)] + size_t(t)] = s * p.steps + t;
    const Tensor dsrc = cuda_kernels::device_rows(c, src);
    cuda_kernels::copy_rows(c, xt.dtype(), xt.raw(), dsrc.data<int64_t>(), p.out->raw(), nullptr, int64_t(src.size()), p.step);
  }
  p.out->set_lod(*p.lod);
}

/// X@GRAD[s, t] = Out@GRAD row (offset of s + t) for t < Length[s], zeros after.
inline void SequenceUnpad::eval_grad_cuda(KernelContext& c, const NoAttrs&) {
  namespace ss = kernels::seq_shape;
  if (!c.has_out(x_grad)) return;
  const ss::UnpadGradPlan p = ss::unpad_grad_plan(c);
  const LoDTensor& xt = c.in(x);
  if (xt.numel() > 0) {
    std::vector<int64_t> src(size_t(p.seqs * p.steps), -1);
    int64_t at = 0;
    for (int64_t s = 0; s < p.seqs; ++s) {
      for (int64_t t = 0; t < p.len[s]; ++t) src[size_t(s * p.steps + t)] = at + t;
      at += p.len[s];
    }
    const Tensor dsrc = cuda_kernels::device_rows(c, src);
    cuda_kernels::copy_rows(c, xt.dtype(), c.in(out_grad).raw(), dsrc.data<int64_t>(), p.x_grad->raw(), nullptr, int64_t(src.size()), p.step);
  }
  p.x_grad->set_lod(xt.lod());
}

/// Out's sequence i = rows [Offset[i], Offset[i] + Length[i]) of X's sequence i (Offset and Length come to the
/// host). Any dtype.
inline void SequenceSlice::eval_cuda(KernelContext& c, const NoAttrs&) {
  const kernels::seq_shape::SlicePlan p = kernels::seq_shape::slice_plan(c);
  const LoDTensor& xt = c.in(x);
  const std::vector<size_t>& last = p.lod->back();
  if (p.out->numel() > 0) {
    std::vector<int64_t> src(last.back());
    for (size_t i = 0; i < p.spec.length.size(); ++i)
      for (int64_t j = 0; j < p.spec.length[i]; ++j) src[last[i] + size_t(j)] = int64_t(p.offs[i]) + p.spec.offset[i] + j;
    const Tensor dsrc = cuda_kernels::device_rows(c, src);
    cuda_kernels::copy_rows(c, xt.dtype(), xt.raw(), dsrc.data<int64_t>(), p.out->raw(), nullptr, int64_t(src.size()), kernels::row_size(xt));
  }
  p.out->set_lod(*p.lod);
}

/// X@GRAD = zeros with the sliced rows taken from Out@GRAD.
inline void SequenceSlice::eval_grad_cuda(KernelContext& c, const NoAttrs&) {
  if (!c.has_out(x_grad)) return;
  const kernels::seq_shape::SliceGradPlan p = kernels::seq_shape::slice_grad_plan(c);
  const LoDTensor& xt = c.in(x);
  if (xt.numel() > 0) {
    std::vector<int64_t> src(size_t(xt.dim(0)), -1);
    int64_t at = 0;
    for (size_t i = 0; i < p.spec.length.size(); ++i) {
      for (int64_t j = 0; j < p.spec.length[i]; ++j) src[p.offs[i] + size_t(p.spec.offset[i] + j)] = at + j;
      at += p.spec.length[i];
    }
    const Tensor dsrc = cuda_kernels::device_rows(c, src);
    cuda_kernels::copy_rows(c, xt.dtype(), c.in(out_grad).raw(), dsrc.data<int64_t>(), p.x_grad->raw(), nullptr, xt.dim(0), kernels::row_size(xt));
  }
  p.x_grad->set_lod(xt.lod());
}

/// The lengths come to the host (checked, and the largest is maxlen unless given); the mask is written on the
/// device from the device's lengths.
inline void SequenceMask::eval_cuda(KernelContext& c, const Attrs& a) {
  const LoDTensor& xt = c.in(x);
  const int64_t m = kernels::mask_plan(c, a);
  LoDTensor& yt = c.out(y);
  uint64_t one = 0;
  c.dispatch(kernels::mask_types{}, a.out_dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T v = T(1);
    std::memcpy(&one, &v, sizeof v);
  });
  const cuda_kernels::Elem lt = xt.dtype() == DType::i32 ? cuda_kernels::Elem::i32 : cuda_kernels::Elem::i64;
  cuda_kernels::check(c, cuda_kernels::sequence_mask(lt, xt.raw(), int(size_of(a.out_dtype)), one, yt.raw(), xt.numel(), m, cuda_kernels::stream(c)));
  yt.set_lod(xt.lod());
}

}  // namespace oar::ops
