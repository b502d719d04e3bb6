// kernels/cuda/fused.hpp: eval_cuda of fused_elementwise (kernels/cuda/fused.cu): the CPU kernel's checks and
// broadcast maps (kernels/cpu/fused_elementwise.hpp), the parsed program copied into the launch's arguments.
// The gradient has no CUDA kernel yet (docs/cuda.md).
#pragma once
#include "kernels/cpu/fused_elementwise.hpp"  // inputs(), InputMap: what both devices check and how inputs are read
#include "kernels/cuda/host.hpp"
#include "oar/ops/fused_elementwise.hpp"

namespace oar::cuda_kernels {

// fused.cu reads the grammar's binary codes as ops/binary_list.hpp's functors, and its maps with Shape's rank.
static_assert(int(ops::fused::Binary::add) == int(Binary::Add) && int(ops::fused::Binary::sub) == int(Binary::Sub) &&
              int(ops::fused::Binary::mul) == int(Binary::Mul) && int(ops::fused::Binary::div) == int(Binary::Div) &&
              int(ops::fused::Binary::max) == int(Binary::Max) && int(ops::fused::Binary::min) == int(Binary::Min) &&
              int(ops::fused::Binary::pow) == int(Binary::Pow));
static_assert(Shape::kMaxRank == fused_max_rank);

}  // namespace oar::cuda_kernels

namespace oar::ops {

inline void FusedElementwise::eval_cuda(KernelContext& c, const Attrs& a) {
  namespace fk = cpu_kernels::fused;
  namespace ck = cuda_kernels;
  const LoDTensor** xs;
  fk::InputMap* maps;
  Shape os;
  const size_t n = fk::inputs(c, x, xs, maps, os);
  const fused::Program& p = a.program;
  c.check(p.nodes.size() <= size_t(ck::fused_max_nodes) && n <= size_t(ck::fused_max_inputs) && p.max_depth <= ck::fused_max_depth,
          "the expression ({} nodes, {} inputs, stack depth {}) is beyond the CUDA kernel's {} nodes, {} inputs and depth {}: split it",
          p.nodes.size(), n, p.max_depth, ck::fused_max_nodes, ck::fused_max_inputs, ck::fused_max_depth);
  ck::FusedNode nodes[ck::fused_max_nodes];
  for (size_t k = 0; k < p.nodes.size(); ++k) {
    const fused::Node& nd = p.nodes[k];
    nodes[k] = {uint8_t(nd.kind), nd.code, uint8_t(nd.depth), int8_t(nd.input), nd.p0, nd.p1, nd.value};
  }
  ck::FusedInput ins[ck::fused_max_inputs];
  for (size_t i = 0; i < n; ++i) {
    const fk::InputMap& m = maps[i];
    ins[i].data = xs[i]->raw();
    ins[i].mode = int(m.mode);
    ins[i].rank = m.rank;
    for (int d = 0; d < m.rank; ++d) ins[i].dims[d] = m.dims[d], ins[i].strides[d] = m.strides[d];
  }
  LoDTensor& o = c.out(out);
  o.resize(os, xs[0]->dtype());
  ck::check(c, ck::fused_forward(ck::elem(c, o.dtype()), nodes, int(p.nodes.size()), ins, int(n), o.raw(), os.numel(), ck::stream(c)));
  if (&o != xs[0]) {  // Out shares X[0]'s LoD when it has X[0]'s shape, as on the CPU
    if (xs[0]->shape() == os) o.set_lod(xs[0]->lod());
    else o.clear_lod();
  }
}

}  // namespace oar::ops
