// oar/ops/attention.hpp: scaled dot-product attention as one op, over dense batches and over ragged ones (LoD
// sequences, no padding). Kernels in kernels/cpu/attention.hpp: tiles of keys with an online softmax, so the
// T x T score matrix is never held whole (FlashAttention's scheme); the backward pass recomputes the scores from
// the saved log-sum-exp of each query row.
#pragma once
#include "oar/ops/assign.hpp"
#include "oar/ops/op.hpp"

namespace oar::ops {

/// Out = softmax(Q K^T * scale + mask) V, per batch entry and head.
/// Dense: Q [B, H, Tq, d], K [B, H, Tk, d], V [B, H, Tk, dv] -> Out [B, H, Tq, dv], LSE [B, H, Tq].
/// Ragged: Q [Nq, H, d], K [Nk, H, d], V [Nk, H, dv] with one LoD level each (the same number of sequences):
///   query sequence s attends only to key sequence s -> Out [Nq, H, dv] with Q's LoD, LSE [Nq, H].
/// Mask (dense only, dispensable): [Tq, Tk] or [B|1, H|1, Tq, Tk]; float (Q's dtype): added to the scores;
///   bool: false drops the key. causal: query i sees key j only when j <= i + Tk - Tq (the last query row sees
///   every key: the right alignment for a query that continues cached keys). scale 0 means 1 / sqrt(d).
/// Dropout on the attention weights (not is_test, dropout_prob > 0): weight (i, j) of problem p (b * H + h,
///   or for ragged input the sequences' problems in order, each Tq_s x Tk_s) is kept when draw n of the
///   counter stream keyed by Seed is >= dropout_prob, n counting the score elements of every problem in
///   order, and scaled by 1 / (1 - dropout_prob); Seed (intermediate) keeps the seed for the backward pass.
/// A query row whose keys are all masked gives zeros (LSE -inf) and no gradient.
struct ScaledDotProductAttention {
  static constexpr std::string_view type = "scaled_dot_product_attention";
  static constexpr Slot q{"Q"}, k{"K"}, v{"V"}, mask{"Mask"}, out{"Out"}, lse{"LSE"}, seed_out{"Seed"};
  static constexpr Slot q_grad{"Q@GRAD"}, k_grad{"K@GRAD"}, v_grad{"V@GRAD"}, out_grad{"Out@GRAD"};
  static constexpr Attr<bool> causal{"causal"}, is_test = common::is_test, fix_seed{"fix_seed"};
  static constexpr Attr<float> scale{"scale"}, dropout_prob{"dropout_prob"};
  static constexpr Attr<int32_t> seed{"seed"};

  struct Attrs {
    bool causal, is_test, fix_seed;
    float scale, dropout_prob;
    int32_t seed;
    explicit Attrs(const AttrReader& r)
        : causal(r(ScaledDotProductAttention::causal)), is_test(r(ScaledDotProductAttention::is_test)), fix_seed(r(ScaledDotProductAttention::fix_seed)),
          scale(r(ScaledDotProductAttention::scale)), dropout_prob(r(ScaledDotProductAttention::dropout_prob)), seed(r(ScaledDotProductAttention::seed)) {}
  };

  static OpDef def() {
    return OpDef(type, "Out = softmax(Q K^T * scale + Mask) V per batch entry and head, dense or over LoD sequences")
        .in(q).in(k).in(v).in(mask, dispensable)
        .out(out).out(lse, intermediate).out(seed_out, intermediate)
        .attr(causal, false, "query i sees key j only when j <= i + Tk - Tq")
        .attr(scale, 0.f, "multiplies the scores; 0: 1 / sqrt(d)").check<float>([](float s) { return s >= 0; }, "must be >= 0")
        .attr(dropout_prob, 0.f, "dropout on the attention weights").check<float>([](float p) { return p >= 0 && p < 1; }, "must be in [0, 1)")
        .attr(is_test, false).attr(fix_seed, false).attr(seed, 0)
        .replayable_when([](const Operator& op) {
          return op.attr_or(fix_seed, false) || op.attr_or(is_test, false) || op.attr_or(dropout_prob, 0.f) == 0.f;
        });
  }

  static void infer_shape(InferShapeContext& c) {
    const Shape &qs = c.shape(q), &ks = c.shape(k), &vs = c.shape(v);
    const DType t = c.dtype(q);
    c.check(t == DType::f32 || t == DType::f64, "Q must be float32 or float64, got {}", name(t));
    c.check(c.dtype(k) == t && c.dtype(v) == t, "Q, K and V must share a dtype, got {}, {}, {}", name(t), name(c.dtype(k)), name(c.dtype(v)));
    c.check(qs.rank() == 4 || qs.rank() == 3, "Q must be [B, H, Tq, d] (dense) or [Nq, H, d] (LoD sequences), got {}", qs.str());
    c.check(ks.rank() == qs.rank() && vs.rank() == qs.rank(), "Q, K and V must have one rank, got {}, {}, {}", qs.str(), ks.str(), vs.str());
    const int r = qs.rank();
    c.check(dims_compatible(qs[r - 1], ks[r - 1]), "Q and K must have one head size d, got Q {} and K {}", qs.str(), ks.str());
    c.check(dims_compatible(ks[r - 2], vs[r - 2]) || r == 4, "K and V must have one head count, got K {} and V {}", ks.str(), vs.str());
    c.check(dims_compatible(ks[0], vs[0]), "K and V must have one row count (keys), got K {} and V {}", ks.str(), vs.str());
    Shape o = qs, l;
    o[r - 1] = vs[r - 1];
    if (r == 4) {
      c.check(dims_compatible(qs[0], ks[0]) && dims_compatible(qs[1], ks[1]) && dims_compatible(ks[1], vs[1]) && dims_compatible(ks[2], vs[2]),
              "dense Q [B, H, Tq, d], K [B, H, Tk, d] and V [B, H, Tk, dv] must agree in B, H and Tk, got {}, {}, {}", qs.str(), ks.str(), vs.str());
      l = Shape{qs[0], qs[1], qs[2]};
      if (c.has_input(mask)) {
        const Shape& m = c.shape(mask);
        const DType mt = c.dtype(mask);
        c.check(mt == t || mt == DType::boolean, "Mask must be Q's dtype {} (added to the scores) or bool (false drops a key), got {}", name(t), name(mt));
        c.check(m.rank() == 2 || m.rank() == 4, "Mask must be [Tq, Tk] or [B|1, H|1, Tq, Tk], got {}", m.str());
        const int mr = m.rank();
        c.check(dims_compatible(m[mr - 2], qs[2]) && dims_compatible(m[mr - 1], ks[2]), "Mask {} must end in [Tq, Tk] = [{}, {}]", m.str(), qs[2], ks[2]);
        if (mr == 4)
          c.check((m[0] == 1 || dims_compatible(m[0], qs[0])) && (m[1] == 1 || dims_compatible(m[1], qs[1])),
                  "Mask {} must be [B or 1, H or 1, Tq, Tk] for Q {}", m.str(), qs.str());
      }
    } else {
      c.check(dims_compatible(qs[1], ks[1]) && dims_compatible(ks[1], vs[1]), "Q [Nq, H, d], K [Nk, H, d] and V [Nk, H, dv] must agree in H, got {}, {}, {}",
              qs.str(), ks.str(), vs.str());
      c.check(!c.has_input(mask), "Mask is for dense input: LoD sequences attend within themselves (use causal for order)");
      l = Shape{qs[0], qs[1]};
    }
    c.set_output(out, o, t);
    c.share_lod(q, out);
    c.set_output(lse, l, t);
    c.set_output(seed_out, Shape{1}, DType::i64);
  }

  /// scaled_dot_product_attention_grad(Q, K, V, Mask?, Out, LSE, Seed, Out@GRAD) -> Q@GRAD, K@GRAD, V@GRAD.
  static std::vector<Operator> grad(const GradContext& g) {
    Operator op = g.grad_op();
    op.set_input(q, g.input(q)).set_input(k, g.input(k)).set_input(v, g.input(v));
    if (!g.input(mask).empty()) op.set_input(mask, g.input(mask));
    op.set_input(out, g.output(out)).set_input(lse, g.output(lse)).set_input(seed_out, g.output(seed_out)).set_input(out_grad, g.output_grad(out));
    op.set_output(q_grad, g.input_grad(q)).set_output(k_grad, g.input_grad(k)).set_output(v_grad, g.input_grad(v));
    return {op};
  }

  static void eval_cpu(KernelContext&, const Attrs&);       // kernels/cpu/attention.hpp
  static void eval_grad_cpu(KernelContext&, const Attrs&);  // kernels/cpu/attention.hpp
  static void eval_cuda(KernelContext&, const Attrs&);       // kernels/cuda/attention.hpp
  static void eval_grad_cuda(KernelContext&, const Attrs&);  // kernels/cuda/attention.hpp
};

/// A decoder's key-value cache: the rows of X appended to the rows this op kept from earlier runs of the
/// same prepared program, sequence by sequence, so that each run feeds only the new tokens.
/// X: [N, ...] with one LoD level (sequence s of X continues cached sequence s; X may hold empty sequences),
///   or dense [B, ..., T, d] (appended along T, the second-to-last dim).
/// Out: the cached rows then X's, per sequence (LoD [N + cached, ...]) or dense [B, ..., cached + T, d].
/// Length [S] (int64): each sequence's cached row count before this run (dense: [B], all equal); what the
///   position ops take as their Offset.
/// Cache (state) and CacheOut name one variable, the op's memory between runs.
/// use_cache false (training, any evaluator not decoding): Out is X, Length zeros, the cache untouched. An
/// Evaluator built with EvaluatorOptions::kv_cache sets it (api/evaluator.hpp) and clears the cache on
/// reset_cache(). count_only: the cache keeps each sequence's row count, not its rows (Out is X): the
/// positions of tokens that are not attended to again.
struct KvCache {
  static constexpr std::string_view type = "kv_cache";
  static constexpr bool any_place = true;  // moves rows with copies queued on the place; the LoD is the host's
  static constexpr Slot x{"X"}, cache{"Cache"}, out{"Out"}, cache_out{"CacheOut"}, length{"Length"}, x_grad{"X@GRAD"}, out_grad{"Out@GRAD"};
  static constexpr Attr<bool> use_cache{"use_cache"}, count_only{"count_only"};
  struct Attrs {
    bool use_cache, count_only;
    explicit Attrs(const AttrReader& r) : use_cache(r(KvCache::use_cache)), count_only(r(KvCache::count_only)) {}
  };
  static OpDef def() {
    return OpDef(type, "Out = the rows cached by earlier runs then X's, per sequence; the cache keeps Out")
        .in(x).in(cache, state, "the cache as the last run left it")
        .out(out).out(cache_out, none, "the cache to keep (Cache's variable)").out(length, none, "each sequence's cached rows before this run")
        .attr(use_cache, false, "append to the cache (an Evaluator decoding with EvaluatorOptions::kv_cache)")
        .attr(count_only, false, "cache row counts only; Out is X");
  }
  static void infer_shape(InferShapeContext& c) {
    const Shape& s = c.shape(x);
    const bool dense = c.lod_level(x) == 0;
    c.check(!dense || s.rank() >= 3 || (c.attr(count_only) && s.rank() >= 2), "X must be [N, ...] with a LoD or dense [B, ..., T, d], got {} (lod_level {})",
            s.str(), c.lod_level(x));
    c.check(dense || c.lod_level(x) == 1, "X must have one LoD level, got {}", c.lod_level(x));
    Shape o = s;
    if (!c.attr(count_only)) o[dense ? s.rank() - 2 : 0] = -1;  // grows with the cache
    c.set_output(out, o, c.dtype(x));
    c.share_lod(x, out);
    c.set_output(cache_out, o, c.dtype(x));
    c.set_output(length, Shape{dense ? s[0] : -1}, DType::i64);
  }
  /// Without the cache Out is X: X@GRAD = Out@GRAD (training never appends).
  static std::vector<Operator> grad(const GradContext& g) {
    auto dx = g.input_grad(x);
    if (!g.wants_grad(x)) return {};
    Operator op = g.new_op(Assign::type);
    op.set_input(Assign::x, g.output_grad(out)).set_output(Assign::out, dx);
    return {op};
  }
  static void eval_cpu(KernelContext&, const Attrs&);  // kernels/cpu/kv_cache.hpp
};

}  // namespace oar::ops
