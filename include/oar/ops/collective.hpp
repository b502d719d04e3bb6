// oar/ops/collective.hpp: the collective ops of data-parallel training, with Fluid's names and attributes:
// c_comm_init, c_broadcast, c_allreduce_sum, c_reduce_sum, c_sync_comm_stream. Their kernels call the Communicator of their
// ring_id (device/communicator.hpp); the pass that inserts them is optim/collective.hpp.
#pragma once
#include "oar/ops/op.hpp"

namespace oar::ops {

/// Attributes every collective op has.
struct CollectiveOp {
  /// Which communicator (device/communicator.hpp): oar::dist::Context registers its world as ring 0.
  static constexpr Attr<int32_t> ring_id{"ring_id"};
  /// true: the collective runs before the op returns; false: it is queued on the communicator's thread and
  /// the next c_sync_comm_stream waits for it (Fluid's flag of the same name picks a CUDA stream).
  static constexpr Attr<bool> use_calc_stream{"use_calc_stream"};
};

/// Checks that ring `ring_id` has a communicator of `nranks` ranks. No inputs or outputs. Unlike Fluid's, it
/// has no `rank` attribute and no id input: the program is the same on every rank, and the communicator,
/// made by oar::dist::Context, already knows its rank.
struct CCommInit : CollectiveOp {
  static constexpr std::string_view type = "c_comm_init";
  static constexpr bool any_place = true;  // reads sizes only: the same kernel checks NCCL's communicator
  static constexpr Attr<int32_t> nranks{"nranks"};
  struct Attrs {
    int32_t ring_id, nranks;
    explicit Attrs(const AttrReader& r) : ring_id(r(CollectiveOp::ring_id)), nranks(r(CCommInit::nranks)) {}
  };
  static OpDef def() {
    return OpDef(type, "checks that ring ring_id has a communicator of nranks ranks")
        .attr(ring_id, 0).attr(nranks, 1).check<int32_t>([](int32_t n) { return n >= 1; }, "must be >= 1");
  }
  static void infer_shape(InferShapeContext&) {}
  static void eval_cpu(KernelContext&, const Attrs&);  // kernels/cpu/collective.hpp
};

/// Out = X of rank `root`, on every rank (in place: Out is X). X [any] -> Out [same]; float or integer.
struct CBroadcast : CollectiveOp {
  static constexpr std::string_view type = "c_broadcast";
  static constexpr Slot x{"X"}, out{"Out"};
  static constexpr Attr<int32_t> root{"root"};
  struct Attrs {
    int32_t ring_id, root;
    std::string what;  ///< the op in error messages, made once: under ZeRO it runs for every parameter every step
    explicit Attrs(const AttrReader& r)
        : ring_id(r(CollectiveOp::ring_id)), root(r(CBroadcast::root)),
          what(fmt::format("c_broadcast of '{}' from rank {}", r.op().input(CBroadcast::x).at(0), root)) {}
  };
  static OpDef def() {
    return OpDef(type, "Out = X of rank root, on every rank")
        .replayable_when(OpDef::never_replayed)
        .in(x).out(out)
        .attr(ring_id, 0).attr(root, 0).check<int32_t>([](int32_t n) { return n >= 0; }, "must be >= 0").attr(use_calc_stream, true);
  }
  static void infer_shape(InferShapeContext& c) {
    c.set_output(out, c.shape(x), c.dtype(x));
    c.share_lod(x, out);
  }
  static void eval_cpu(KernelContext&, const Attrs&);   // kernels/cpu/collective.hpp
  static void eval_cuda(KernelContext&, const Attrs&);  // kernels/cuda/collective.hpp (NCCL)
};

/// Out[i] = the sum over ranks of X[i], for every i (in place: Out is X). The X of one op travel as one message
/// (a bucket; Fluid reduces one variable per op and fuses them with coalesce_tensor). Dense X: f32 or f64,
/// the same bits on every rank. X holding selected rows (an is_sparse embedding's gradient): the rows of every
/// rank, joined in rank order (what summing them means; the update adds up repeated rows), never densified.
struct CAllreduceSum : CollectiveOp {
  static constexpr std::string_view type = "c_allreduce_sum";
  static constexpr Slot x{"X"}, out{"Out"};
  struct Attrs {
    int32_t ring_id;
    bool use_calc_stream;
    std::vector<std::string> names;  ///< X, for error messages
    std::string what;                ///< the op in error messages, made once
    explicit Attrs(const AttrReader& r)
        : ring_id(r(CollectiveOp::ring_id)), use_calc_stream(r(CollectiveOp::use_calc_stream)), names(r.op().input(CAllreduceSum::x)),
          what(names.size() == 1 ? fmt::format("c_allreduce_sum of '{}'", names.empty() ? std::string() : names[0])
                                 : fmt::format("c_allreduce_sum of {} variables from '{}' to '{}'", names.size(), names.front(), names.back())) {}
  };
  static OpDef def() {
    return OpDef(type, "Out = the sum of X over the ranks, in place").in(x, duplicable).out(out, duplicable).attr(ring_id, 0).attr(use_calc_stream, false)
        .replayable_when(OpDef::never_replayed);
  }
  static void infer_shape(InferShapeContext& c) {
    c.check(c.num_inputs(x) == c.num_outputs(out), "X has {} variables but Out has {}", c.num_inputs(x), c.num_outputs(out));
    for (size_t i = 0; i < c.num_inputs(x); ++i)
      c.check(c.op().input(x)[i] == c.op().output(out)[i], "Out[{}] ('{}') must be X[{}] ('{}'): the sum is taken in place", i, c.op().output(out)[i], i,
              c.op().input(x)[i]);
  }
  static void eval_cpu(KernelContext&, const Attrs&);   // kernels/cpu/collective.hpp
  static void eval_cuda(KernelContext&, const Attrs&);  // kernels/cuda/collective.hpp (NCCL)
};

/// Out[i] = the sum over ranks of X[i] on rank `root_id`; the other ranks' X are left as they were (in place:
/// Out is X). ZeRO's gradients: only the rank that updates a parameter needs their sum. As c_allreduce_sum, the
/// X of one op travel as one message; dense f32 or f64 only.
struct CReduceSum : CollectiveOp {
  static constexpr std::string_view type = "c_reduce_sum";
  static constexpr Slot x{"X"}, out{"Out"};
  static constexpr Attr<int32_t> root_id{"root_id"};
  struct Attrs {
    int32_t ring_id, root_id;
    bool use_calc_stream;
    std::vector<std::string> names;  ///< X, for error messages
    std::string what;                ///< the op in error messages, made once
    explicit Attrs(const AttrReader& r)
        : ring_id(r(CollectiveOp::ring_id)), root_id(r(CReduceSum::root_id)), use_calc_stream(r(CollectiveOp::use_calc_stream)),
          names(r.op().input(CReduceSum::x)),
          what(names.size() == 1 ? fmt::format("c_reduce_sum of '{}' to rank {}", names.empty() ? std::string() : names[0], root_id)
                                 : fmt::format("c_reduce_sum of {} variables from '{}' to '{}' to rank {}", names.size(), names.front(), names.back(),
                                               root_id)) {}
  };
  static OpDef def() {
    return OpDef(type, "Out = the sum of X over the ranks on rank root_id, in place")
        .replayable_when(OpDef::never_replayed)
        .in(x, duplicable).out(out, duplicable)
        .attr(ring_id, 0).attr(root_id, 0).check<int32_t>([](int32_t n) { return n >= 0; }, "must be >= 0").attr(use_calc_stream, false);
  }
  static void infer_shape(InferShapeContext& c) { CAllreduceSum::infer_shape(c); }
  static void eval_cpu(KernelContext&, const Attrs&);   // kernels/cpu/collective.hpp
  static void eval_cuda(KernelContext&, const Attrs&);  // kernels/cuda/collective.hpp (NCCL)
};

/// Waits until every collective queued on ring `ring_id` has finished. X and Out name the variables those
/// collectives write (Out is X), so nothing reads them before this op and no buffer plan reuses them earlier.
struct CSyncCommStream : CollectiveOp {
  static constexpr std::string_view type = "c_sync_comm_stream";
  static constexpr bool any_place = true;  // waits on the host: on a GPU, NCCL's jobs end when the device has finished them
  static constexpr Slot x{"X"}, out{"Out"};
  struct Attrs {
    int32_t ring_id;
    explicit Attrs(const AttrReader& r) : ring_id(r(CollectiveOp::ring_id)) {}
  };
  static OpDef def() {
    return OpDef(type, "waits for the collectives queued on ring ring_id").in(x, duplicable | dispensable).out(out, duplicable | dispensable).attr(ring_id, 0)
        .replayable_when(OpDef::never_replayed);
  }
  static void infer_shape(InferShapeContext& c) {
    c.check(c.num_inputs(x) == c.num_outputs(out), "X has {} variables but Out has {}", c.num_inputs(x), c.num_outputs(out));
  }
  static void eval_cpu(KernelContext&, const Attrs&);  // kernels/cpu/collective.hpp
};

}  // namespace oar::ops
