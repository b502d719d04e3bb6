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
  static OpDef def() {
    return OpDef("lookup_table", "rows of W at Ids (embedding)")
        .in("W").in("Ids").out("Out")
        .attr("is_sparse", false, "grad as SelectedRows")
        .attr("is_distributed", false, "Fluid compatibility; ignored")
        .attr("padding_idx", int64_t(-1), "an id whose rows are zeros and get no gradient; -1 none");
  }
  static void infer_shape(InferShapeContext& c) {
    const Shape& w = c.shape("W");
    const Shape& ids = c.shape("Ids");
    c.check(w.rank() == 2, "W must be [V, D], got {}", w.str());
    c.check(c.dtype("Ids") == DType::i64, "Ids must be i64, got {}", name(c.dtype("Ids")));
    c.check(ids.rank() >= 1 && dims_compatible(ids[ids.rank() - 1], 1), "Ids must end in a dim of 1 ([N, 1]), got {}", ids.str());
    Shape out = ids;
    out[out.rank() - 1] = w[1];
    c.set_output("Out", out, c.dtype("W"));
    c.share_lod("Ids", "Out");
  }
  /// lookup_table_grad(W, Ids, Out@GRAD) -> W@GRAD
  static std::vector<Operator> grad(const GradContext& g) {
    if (g.input_grad("W")[0] == kEmptyVarName) return {};
    Operator op("lookup_table_grad");
    op.set_input("W", g.input("W")).set_input("Ids", g.input("Ids")).set_input("Out@GRAD", g.output_grad("Out"));
    op.set_output("W@GRAD", g.input_grad("W"));
    for (auto& [k, v] : g.fwd().attrs()) op.set_attr(k, v);
    op.set_origin(g.fwd().origin());
    return {op};
  }
  static void eval_cpu(KernelContext&);       // kernels/cpu/lookup_table.hpp
  static void eval_grad_cpu(KernelContext&);  // kernels/cpu/lookup_table.hpp
};

}  // namespace oar::ops
