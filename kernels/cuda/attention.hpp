// kernels/cuda/attention.hpp: eval_cuda of scaled_dot_product_attention, add_position_encoding and
// rotary_position_embedding (and their gradients). The problems are laid out by the CPU kernel's plan (on
// device pointers: only offsets are taken) and uploaded; the device kernels are kernels/cuda/attention.cu.
#pragma once
#include <vector>

#include "kernels/common/attention.hpp"
#include "kernels/common/place_io.hpp"
#include "kernels/common/position.hpp"
#include "kernels/cuda/attention_launch.hpp"
#include "kernels/cuda/host.hpp"

namespace oar::cuda_kernels::attention_gpu {

/// The plan's problems as device descriptors (offsets from Q's, K's, V's, Out's and LSE's first elements), and
/// what they share.
template <class T>
struct Launch {
  Tensor problems;  // AttnProblem[count] on the device
  int64_t count = 0, max_tq = 0;
  AttnShared shared;
};

template <class T>
Launch<T> upload_plan(const KernelContext& c, const kernels::attention::Plan<T>& pl, const T* q0, const T* k0, const T* v0, const T* o0, const T* l0,
                      const void* mask0, bool mask_bool) {
  Launch<T> ln;
  std::vector<AttnProblem> ps;
  ps.reserve(pl.problems.size());
  for (const auto& p : pl.problems) {
    AttnProblem d{};
    d.q = p.q - q0, d.k = p.k - k0, d.v = p.v - v0, d.o = p.o - o0, d.lse = p.lse - l0;
    d.mask = p.mask_add ? p.mask_add - static_cast<const T*>(mask0) : p.mask_keep ? p.mask_keep - static_cast<const bool*>(mask0) : -1;
    d.tq = p.tq, d.tk = p.tk, d.qs = p.qs, d.ks = p.ks, d.vs = p.vs, d.os = p.os, d.lse_stride = p.lse_stride;
    d.draw0 = p.draw0;
    ln.max_tq = std::max(ln.max_tq, p.tq);
    ps.push_back(d);
  }
  c.check(ln.max_tq <= 65535, "a sequence of {} queries is longer than the CUDA kernel takes (65535)", ln.max_tq);
  ln.count = int64_t(ps.size());
  ln.problems = Tensor(Shape{int64_t(ps.size() * sizeof(AttnProblem))}, DType::u8, c.place());
  kernels::place_io::store(c, ln.problems, ps.data());
  ln.shared.d = pl.problems.empty() ? 0 : pl.problems[0].d;
  ln.shared.dv = pl.problems.empty() ? 0 : pl.problems[0].dv;
  ln.shared.scale = pl.shared.scale;
  ln.shared.dropout = pl.shared.dropout;
  ln.shared.rng_key = pl.shared.rng.key;
  ln.shared.causal = pl.shared.causal;
  ln.shared.mask_bool = mask_bool;
  return ln;
}

}  // namespace oar::cuda_kernels::attention_gpu

namespace oar::ops {

inline void ScaledDotProductAttention::eval_cuda(KernelContext& c, const Attrs& a) {
  namespace at = kernels::attention;
  namespace ag = cuda_kernels::attention_gpu;
  const LoDTensor& qt = c.in(q);
  const uint64_t s = at::forward_seed(c, a);
  LoDTensor& so = c.out(seed_out);
  so.resize(Shape{1}, DType::i64);
  const int64_t sv = int64_t(s);
  kernels::place_io::store(c, so, &sv);
  cuda_kernels::float_types(c, qt.dtype(), [&](auto tag) {
    using T = decltype(tag);
    at::Plan<T> pl = at::forward_plan<T>(c, a, s);
    LoDTensor& ot = c.out(out);
    LoDTensor& lt = c.out(lse);
    const LoDTensor* mt = c.in_if(mask);
    const void* m0 = mt ? mt->raw() : nullptr;
    auto ln = ag::upload_plan<T>(c, pl, qt.data<T>(), c.in(k).data<T>(), c.in(v).data<T>(), ot.data<T>(), lt.data<T>(), m0, mt && mt->dtype() == DType::boolean);
    cuda_kernels::check(c, cuda_kernels::attention_forward(cuda_kernels::elem(c, qt.dtype()), static_cast<const cuda_kernels::AttnProblem*>(ln.problems.raw()),
                                                           ln.count, ln.max_tq, ln.shared, qt.raw(), c.in(k).raw(), c.in(v).raw(), m0, ot.raw(), lt.raw(),
                                                           cuda_kernels::stream(c)));
  });
}

inline void ScaledDotProductAttention::eval_grad_cuda(KernelContext& c, const Attrs& a) {
  namespace at = kernels::attention;
  namespace ag = cuda_kernels::attention_gpu;
  const LoDTensor& qt = c.in(q);
  const LoDTensor& st = c.in(seed_out);
  c.check(st.numel() == 1 && st.dtype() == DType::i64, "Seed must be one int64, got {} {}", name(st.dtype()), st.shape());
  const int64_t seed = kernels::place_io::host(c, st).data<int64_t>()[0];
  cuda_kernels::float_types(c, qt.dtype(), [&](auto tag) {
    using T = decltype(tag);
    at::Plan<T> pl = at::plan<T>(c, a, uint64_t(seed));
    const LoDTensor &ot = c.in(out), &dot = c.in(out_grad), &lt = c.in(lse);
    c.check(dot.numel() == ot.numel(), "Out@GRAD {} must have Out's shape {}", dot.shape(), ot.shape());
    at::place_outputs(pl, qt, const_cast<T*>(ot.data<T>()), const_cast<T*>(lt.data<T>()));
    Tensor sq, sk, sv;
    auto target = [&](Slot slot, const LoDTensor& like, Tensor& scratch) -> void* {
      if (c.has_out(slot)) {
        LoDTensor& g = c.out(slot);
        g.resize(like.shape(), like.dtype());
        g.set_lod(like.lod());
        return g.raw();
      }
      scratch = Tensor(like.shape(), like.dtype(), c.place());
      return scratch.raw();
    };
    void* gq = target(q_grad, qt, sq);
    void* gk = target(k_grad, c.in(k), sk);
    void* gv = target(v_grad, c.in(v), sv);
    kernels::place_io::zero(c, gk, c.in(k).bytes());
    kernels::place_io::zero(c, gv, c.in(v).bytes());
    const LoDTensor* mt = c.in_if(mask);
    const void* m0 = mt ? mt->raw() : nullptr;
    auto ln = ag::upload_plan<T>(c, pl, qt.data<T>(), c.in(k).data<T>(), c.in(v).data<T>(), ot.data<T>(), lt.data<T>(), m0, mt && mt->dtype() == DType::boolean);
    cuda_kernels::check(c, cuda_kernels::attention_backward(cuda_kernels::elem(c, qt.dtype()), static_cast<const cuda_kernels::AttnProblem*>(ln.problems.raw()),
                                                            ln.count, ln.max_tq, ln.shared, qt.raw(), c.in(k).raw(), c.in(v).raw(), m0, ot.raw(), dot.raw(),
                                                            lt.raw(), gq, gk, gv, cuda_kernels::stream(c)));
  });
}

inline void AddPositionEncoding::eval_cuda(KernelContext& c, const Attrs& a) {
  const LoDTensor& xt = c.in(x);
  LoDTensor& ot = c.out(out);
  const auto [D, pos] = kernels::position::encoding_layout(c, xt, ot);
  const Tensor p = kernels::place_io::upload(c, pos);
  cuda_kernels::check(c, cuda_kernels::add_position_encoding(cuda_kernels::elem(c, xt.dtype()), xt.raw(), ot.raw(), p.data<int64_t>(), int64_t(pos.size()), D,
                                                             a.alpha, a.beta, cuda_kernels::stream(c)));
}

inline void AddPositionEncoding::eval_grad_cuda(KernelContext& c, const Attrs& a) {
  const LoDTensor& g = c.in(out_grad);
  LoDTensor& gx = c.out(x_grad);
  gx.resize(g.shape(), g.dtype());
  gx.set_lod(g.lod());
  cuda_kernels::check(c, cuda_kernels::scale_by(cuda_kernels::elem(c, g.dtype()), g.raw(), gx.raw(), g.numel(), a.alpha, cuda_kernels::stream(c)));
}

namespace detail {
inline void rotary_cuda(KernelContext& c, const RotaryPositionEmbedding::Attrs& a, const LoDTensor& pos_of, const LoDTensor& in, LoDTensor& o, float sign) {
  const kernels::position::RotaryLayout l = kernels::position::rotary_layout(c, pos_of, in, o);
  const Tensor p = kernels::place_io::upload(c, l.pos);
  cuda_kernels::check(c, cuda_kernels::rotary(cuda_kernels::elem(c, in.dtype()), in.raw(), o.raw(), p.data<int64_t>(), int64_t(l.pos.size()), l.heads, l.d,
                                              a.base, a.offset, sign, cuda_kernels::stream(c)));
}
}  // namespace detail

inline void RotaryPositionEmbedding::eval_cuda(KernelContext& c, const Attrs& a) { detail::rotary_cuda(c, a, c.in(x), c.in(x), c.out(out), 1.f); }

inline void RotaryPositionEmbedding::eval_grad_cuda(KernelContext& c, const Attrs& a) {
  detail::rotary_cuda(c, a, c.in(x), c.in(out_grad), c.out(x_grad), -1.f);
}

}  // namespace oar::ops
