// kernels/cuda/fused.hpp: eval_cuda and eval_grad_cuda of fused_elementwise (kernels/cuda/fused.cu): the checks and
// broadcast maps both places share (kernels/common/fused_elementwise.hpp), the parsed program copied into the
// launch's arguments.
#pragma once
#include "kernels/common/fused_elementwise.hpp"  // inputs(), InputMap: what both devices check and how inputs are read
#include "kernels/cuda/fused_launch.hpp"
#include "kernels/cuda/host.hpp"
#include "kernels/cuda/reduce.hpp"  // groups_of: a broadcast input's gradient summed
#include "kernels/cuda/reduce_launch.hpp"
#include "oar/ops/fused_elementwise.hpp"

namespace oar::cuda_kernels {

// fused.cu reads the grammar's binary codes as ops/binary_list.hpp's functors, and its maps with Shape's rank.
static_assert(int(ops::fused::Binary::add) == int(Binary::Add) && int(ops::fused::Binary::sub) == int(Binary::Sub) &&
              int(ops::fused::Binary::mul) == int(Binary::Mul) && int(ops::fused::Binary::div) == int(Binary::Div) &&
              int(ops::fused::Binary::max) == int(Binary::Max) && int(ops::fused::Binary::min) == int(Binary::Min) &&
              int(ops::fused::Binary::pow) == int(Binary::Pow));
static_assert(Shape::kMaxRank == fused_max_rank);

/// The parsed program and the inputs' maps as the launches take them; an oar::Error when the expression is
/// beyond what one launch's arguments hold.
inline void fused_args(const KernelContext& c, const ops::fused::Program& p, const LoDTensor* const* xs, const kernels::fused::InputMap* maps, size_t n,
                       FusedNode* nodes, FusedInput* ins) {
  c.check(p.nodes.size() <= size_t(fused_max_nodes) && n <= size_t(fused_max_inputs) && p.max_depth <= fused_max_depth,
          "the expression ({} nodes, {} inputs, stack depth {}) is beyond the CUDA kernel's {} nodes, {} inputs and depth {}: split it",
          p.nodes.size(), n, p.max_depth, fused_max_nodes, fused_max_inputs, fused_max_depth);
  for (size_t k = 0; k < p.nodes.size(); ++k) {
    const ops::fused::Node& nd = p.nodes[k];
    nodes[k] = {uint8_t(nd.kind), nd.code, uint8_t(nd.depth), int8_t(nd.input), nd.p0, nd.p1, nd.value};
  }
  for (size_t i = 0; i < n; ++i) {
    ins[i] = {};
    ins[i].data = xs[i]->raw();
    ins[i].mode = int(maps[i].mode);
    ins[i].rank = maps[i].rank;
    for (int d = 0; d < maps[i].rank; ++d) ins[i].dims[d] = maps[i].dims[d], ins[i].strides[d] = maps[i].strides[d];
  }
}

}  // namespace oar::cuda_kernels

namespace oar::ops {

inline void FusedElementwise::eval_cuda(KernelContext& c, const Attrs& a) {
  namespace fk = kernels::fused;
  namespace ck = cuda_kernels;
  const LoDTensor** xs;
  fk::InputMap* maps;
  Shape os;
  const size_t n = fk::inputs(c, x, xs, maps, os);
  ck::FusedNode nodes[ck::fused_max_nodes];
  ck::FusedInput ins[ck::fused_max_inputs];
  ck::fused_args(c, a.program, xs, maps, n, nodes, ins);
  LoDTensor& o = c.out(out);
  o.resize(os, xs[0]->dtype());
  ck::check(c, ck::fused_forward(ck::elem(c, o.dtype()), nodes, int(a.program.nodes.size()), ins, int(n), o.raw(), os.numel(), ck::stream(c)));
  if (&o != xs[0]) {  // Out shares X[0]'s LoD when it has X[0]'s shape, as on the CPU
    if (xs[0]->shape() == os) o.set_lod(xs[0]->lod());
    else o.clear_lod();
  }
}

// Each wanted input gradient gets the per-element adjoints over the output's shape: written in place when the
// input has that shape, else into scratch summed over the input's broadcast dims by the reduce kernel.
inline void FusedElementwise::eval_grad_cuda(KernelContext& c, const Attrs& a) {
  namespace fk = kernels::fused;
  namespace ck = cuda_kernels;
  fk::GradPlan gp;
  const size_t nt = fk::grad_plan(c, gp);
  if (nt == 0) return;
  const size_t n = c.num_in(x);
  const int* target = gp.target;
  const LoDTensor** xs = gp.xs;
  const Shape& os = gp.os;
  const LoDTensor& dout = *gp.dout;
  ck::FusedNode nodes[ck::fused_max_nodes];
  ck::FusedInput ins[ck::fused_max_inputs];
  ck::fused_args(c, a.program, xs, gp.maps, n, nodes, ins);
  const ck::Elem t = ck::elem(c, xs[0]->dtype());
  int8_t tg[ck::fused_max_inputs];
  LoDTensor* dx[ck::fused_max_inputs] = {};
  const Shape* shape[ck::fused_max_inputs] = {};
  for (size_t i = 0; i < n; ++i) {
    tg[i] = int8_t(target[i]);
    if (target[i] < 0 || dx[target[i]]) continue;
    dx[target[i]] = &c.out(x_grad, i);
    shape[target[i]] = &xs[i]->shape();
    dx[target[i]]->resize(xs[i]->shape(), xs[i]->dtype());
    dx[target[i]]->set_lod(xs[i]->lod());
  }
  // Output-shaped arrays for the gradients of broadcast inputs, one scratch block.
  size_t scratch_bytes = 0;
  for (size_t k = 0; k < nt; ++k)
    if (*shape[k] != os) scratch_bytes += size_t(os.numel()) * size_of(xs[0]->dtype());
  Tensor scratch = ck::workspace(c, scratch_bytes);
  void* grads[ck::fused_max_inputs];
  char* next = static_cast<char*>(scratch.raw());
  for (size_t k = 0; k < nt; ++k) {
    if (*shape[k] == os) {
      grads[k] = dx[k]->raw();
    } else {
      grads[k] = next;
      next += size_t(os.numel()) * size_of(xs[0]->dtype());
    }
  }
  ck::check(c, ck::fused_backward(t, nodes, int(a.program.nodes.size()), ins, int(n), tg, grads, int(nt), dout.raw(), os.numel(), ck::stream(c)));
  for (size_t k = 0; k < nt; ++k) {
    if (*shape[k] == os) continue;
    // Reduced: the output's leading dims the input lacks, and those where it has 1 and the output more.
    std::vector<int> axes;
    const int off = os.rank() - shape[k]->rank();
    for (int d = 0; d < os.rank(); ++d)
      if (d < off || ((*shape[k])[d - off] == 1 && os[d] != 1)) axes.push_back(d);
    ck::check(c, ck::reduce(ck::Reduce::sum, t, ck::groups_of(kernels::make_reduce_plan(os, axes)), grads[k], dx[k]->raw(), ck::stream(c)));
  }
}

}  // namespace oar::ops
