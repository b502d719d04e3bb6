// kernels/common/sequence_softmax.hpp: the sequences and the result that sequence_softmax's kernels and their
// gradients start from on every place.
#pragma once
#include <cstdint>
#include <span>

#include "kernels/common/sequence_pool.hpp"
#include "oar/ops/sequence_softmax.hpp"
#include "oar/device/kernel_context.hpp"

namespace oar::kernels {

/// What sequence_softmax's kernels on every place start from: the S sequences of the column (X's last LoD
/// level, or Out's for the gradient), and the result (Out, or X@GRAD) resized to the column's shape.
struct SeqSoftmaxPlan {
  std::span<const size_t> seq;
  int64_t S = 0;
  LoDTensor* out = nullptr;
};
inline SeqSoftmaxPlan seq_softmax_plan(const KernelContext& c) {
  using Op = ops::SequenceSoftmax;
  const LoDTensor& xt = c.in(Op::x);
  SeqSoftmaxPlan p;
  p.seq = seq_last_level(c, Op::x, xt);
  c.check(xt.numel() == xt.dim(0), "X must be [N, 1] or [N] (one score per row), got {}", xt.shape());
  p.S = int64_t(p.seq.size()) - 1;
  p.out = &c.out(Op::out);
  c.dispatch(type_list<float, double>{}, xt.dtype(), [](auto) {});  // the dtypes both places take
  p.out->resize(xt.shape(), xt.dtype());
  return p;
}
inline SeqSoftmaxPlan seq_softmax_grad_plan(const KernelContext& c) {
  using Op = ops::SequenceSoftmax;
  const LoDTensor& yt = c.in(Op::out);
  const LoDTensor& dy = c.in(Op::out_grad);
  SeqSoftmaxPlan p;
  p.seq = seq_last_level(c, Op::out, yt);
  c.check(dy.numel() == yt.numel(), "Out@GRAD {} does not match Out {}", dy.shape(), yt.shape());
  p.S = int64_t(p.seq.size()) - 1;
  p.out = &c.out(Op::x_grad);
  c.dispatch(type_list<float, double>{}, yt.dtype(), [](auto) {});
  p.out->resize(yt.shape(), yt.dtype());
  return p;
}

}  // namespace oar::kernels
