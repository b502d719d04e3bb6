// kernels/cpu/kv_cache.hpp: kv_cache, one kernel for every place: rows move through place_io's copies, and the
// LoD and the cached counts (a few numbers per sequence) are the host's.
#pragma once
#include <vector>

#include "kernels/cpu/place_io.hpp"
#include "oar/device/kernel_context.hpp"
#include "oar/ops/attention.hpp"

namespace oar::ops {

inline void KvCache::eval_cpu(KernelContext& c, const Attrs& a) {
  namespace io = cpu_kernels::place_io;
  const LoDTensor& xt = c.in(x);
  LoDTensor& ot = c.out(out);
  LoDTensor& lt = c.out(length);
  const bool dense = xt.lod_level() == 0;
  c.check(dense ? xt.rank() >= 3 || (a.count_only && xt.rank() >= 2) : xt.lod_level() == 1 && xt.rank() >= 1,
          "X must be [N, ...] with one LoD level or dense [B, ..., T, d], got {} (lod_level {})", xt.shape(), xt.lod_level());
  const size_t S = dense ? size_t(xt.dim(0)) : xt.num_sequences();
  std::vector<int64_t> cached(S, 0);
  auto pass_through = [&] {
    if (&ot != &xt) {
      ot.share_from(xt);
      ot.set_lod(xt.lod());
    }
  };
  auto put_lengths = [&] {
    lt.resize(Shape{int64_t(S)}, DType::i64);
    io::store(c, lt, cached.data());
  };
  if (!a.use_cache) {
    pass_through();
    put_lengths();
    return;
  }
  Value* sv = c.out_value(cache_out);
  c.check(sv && c.in_value(cache) == sv, "Cache and CacheOut must name one variable (the cache kept between runs)");
  LoDTensor& st = c.out(cache_out);
  const bool empty = !st.initialized() || (st.numel() == 0 && st.lod().empty());
  if (a.count_only) {
    if (!empty) {
      c.check(st.numel() == int64_t(S), "the cache holds {} sequences but X has {}: feed one (maybe empty) sequence for each cached one, or reset the cache",
              st.numel(), S);
      const Tensor h = io::host(c, st);
      for (size_t s = 0; s < S; ++s) cached[s] = h.data<int64_t>()[s];
    }
    put_lengths();
    std::vector<int64_t> now = cached;
    for (size_t s = 0; s < S; ++s) now[s] += dense ? xt.dim(xt.rank() - 2) : int64_t(xt.lod()[0][s + 1] - xt.lod()[0][s]);
    st.resize(Shape{int64_t(S)}, DType::i64);
    io::store(c, st, now.data());
    st.clear_lod();
    pass_through();
    return;
  }
  const size_t esz = size_of(xt.dtype());
  if (!empty) {
    c.check(st.dtype() == xt.dtype() && st.rank() == xt.rank(), "the cache holds {} {} but X is {} {}", name(st.dtype()), st.shape(), name(xt.dtype()), xt.shape());
    for (int d = 1; d < xt.rank(); ++d)
      c.check((dense && d == xt.rank() - 2) || st.dim(d) == xt.dim(d), "X {} does not continue the cache {}: they differ in dim {}", xt.shape(), st.shape(), d);
  }
  if (dense) {  // [B, ..., T, d]: blocks of T rows, appended along T
    const int ta = xt.rank() - 2;
    const int64_t B = xt.dim(0), T = xt.dim(ta), d = xt.dim(ta + 1), Tc = empty ? 0 : st.dim(ta);
    if (!empty) c.check(st.dim(0) == B, "the cache holds {} sequences but X has {}: feed the same batch, or reset the cache", st.dim(0), B);
    std::fill(cached.begin(), cached.end(), Tc);
    Shape os = xt.shape();
    os[ta] = Tc + T;
    ot.resize(os, xt.dtype());
    ot.clear_lod();
    const int64_t blocks = xt.shape().numel(0, ta);
    const size_t old_bytes = size_t(Tc * d) * esz, new_bytes = size_t(T * d) * esz;
    for (int64_t p = 0; p < blocks; ++p) {
      char* to = static_cast<char*>(ot.raw()) + size_t(p) * (old_bytes + new_bytes);
      if (Tc) io::copy(c, to, static_cast<const char*>(st.raw()) + size_t(p) * old_bytes, old_bytes);
      io::copy(c, to + old_bytes, static_cast<const char*>(xt.raw()) + size_t(p) * new_bytes, new_bytes);
    }
  } else {
    const std::vector<size_t>& xo = xt.lod()[0];
    c.check(empty || st.num_sequences() == S,
            "the cache holds {} sequences but X has {}: feed one (maybe empty) sequence for each cached one, or reset the cache", st.num_sequences(), S);
    size_t row_bytes = esz;
    for (int d = 1; d < xt.rank(); ++d) row_bytes *= size_t(xt.dim(d));
    std::vector<size_t> oo(S + 1, 0);
    for (size_t s = 0; s < S; ++s) {
      cached[s] = empty ? 0 : int64_t(st.lod()[0][s + 1] - st.lod()[0][s]);
      oo[s + 1] = oo[s] + size_t(cached[s]) + (xo[s + 1] - xo[s]);
    }
    Shape os = xt.shape();
    os[0] = int64_t(oo[S]);
    ot.resize(os, xt.dtype());
    for (size_t s = 0; s < S; ++s) {
      char* to = static_cast<char*>(ot.raw()) + oo[s] * row_bytes;
      if (cached[s]) io::copy(c, to, static_cast<const char*>(st.raw()) + st.lod()[0][s] * row_bytes, size_t(cached[s]) * row_bytes);
      io::copy(c, to + size_t(cached[s]) * row_bytes, static_cast<const char*>(xt.raw()) + xo[s] * row_bytes, (xo[s + 1] - xo[s]) * row_bytes);
    }
    ot.set_lod(LoD{std::move(oo)});
  }
  put_lengths();
  // The cache keeps Out's storage: Out's next run finds it shared and allocates afresh, so the rows read here
  // are never overwritten while they are read.
  st.share_from(ot);
  st.set_lod(ot.lod());
}

}  // namespace oar::ops
