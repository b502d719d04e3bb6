// oar/ops/lookup_table.hpp: lookup_table, the embedding lookup: rows of the table W picked by int64 ids; its
// gradient is dense (a [V, D] tensor) or, with is_sparse, a SelectedRows holding only the looked-up rows.
#pragma once
#include "oar/ops/op.hpp"

namespace oar::ops {

/// out[i] = w[ids[i]], or zeros where ids[i] == padding_idx. W [V, D], Ids i64 [..., 1] -> Out [..., D]
/// (LoD of Ids). padding_idx: -1 none; another negative p means V + p. An id outside [0, V) is an oar::Error
/// naming it. Grad: W@GRAD[ids[i]] += Out@GRAD[i] (padding rows get nothing); dense by default, SelectedRows
/// {rows = the non-padding ids in order (repeats kept), height = V, value = their Out@GRAD rows} with is_sparse.
struct LookupTable {
  static constexpr std::string_view type = "lookup_table";
  static constexpr Slot w{"W"}, ids{"Ids"}, out{"Out"};
  static constexpr Slot w_grad{"W@GRAD"}, out_grad{"Out@GRAD"};
  static constexpr Attr<bool> is_sparse{"is_sparse"}, is_distributed{"is_distributed"};
  static constexpr Attr<int64_t> padding_idx{"padding_idx"};
  struct Attrs {
    bool is_sparse;
    int64_t padding_idx;
    explicit Attrs(const AttrReader& r) : is_sparse(r(LookupTable::is_sparse)), padding_idx(r(LookupTable::padding_idx)) {}
  };
  static OpDef def() {
    return OpDef(type, "rows of W at Ids (embedding)")
        .in(w).in(ids).out(out)
        .attr(is_sparse, false, "grad as SelectedRows")
        .attr(is_distributed, false, "Fluid compatibility; ignored")
        .attr(padding_idx, int64_t(-1), "an id whose rows are zeros and get no gradient; -1 none");
  }
  static void infer_shape(InferShapeContext& c) {
    const Shape& ws = c.shape(w);
    const Shape& is = c.shape(ids);
    c.check(ws.rank() == 2, "W must be [V, D], got {}", ws.str());
    c.check(c.dtype(ids) == DType::i64, "Ids must be i64, got {}", name(c.dtype(ids)));
    c.check(is.rank() >= 1 && dims_compatible(is[is.rank() - 1], 1), "Ids must end in a dim of 1 ([N, 1]), got {}", is.str());
    Shape os = is;
    os[os.rank() - 1] = ws[1];
    c.set_output(out, os, c.dtype(w));
    c.share_lod(ids, out);
  }
  /// lookup_table_grad(W, Ids, Out@GRAD) -> W@GRAD
  static std::vector<Operator> grad(const GradContext& g) {
    if (!g.wants_grad(w)) return {};
    return {g.grad_op({.inputs = {w, ids}, .output_grads = {out}, .input_grads = {w}})};
  }
  static void eval_cpu(KernelContext&, const Attrs&);       // kernels/cpu/lookup_table.hpp
  static void eval_cuda(KernelContext&, const Attrs&);      // kernels/cuda/nn.hpp
  static void eval_grad_cpu(KernelContext&, const Attrs&);  // kernels/cpu/lookup_table.hpp
  static void eval_grad_cuda(KernelContext&, const Attrs&);  // kernels/cuda/nn.hpp
};

}  // namespace oar::ops
