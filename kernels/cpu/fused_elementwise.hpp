// kernels/cpu/fused_elementwise.hpp: fused_elementwise and its grad on the CPU. The postfix program runs over
// L1-sized chunks of the output (numexpr-style): one pass over memory, no full-size temporaries.
#pragma once
#include <algorithm>
#include <cstring>

#include "kernels/common/fused_elementwise.hpp"
#include "kernels/functors.hpp"
#include "oar/ops/fused_elementwise.hpp"
#include "oar/device/kernel_context.hpp"
#include "oar/device/thread_pool.hpp"

namespace oar::cpu_kernels::fused {

using ops::fused::Binary;
using ops::fused::Kind;
using ops::fused::Node;
using ops::fused::Program;
using ops::fused::Unary;

inline constexpr int64_t kChunk = 2048;      ///< forward: elements per chunk (a few stack buffers stay in L1)
inline constexpr int64_t kGradChunk = 1024;  ///< grad: every node keeps a value and an adjoint buffer
inline constexpr int64_t kMinParallel = 32768;  ///< output elements per parallel piece at least

using kernels::fused::array;
using kernels::fused::grad_plan;
using kernels::fused::grad_targets;
using kernels::fused::GradPlan;
using kernels::fused::InputMap;
using kernels::fused::inputs;
using kernels::fused::kMaxRank;
using kernels::fused::make_map;
using kernels::fused::out_shape;
using kernels::fused::Tag;
using enum kernels::fused::Tag;

/// Calls f(input offset, output position k, run length, stride) for the runs along the innermost dim that
/// cover output elements [lo, lo + n).
template <class F>
inline void for_runs(const InputMap& m, int64_t lo, int64_t n, F&& f) {
  const int r = m.rank;
  int64_t idx[kMaxRank];
  int64_t rest = lo;
  for (int d = r - 1; d >= 0; --d) {
    idx[d] = rest % m.dims[d];
    rest /= m.dims[d];
  }
  const int64_t inner = m.dims[r - 1], is = m.strides[r - 1];
  int64_t k = 0;
  while (k < n) {
    int64_t off = 0;
    for (int d = 0; d < r; ++d) off += idx[d] * m.strides[d];
    int64_t len = std::min(n - k, inner - idx[r - 1]);
    f(off, k, len, is);
    k += len;
    idx[r - 1] += len;
    for (int d = r - 1; d > 0 && idx[d] == m.dims[d]; --d) {
      idx[d] = 0;
      ++idx[d - 1];
    }
  }
}

/// dst[0, n) = the input's values at output elements [lo, lo + n).
template <class T>
inline void gather(const T* src, const InputMap& m, int64_t lo, int64_t n, T* dst) {
  for_runs(m, lo, n, [&](int64_t off, int64_t k, int64_t len, int64_t s) {
    if (s == 1) std::memcpy(dst + k, src + off, size_t(len) * sizeof(T));
    else if (s == 0) std::fill(dst + k, dst + k + len, src[off]);
    else for (int64_t j = 0; j < len; ++j) dst[k + j] = src[off + j * s];
  });
}

/// acc[...] += the adjoint of output elements [lo, lo + n), summed onto the input elements they read.
template <class T>
inline void scatter_add(T* acc, const InputMap& m, int64_t lo, int64_t n, const T* adj) {
  for_runs(m, lo, n, [&](int64_t off, int64_t k, int64_t len, int64_t s) {
    if (s == 0) {
      T sum = 0;
      for (int64_t j = 0; j < len; ++j) sum += adj[k + j];
      acc[off] += sum;
    } else {
      for (int64_t j = 0; j < len; ++j) acc[off + j * s] += adj[k + j];
    }
  });
}

/// y[i] = f(a[i]) for the unary node `nd` (its functor with the node's attributes).
template <class T>
inline void unary(const Node& nd, const T* a, T* y, int64_t n) {  // in place allowed (a == y)
  switch (Unary(nd.code)) {
    case Unary::neg:
      for (int64_t i = 0; i < n; ++i) y[i] = -a[i];
      return;
#define OAR_FUSED_CASE(kind, tok, F, ...)                      \
  OAR_UNARY_IF_FUSABLE(kind, case Unary::tok: {                \
    const fn::F f{nd.p0, nd.p1};                               \
    for (int64_t i = 0; i < n; ++i) y[i] = f(a[i]);            \
    return;                                                    \
  })
      OAR_UNARY_OPS(OAR_FUSED_CASE)
#undef OAR_FUSED_CASE
  }
}

/// dx[i] = dy[i] * f'(x[i]) given y = f(x), for the unary node `nd`.
template <class T>
inline void unary_grad(const Node& nd, const T* x, const T* y, const T* dy, T* dx, int64_t n) {
  switch (Unary(nd.code)) {
    case Unary::neg:
      for (int64_t i = 0; i < n; ++i) dx[i] = -dy[i];
      return;
#define OAR_FUSED_CASE(kind, tok, F, ...)                                \
  OAR_UNARY_IF_FUSABLE(kind, case Unary::tok: {                          \
    const fn::F f{nd.p0, nd.p1};                                         \
    for (int64_t i = 0; i < n; ++i) dx[i] = f.grad(x[i], y[i], dy[i]);   \
    return;                                                              \
  })
      OAR_UNARY_OPS(OAR_FUSED_CASE)
#undef OAR_FUSED_CASE
  }
}

/// The scalar binary operators, one functor each (functors, not function pointers, so the loops inline and
/// vectorize); max/min as Fluid's MaxFunctor/MinFunctor: a > b ? a : b.
namespace bop {
struct add { template <class T> T operator()(T a, T b) const { return a + b; } };
struct sub { template <class T> T operator()(T a, T b) const { return a - b; } };
struct mul { template <class T> T operator()(T a, T b) const { return a * b; } };
struct div { template <class T> T operator()(T a, T b) const { return a / b; } };
struct max { template <class T> T operator()(T a, T b) const { return a > b ? a : b; } };
struct min { template <class T> T operator()(T a, T b) const { return a < b ? a : b; } };
struct pow { template <class T> T operator()(T a, T b) const { return std::pow(a, b); } };
}  // namespace bop

/// y = a OP b where a (sa: a scalar) and b (sb) are not both scalars.
template <class T, class F>
inline void binary_loop(const T* a, bool sa, const T* b, bool sb, T* y, int64_t n, F f) {
  if (!sa && !sb) {
    for (int64_t i = 0; i < n; ++i) y[i] = f(a[i], b[i]);
  } else if (sa) {
    const T av = *a;
    for (int64_t i = 0; i < n; ++i) y[i] = f(av, b[i]);
  } else {
    const T bv = *b;
    for (int64_t i = 0; i < n; ++i) y[i] = f(a[i], bv);
  }
}

template <class T>
inline void binary(Binary op, const T* a, bool sa, const T* b, bool sb, T* y, int64_t n) {
  switch (op) {
#define OAR_FUSED_CASE(tok) \
  case Binary::tok: binary_loop(a, sa, b, sb, y, n, bop::tok{}); return;
    OAR_FUSED_BINARY(OAR_FUSED_CASE)
#undef OAR_FUSED_CASE
  }
}

template <class T>
inline T binary_scalar(Binary op, T a, T b) {
  switch (op) {
#define OAR_FUSED_CASE(tok) \
  case Binary::tok: return bop::tok{}(a, b);
    OAR_FUSED_BINARY(OAR_FUSED_CASE)
#undef OAR_FUSED_CASE
  }
  return T(0);
}

template <class T>
inline const T* constant_ptr(const Node& n) {
  if constexpr (std::is_same_v<T, float>) return &n.fvalue;
  else return &n.value;
}

/// Per-thread scratch reused across calls (grown on demand, never shrunk).
template <class T>
inline T* scratch(size_t count) {
  thread_local std::vector<double> buf;
  size_t need = (count * sizeof(T) + sizeof(double) - 1) / sizeof(double) + 8;
  if (buf.size() < need) buf.resize(need);
  auto p = reinterpret_cast<uintptr_t>(buf.data());
  return reinterpret_cast<T*>((p + 63) & ~uintptr_t(63));  // 64-byte aligned: 8 doubles of slack
}

/// The data pointers of `xs[0, n)` as T.
template <class T>
inline const T* const* data_of(const LoDTensor* const* xs, size_t n) {
  const T** px = array<const T*, in_data>(n);
  for (size_t i = 0; i < n; ++i) px[i] = xs[i]->data<T>();
  return px;
}

/// Out = program(X...) over output elements; one pass, chunk by chunk.
template <class T>
void forward(const Program& p, const T* const* xs, const InputMap* maps, T* out, int64_t total) {
  if (total == 0) return;
  const auto& nodes = p.nodes;
  const int64_t C = std::min<int64_t>(kChunk, total);
  const int64_t nchunks = (total + C - 1) / C;
  const size_t depth = size_t(p.max_depth);
  parallel_for(0, nchunks, std::max<int64_t>(1, kMinParallel / C), [&](int64_t c0, int64_t c1) {
    T* bufs = scratch<T>(depth * size_t(C) + nodes.size() + 16);
    T* scal = bufs + depth * size_t(C);  // scalar results, one per node
    const T** sp = array<const T*, chunk_stack>(depth + 1);          // the stack: value pointers ...
    unsigned char* ss = array<unsigned char, chunk_scalar>(depth + 1);  // ... and whether each is a scalar
    for (int64_t ch = c0; ch < c1; ++ch) {
      const int64_t lo = ch * C, n = std::min(C, total - lo);
      for (size_t k = 0; k < nodes.size(); ++k) {
        const Node& nd = nodes[k];
        const size_t d = size_t(nd.depth);
        T* buf = bufs + d * size_t(C);
        T* dst = k + 1 == nodes.size() ? out + lo : buf;  // the root writes Out directly
        switch (nd.kind) {
          case Kind::input: {
            const InputMap& m = maps[size_t(nd.input)];
            const T* x = xs[size_t(nd.input)];
            if (m.mode == InputMap::contig) sp[d] = x + lo, ss[d] = false;
            else if (m.mode == InputMap::scalar) sp[d] = x, ss[d] = true;
            else gather(x, m, lo, n, buf), sp[d] = buf, ss[d] = false;
            break;
          }
          case Kind::constant:
            sp[d] = constant_ptr<T>(nd), ss[d] = true;
            break;
          case Kind::unary:
            if (ss[d]) {
              unary(nd, sp[d], scal + k, 1);
              sp[d] = scal + k;
            } else {
              unary(nd, sp[d], dst, n);
              sp[d] = dst;
            }
            break;
          case Kind::binary:
            if (ss[d] && ss[d + 1]) {
              scal[k] = binary_scalar(Binary(nd.code), *sp[d], *sp[d + 1]);
              sp[d] = scal + k;
            } else {
              binary(Binary(nd.code), sp[d], ss[d], sp[d + 1], ss[d + 1], dst, n);
              sp[d] = dst, ss[d] = false;
            }
            break;
        }
      }
      if (sp[0] != out + lo) {  // the result is an input, a constant or a folded scalar
        if (ss[0]) std::fill(out + lo, out + lo + n, *sp[0]);
        else std::memmove(out + lo, sp[0], size_t(n) * sizeof(T));
      }
    }
  });
}

/// Adjoints of a and b of node `nd` (value y, adjoint dy) where wanted (da / db non-null).
template <class T>
inline void binary_grad(Binary op, const T* a, const T* b, const T* y, const T* dy, T* da, T* db, int64_t n) {
  switch (op) {
    case Binary::add:
    case Binary::sub:
      if (da) std::memcpy(da, dy, size_t(n) * sizeof(T));
      if (db) {
        if (op == Binary::add) std::memcpy(db, dy, size_t(n) * sizeof(T));
        else for (int64_t i = 0; i < n; ++i) db[i] = -dy[i];
      }
      return;
    case Binary::mul:
      if (da) for (int64_t i = 0; i < n; ++i) da[i] = dy[i] * b[i];
      if (db) for (int64_t i = 0; i < n; ++i) db[i] = dy[i] * a[i];
      return;
    case Binary::div:  // y = a / b: da = dy / b, db = -dy * y / b
      if (da) for (int64_t i = 0; i < n; ++i) da[i] = dy[i] / b[i];
      if (db) for (int64_t i = 0; i < n; ++i) db[i] = -dy[i] * y[i] / b[i];
      return;
    case Binary::max:  // ties go to b, as Fluid's elementwise_max_grad: dx = dout * (x > y), dy = dout * (x <= y)
      if (da) for (int64_t i = 0; i < n; ++i) da[i] = a[i] > b[i] ? dy[i] : T(0);
      if (db) for (int64_t i = 0; i < n; ++i) db[i] = a[i] > b[i] ? T(0) : dy[i];
      return;
    case Binary::min:  // ties go to b, as Fluid's elementwise_min_grad: dx = dout * (x < y), dy = dout * (x >= y)
      if (da) for (int64_t i = 0; i < n; ++i) da[i] = a[i] < b[i] ? dy[i] : T(0);
      if (db) for (int64_t i = 0; i < n; ++i) db[i] = a[i] < b[i] ? T(0) : dy[i];
      return;
    case Binary::pow:  // y = a^b: da = dy * b * a^(b-1), db = dy * y * log(a) (0 where y == 0)
      if (da) for (int64_t i = 0; i < n; ++i) da[i] = dy[i] * b[i] * std::pow(a[i], b[i] - T(1));
      if (db) for (int64_t i = 0; i < n; ++i) db[i] = y[i] == T(0) ? T(0) : dy[i] * y[i] * std::log(a[i]);
      return;
  }
}

/// dX[t] for every grad target t: reverse mode over the program, chunk by chunk; adjoints of inputs that
/// were broadcast are summed over their broadcast dims. `target[i]`: the dX index input i adds to (-1: none).
template <class T>
void backward(const Program& p, const T* const* xs, const InputMap* maps, size_t num_inputs, const T* dout, int64_t total, const int* target,
              T* const* dxs, size_t nt) {
  const auto& nodes = p.nodes;
  const size_t nn = nodes.size();
  // needs[k]: node k's subtree reads an input whose gradient is wanted.
  char* needs = array<char, grad_needs>(nn);
  std::fill(needs, needs + nn, 0);
  for (size_t k = 0; k < nn; ++k) {
    const Node& nd = nodes[k];
    if (nd.kind == Kind::input) needs[k] = target[size_t(nd.input)] >= 0;
    else if (nd.kind == Kind::unary) needs[k] = needs[size_t(nd.a)];
    else if (nd.kind == Kind::binary) needs[k] = needs[size_t(nd.a)] || needs[size_t(nd.b)];
  }
  // Targets read contiguously are written chunk by chunk; the others sum into per-task accumulators.
  InputMap::Mode* tmode = array<InputMap::Mode, grad_tmode>(nt);
  int64_t* tnumel = array<int64_t, grad_tnumel>(nt);
  int64_t* tacc = array<int64_t, grad_tacc>(nt);
  char* used = array<char, grad_used>(nt);
  std::fill(tmode, tmode + nt, InputMap::contig);
  std::fill(tnumel, tnumel + nt, 0);
  std::fill(tacc, tacc + nt, -1);
  std::fill(used, used + nt, 0);
  for (size_t i = 0; i < num_inputs; ++i)
    if (target[i] >= 0) tmode[size_t(target[i])] = maps[i].mode, tnumel[size_t(target[i])] = maps[i].numel;
  for (const Node& nd : nodes)
    if (nd.kind == Kind::input && target[size_t(nd.input)] >= 0) used[size_t(target[size_t(nd.input)])] = 1;
  int64_t acc_size = 0;
  for (size_t t = 0; t < nt; ++t)
    if (tmode[t] != InputMap::contig) tacc[t] = acc_size, acc_size += tnumel[t];
  for (size_t t = 0; t < nt; ++t)
    if (tmode[t] == InputMap::contig && !used[t]) std::fill(dxs[t], dxs[t] + tnumel[t], T(0));

  const int64_t C = std::max<int64_t>(1, std::min<int64_t>(kGradChunk, total));
  const int64_t nchunks = total == 0 ? 0 : (total + C - 1) / C;
  // Tasks: a fixed split of the chunks (independent of the thread count, so sums are reproducible), at most
  // as many as keep the accumulators within the output's size.
  int64_t ntask = std::clamp<int64_t>(total / kMinParallel, 1, 64);
  if (acc_size > 0) ntask = std::clamp<int64_t>(std::min(ntask, total / acc_size), 1, 64);
  ntask = std::min<int64_t>(ntask, std::max<int64_t>(nchunks, 1));
  T* acc = array<T, grad_acc>(size_t(acc_size * ntask));
  std::fill(acc, acc + acc_size * ntask, T(0));

  parallel_for(0, ntask, 1, [&](int64_t t0, int64_t t1) {
    // Per node: a value buffer and an adjoint buffer of C elements; vals/adjs point at them or alias.
    T* bufs = scratch<T>(2 * nn * size_t(C));
    const T** val = array<const T*, chunk_val>(nn);
    const T** adj = array<const T*, chunk_adj>(nn);
    char* written = array<char, chunk_written>(nt);
    auto vbuf = [&](size_t k) { return bufs + 2 * k * size_t(C); };
    auto abuf = [&](size_t k) { return bufs + (2 * k + 1) * size_t(C); };
    // Constants and scalar inputs: filled once per task.
    for (size_t k = 0; k < nn; ++k) {
      const Node& nd = nodes[k];
      if (nd.kind == Kind::constant) std::fill(vbuf(k), vbuf(k) + C, *constant_ptr<T>(nd));
      if (nd.kind == Kind::input && maps[size_t(nd.input)].mode == InputMap::scalar) std::fill(vbuf(k), vbuf(k) + C, *xs[size_t(nd.input)]);
    }
    for (int64_t task = t0; task < t1; ++task) {
      T* tacc_base = acc + task * acc_size;
      const int64_t cb = nchunks * task / ntask, ce = nchunks * (task + 1) / ntask;
      for (int64_t ch = cb; ch < ce; ++ch) {
        const int64_t lo = ch * C, n = std::min(C, total - lo);
        // Forward: every node's value over the chunk.
        for (size_t k = 0; k < nn; ++k) {
          const Node& nd = nodes[k];
          switch (nd.kind) {
            case Kind::input: {
              const InputMap& m = maps[size_t(nd.input)];
              const T* x = xs[size_t(nd.input)];
              if (m.mode == InputMap::contig) val[k] = x + lo;
              else if (m.mode == InputMap::scalar) val[k] = vbuf(k);
              else gather(x, m, lo, n, vbuf(k)), val[k] = vbuf(k);
              break;
            }
            case Kind::constant: val[k] = vbuf(k); break;
            case Kind::unary:
              unary(nd, val[size_t(nd.a)], vbuf(k), n);
              val[k] = vbuf(k);
              break;
            case Kind::binary:
              binary(Binary(nd.code), val[size_t(nd.a)], false, val[size_t(nd.b)], false, vbuf(k), n);
              val[k] = vbuf(k);
              break;
          }
        }
        // Reverse: each node is the operand of exactly one later node, so each adjoint is written once.
        std::fill(written, written + nt, 0);
        adj[nn - 1] = dout + lo;
        for (size_t k = nn; k-- > 0;) {
          if (!needs[k]) continue;
          const Node& nd = nodes[k];
          if (nd.kind == Kind::unary) {
            unary_grad(nd, val[size_t(nd.a)], val[k], adj[k], abuf(size_t(nd.a)), n);
            adj[size_t(nd.a)] = abuf(size_t(nd.a));
          } else if (nd.kind == Kind::binary) {
            size_t a = size_t(nd.a), b = size_t(nd.b);
            Binary op = Binary(nd.code);
            if (op == Binary::add) {  // dA = dB = dY: alias, no copy
              adj[a] = adj[b] = adj[k];
              continue;
            }
            if (op == Binary::sub && !needs[b]) {
              adj[a] = adj[k];
              continue;
            }
            binary_grad(op, val[a], val[b], val[k], adj[k], needs[a] ? abuf(a) : nullptr, needs[b] ? abuf(b) : nullptr, n);
            adj[a] = abuf(a);
            adj[b] = abuf(b);
          } else if (nd.kind == Kind::input) {
            const int t = target[size_t(nd.input)];
            const InputMap& m = maps[size_t(nd.input)];
            const T* g = adj[k];
            if (m.mode == InputMap::contig) {
              T* dx = dxs[size_t(t)] + lo;
              if (!written[size_t(t)]) std::memcpy(dx, g, size_t(n) * sizeof(T)), written[size_t(t)] = 1;
              else for (int64_t i = 0; i < n; ++i) dx[i] += g[i];
            } else if (m.mode == InputMap::scalar) {
              T sum = 0;
              for (int64_t i = 0; i < n; ++i) sum += g[i];
              tacc_base[tacc[size_t(t)]] += sum;
            } else {
              scatter_add(tacc_base + tacc[size_t(t)], m, lo, n, g);
            }
          }
        }
      }
    }
  });
  // Sum the tasks' accumulators in task order.
  for (size_t t = 0; t < nt; ++t) {
    if (tmode[t] == InputMap::contig) continue;
    T* dx = dxs[t];
    std::fill(dx, dx + tnumel[t], T(0));
    for (int64_t task = 0; task < ntask; ++task) {
      const T* a = acc + task * acc_size + tacc[t];
      for (int64_t j = 0; j < tnumel[t]; ++j) dx[j] += a[j];
    }
  }
}

}  // namespace oar::cpu_kernels::fused

namespace oar::ops {

inline void FusedElementwise::eval_cpu(KernelContext& c, const Attrs& a) {
  namespace fk = cpu_kernels::fused;
  const LoDTensor** xs;
  fk::InputMap* maps;
  Shape os;
  const size_t n = fk::inputs(c, x, xs, maps, os);
  LoDTensor& o = c.out(out);
  c.dispatch_float([&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* const* px = fk::data_of<T>(xs, n);
    o.resize(os, xs[0]->dtype());
    fk::forward<T>(a.program, px, maps, o.data<T>(), os.numel());
  });
  if (&o != xs[0]) {  // Out shares X[0]'s LoD when it has X[0]'s shape
    if (xs[0]->shape() == os) o.set_lod(xs[0]->lod());
    else o.clear_lod();
  }
}

inline void FusedElementwise::eval_grad_cpu(KernelContext& c, const Attrs& a) {
  namespace fk = cpu_kernels::fused;
  fk::GradPlan g;
  const size_t nt = fk::grad_plan(c, g);
  if (nt == 0) return;
  const size_t n = c.num_in(x);
  const int* target = g.target;
  const LoDTensor** xs = g.xs;
  const fk::InputMap* maps = g.maps;
  const Shape& os = g.os;
  const LoDTensor& dout = *g.dout;
  c.dispatch_float([&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* const* px = fk::data_of<T>(xs, n);
    T** dxs = fk::array<T*, fk::grad_dxs>(nt);
    std::fill(dxs, dxs + nt, nullptr);
    for (size_t i = 0; i < n; ++i) {
      if (target[i] < 0 || dxs[size_t(target[i])]) continue;
      LoDTensor& dx = c.out(x_grad, i);
      dx.resize(xs[i]->shape(), xs[i]->dtype());
      dx.set_lod(xs[i]->lod());
      dxs[size_t(target[i])] = dx.data<T>();
    }
    fk::backward<T>(a.program, px, maps, n, dout.data<T>(), os.numel(), target, dxs, nt);
  });
}

}  // namespace oar::ops
