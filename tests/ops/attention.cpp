// tests/ops/attention.cpp: scaled_dot_product_attention (dense [B, H, T, d] and ragged LoD [N, H, d]; float and
// bool masks, causal with Tq != Tk, scale, dropout from the counter stream) through the op harness, against a
// plain reference in double that holds the whole score matrix.
#include "pch.hpp"
#include "support/op_check.hpp"

#include "kernels/random_counter.hpp"  // fn::CounterRng: the dropout keep mask of the reference

using namespace oar;
using namespace oar::test;

namespace {

constexpr double inf = std::numeric_limits<double>::infinity();

/// Dropout of the reference: none when p == 0; else weight (i, j) of the problem starting at draw n0 is kept
/// when CounterRng(seed).uniform(n0 + i * Tk + j) >= p, and scaled by 1 / (1 - p).
struct Drop {
  double p = 0;
  uint64_t seed = 0;
};

struct Ref {
  Tensor out, lse;
  Tensor dq, dk, dv;  // given Out@GRAD
};

std::vector<double> vals(const Tensor& t) {
  std::vector<double> v(size_t(t.numel()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = t.get(int64_t(i));
  return v;
}

/// A tensor of `proto`'s float dtype holding `v`.
Tensor like(const Tensor& proto, const std::vector<double>& v, Shape s) {
  if (proto.dtype() == f32) return make_tensor<float>(s, [&](int64_t i) { return v[size_t(i)]; });
  return Tensor::from<double>(v, s);
}

Tensor bool_tensor(Shape s, const std::function<bool(int64_t)>& keep) {
  Tensor t(s, boolean);
  bool* p = t.data<bool>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = keep(i);
  return t;
}

double scale_of(float scale_attr, int64_t d) { return scale_attr == 0 ? 1.0 / std::sqrt(double(d)) : double(scale_attr); }

/// Gradients of one problem (row-major like its inputs), accumulated: dout [Tq, dv] -> dq, dk, dv.
struct GradPtrs {
  const double* dout = nullptr;
  double *dq = nullptr, *dk = nullptr, *dv = nullptr;
};

/// One problem, all row-major: q [Tq, d], k [Tk, d], v [Tk, dv], bias [Tq, Tk] added to the scaled scores (-inf
/// drops the key). Writes out [Tq, dv] and lse [Tq]; a row without keys gives zeros and -inf. With g.dout, adds
/// the gradients too: dV = (P Z)^T dO, dP = Z (dO V^T), dS = P (dP - rowsum(P dP)), dQ = scale dS K, dK = scale dS^T Q
/// (Z the dropout factors).
void attend(const double* q, const double* k, const double* v, const std::vector<double>& bias, int64_t Tq, int64_t Tk, int64_t d, int64_t dv,
            double scale, const Drop& drop, uint64_t n0, double* out, double* lse, const GradPtrs& g = {}) {
  const fn::CounterRng rng(drop.seed);
  std::vector<double> s(static_cast<size_t>(Tk));
  for (int64_t i = 0; i < Tq; ++i) {
    double mx = -inf;
    for (int64_t j = 0; j < Tk; ++j) {
      double b = bias[size_t(i * Tk + j)];
      if (b == -inf) {
        s[size_t(j)] = -inf;
        continue;
      }
      double dot = 0;
      for (int64_t c = 0; c < d; ++c) dot += q[i * d + c] * k[j * d + c];
      s[size_t(j)] = dot * scale + b;
      mx = std::max(mx, s[size_t(j)]);
    }
    for (int64_t c = 0; c < dv; ++c) out[i * dv + c] = 0;
    if (mx == -inf) {
      lse[i] = -inf;
      continue;
    }
    double sum = 0;
    for (int64_t j = 0; j < Tk; ++j) sum += std::exp(s[size_t(j)] - mx);
    const double l = mx + std::log(sum);
    lse[i] = l;
    std::vector<double> P(static_cast<size_t>(Tk)), dP(static_cast<size_t>(Tk));
    double delta = 0;
    for (int64_t j = 0; j < Tk; ++j) {
      const double pw = std::exp(s[size_t(j)] - l);
      const double z = drop.p > 0 ? (rng.uniform(n0 + uint64_t(i * Tk + j)) >= drop.p ? 1 / (1 - drop.p) : 0.0) : 1.0;
      for (int64_t c = 0; c < dv; ++c) out[i * dv + c] += pw * z * v[j * dv + c];
      if (!g.dout) continue;
      double ov = 0;
      for (int64_t c = 0; c < dv; ++c) {
        ov += g.dout[i * dv + c] * v[j * dv + c];
        g.dv[j * dv + c] += pw * z * g.dout[i * dv + c];
      }
      P[size_t(j)] = pw;
      dP[size_t(j)] = z * ov;
      delta += pw * z * ov;
    }
    if (!g.dout) continue;
    for (int64_t j = 0; j < Tk; ++j) {
      const double ds = P[size_t(j)] * (dP[size_t(j)] - delta) * scale;
      for (int64_t c = 0; c < d; ++c) {
        g.dq[i * d + c] += ds * k[j * d + c];
        g.dk[j * d + c] += ds * q[i * d + c];
      }
    }
  }
}

/// Dense reference: Q [B, H, Tq, d], K [B, H, Tk, d], V [B, H, Tk, dv], mask [Tq, Tk] or [B|1, H|1, Tq, Tk]
/// (bool: false drops; float: added) -> Out [B, H, Tq, dv], LSE [B, H, Tq] in f64.
Ref ref_dense(const Tensor& Q, const Tensor& K, const Tensor& V, const Tensor* mask = nullptr, bool causal = false, float scale_attr = 0, Drop drop = {},
              const Tensor* dout = nullptr) {
  const int64_t B = Q.dim(0), H = Q.dim(1), Tq = Q.dim(2), d = Q.dim(3), Tk = K.dim(2), dv = V.dim(3);
  const double scale = scale_of(scale_attr, d);
  const auto q = vals(Q), k = vals(K), v = vals(V);
  const auto m = mask ? vals(*mask) : std::vector<double>{};
  const bool mbool = mask && mask->dtype() == boolean;
  std::vector<double> out(size_t(B * H * Tq * dv)), lse(size_t(B * H * Tq)), bias(size_t(Tq * Tk));
  const auto go = dout ? vals(*dout) : std::vector<double>{};
  std::vector<double> gq(dout ? q.size() : 0), gk(dout ? k.size() : 0), gv(dout ? v.size() : 0);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h) {
      const int64_t p = b * H + h;
      for (int64_t i = 0; i < Tq; ++i)
        for (int64_t j = 0; j < Tk; ++j) {
          double x = 0;
          if (mask) {
            int64_t at = i * Tk + j;
            if (mask->rank() == 4) at += ((mask->dim(0) == 1 ? 0 : b) * mask->dim(1) + (mask->dim(1) == 1 ? 0 : h)) * Tq * Tk;
            x = mbool ? (m[size_t(at)] != 0 ? 0.0 : -inf) : m[size_t(at)];
          }
          if (causal && j > i + Tk - Tq) x = -inf;
          bias[size_t(i * Tk + j)] = x;
        }
      GradPtrs g;
      if (dout) g = {&go[size_t(p * Tq * dv)], &gq[size_t(p * Tq * d)], &gk[size_t(p * Tk * d)], &gv[size_t(p * Tk * dv)]};
      attend(&q[size_t(p * Tq * d)], &k[size_t(p * Tk * d)], &v[size_t(p * Tk * dv)], bias, Tq, Tk, d, dv, scale, drop, uint64_t(p * Tq * Tk),
             &out[size_t(p * Tq * dv)], &lse[size_t(p * Tq)], g);
    }
  Ref r{Tensor::from<double>(out, Shape{B, H, Tq, dv}), Tensor::from<double>(lse, Shape{B, H, Tq}), {}, {}, {}};
  if (dout) r.dq = Tensor::from<double>(gq, Q.shape()), r.dk = Tensor::from<double>(gk, K.shape()), r.dv = Tensor::from<double>(gv, V.shape());
  return r;
}

/// Ragged reference: Q [Nq, H, d], K [Nk, H, d], V [Nk, H, dv] with one LoD level each -> Out [Nq, H, dv],
/// LSE [Nq, H]; the problems (sequence s, head h) s-major, their draws one after another.
Ref ref_ragged(const LoDTensor& Q, const LoDTensor& K, const LoDTensor& V, bool causal = false, float scale_attr = 0, Drop drop = {},
               const Tensor* dout = nullptr) {
  const int64_t Nq = Q.dim(0), H = Q.dim(1), d = Q.dim(2), dv = V.dim(2);
  const auto& ql = Q.lod().at(0);
  const auto& kl = K.lod().at(0);
  REQUIRE(ql.size() == kl.size());
  const double scale = scale_of(scale_attr, d);
  const auto q = vals(Q), k = vals(K), v = vals(V);
  std::vector<double> out(size_t(Nq * H * dv)), lse(size_t(Nq * H));
  const auto go = dout ? vals(*dout) : std::vector<double>{};
  std::vector<double> gq(q.size()), gk(k.size()), gv(v.size());
  uint64_t n0 = 0;
  for (size_t s = 0; s + 1 < ql.size(); ++s) {
    const int64_t q0 = int64_t(ql[s]), k0 = int64_t(kl[s]), Tq = int64_t(ql[s + 1]) - q0, Tk = int64_t(kl[s + 1]) - k0;
    for (int64_t h = 0; h < H; ++h) {
      std::vector<double> lq(size_t(Tq * d)), lk(size_t(Tk * d)), lv(size_t(Tk * dv)), bias(size_t(Tq * Tk)), lo(size_t(Tq * dv)), ll(static_cast<size_t>(Tq));
      for (int64_t i = 0; i < Tq; ++i)
        for (int64_t c = 0; c < d; ++c) lq[size_t(i * d + c)] = q[size_t(((q0 + i) * H + h) * d + c)];
      for (int64_t j = 0; j < Tk; ++j) {
        for (int64_t c = 0; c < d; ++c) lk[size_t(j * d + c)] = k[size_t(((k0 + j) * H + h) * d + c)];
        for (int64_t c = 0; c < dv; ++c) lv[size_t(j * dv + c)] = v[size_t(((k0 + j) * H + h) * dv + c)];
      }
      for (int64_t i = 0; i < Tq; ++i)
        for (int64_t j = 0; j < Tk; ++j) bias[size_t(i * Tk + j)] = causal && j > i + Tk - Tq ? -inf : 0.0;
      std::vector<double> lgo(size_t(Tq * dv)), lgq(lq.size()), lgk(lk.size()), lgv(lv.size());
      GradPtrs g;
      if (dout) {
        for (int64_t i = 0; i < Tq; ++i)
          for (int64_t c = 0; c < dv; ++c) lgo[size_t(i * dv + c)] = go[size_t(((q0 + i) * H + h) * dv + c)];
        g = {lgo.data(), lgq.data(), lgk.data(), lgv.data()};
      }
      attend(lq.data(), lk.data(), lv.data(), bias, Tq, Tk, d, dv, scale, drop, n0, lo.data(), ll.data(), g);
      for (int64_t i = 0; i < Tq; ++i) {
        for (int64_t c = 0; c < dv; ++c) out[size_t(((q0 + i) * H + h) * dv + c)] = lo[size_t(i * dv + c)];
        lse[size_t((q0 + i) * H + h)] = ll[size_t(i)];
        for (int64_t c = 0; c < d; ++c) gq[size_t(((q0 + i) * H + h) * d + c)] = lgq[size_t(i * d + c)];
      }
      for (int64_t j = 0; j < Tk; ++j) {
        for (int64_t c = 0; c < d; ++c) gk[size_t(((k0 + j) * H + h) * d + c)] = lgk[size_t(j * d + c)];
        for (int64_t c = 0; c < dv; ++c) gv[size_t(((k0 + j) * H + h) * dv + c)] = lgv[size_t(j * dv + c)];
      }
      n0 += uint64_t(Tq * Tk);
    }
  }
  Ref r{Tensor::from<double>(out, Shape{Nq, H, dv}), Tensor::from<double>(lse, Shape{Nq, H}), {}, {}, {}};
  if (dout) r.dq = Tensor::from<double>(gq, Q.shape()), r.dk = Tensor::from<double>(gk, K.shape()), r.dv = Tensor::from<double>(gv, V.shape());
  return r;
}

/// Rows [r0, r0 + len) of a ragged x [N, H, c] as a dense [1, H, len, c] (the layouts are transposed).
Tensor ragged_to_dense(const Tensor& x, int64_t r0, int64_t len) {
  const int64_t H = x.dim(1), c = x.dim(2);
  const auto v = vals(x);
  std::vector<double> o(size_t(H * len * c));
  for (int64_t h = 0; h < H; ++h)
    for (int64_t t = 0; t < len; ++t)
      for (int64_t e = 0; e < c; ++e) o[size_t((h * len + t) * c + e)] = v[size_t(((r0 + t) * H + h) * c + e)];
  return like(x, o, Shape{1, H, len, c});
}

/// Dense x [B, H, T, c] (or [B, H, T]) as ragged [B * T, H, c] (or [B * T, H]).
Tensor dense_to_ragged(const Tensor& x) {
  const int64_t B = x.dim(0), H = x.dim(1), T = x.dim(2), c = x.rank() == 4 ? x.dim(3) : 1;
  const auto v = vals(x);
  std::vector<double> o(v.size());
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t t = 0; t < T; ++t)
        for (int64_t e = 0; e < c; ++e) o[size_t(((b * T + t) * H + h) * c + e)] = v[size_t(((b * H + h) * T + t) * c + e)];
  return like(x, o, x.rank() == 4 ? Shape{B * T, H, c} : Shape{B * T, H});
}

/// Rows [r0, r0 + len) of a ragged x [N, H, ...] (a view copied to its own tensor).
Tensor rows(const Tensor& x, int64_t r0, int64_t len) { return x.slice(r0, r0 + len).clone(); }

OpTest sdpa(const LoDTensor& q, const LoDTensor& k, const LoDTensor& v) {
  return OpTest("scaled_dot_product_attention").input("Q", q).input("K", k).input("V", v);
}

/// Tolerances against the f64 reference: absolute, relative for Out, relative for LSE.
template <class T>
double tol() {
  return std::is_same_v<T, float> ? 2e-5 : 1e-10;
}
template <class T>
double rtol() {
  return std::is_same_v<T, float> ? 1e-4 : 1e-9;
}
template <class T>
double lse_rtol() {
  return std::is_same_v<T, float> ? 1e-5 : 1e-10;
}

/// Every element of row `i` (of `width` elements) of t is exactly 0.
bool row_zero(const Tensor& t, int64_t i, int64_t width) {
  for (int64_t c = 0; c < width; ++c)
    if (t.get(i * width + c) != 0.0) return false;
  return true;
}

/// The grad op of `t`'s one-op program run on `dout` as Out@GRAD: {Q@GRAD, K@GRAD, V@GRAD}. `inputs` are fed by
/// slot ("Q", "K", "V", "Mask").
std::vector<LoDTensor> run_grads(const OpTest& t, const std::map<std::string, LoDTensor>& inputs, const LoDTensor& dout) {
  Program p = t.build();
  Block& b = p.global_block();
  std::set<std::string> ng;
  if (inputs.count("Mask")) ng.insert("Mask_0");
  GradContext gc(b.op(0), b, ng);
  b.create_var("Out_0@GRAD", {.dtype = dout.dtype(), .shape = dout.shape(), .lod_level = dout.lod_level()});
  for (auto& g : op_def("scaled_dot_product_attention").grad(gc)) add_op(b, g);
  FeedMap feeds;
  for (auto& [slot, v] : inputs) feeds[slot + "_0"] = v;
  feeds["Out_0@GRAD"] = dout;
  Scope scope;
  Executor exe;
  return exe.run(p, scope, feeds, {"Q_0@GRAD", "K_0@GRAD", "V_0@GRAD"});
}
}  // namespace

// ---------------------------------------------------------------------------------------------------------------
// 1. Dense forward

TEST_CASE_TEMPLATE("scaled_dot_product_attention: dense forward matches a plain reference (Out and LSE)", T, float, double) {
  struct Case {
    int64_t B, H, Tq, Tk, d, dv;
  };
  // Tq != Tk, d != dv, several query tiles (Tq > 256) and key tiles (Tk > 512), a single query, a single key.
  const Case cases[] = {{2, 3, 5, 7, 4, 3}, {2, 3, 300, 300, 16, 8}, {1, 2, 1, 300, 8, 8}, {2, 1, 300, 700, 5, 7}, {1, 1, 129, 1, 3, 2}, {2, 3, 7, 5, 6, 6}};
  uint64_t seed = 10;
  for (const Case& c : cases)
    for (bool causal : {false, true}) {
      CAPTURE(c.B); CAPTURE(c.H); CAPTURE(c.Tq); CAPTURE(c.Tk); CAPTURE(c.d); CAPTURE(c.dv); CAPTURE(causal);
      auto q = random_tensor<T>({c.B, c.H, c.Tq, c.d}, -2, 2, seed++);
      auto k = random_tensor<T>({c.B, c.H, c.Tk, c.d}, -2, 2, seed++);
      auto v = random_tensor<T>({c.B, c.H, c.Tk, c.dv}, -1, 1, seed++);
      auto out = sdpa(q, k, v).attr("causal", causal).run();
      auto ref = ref_dense(q, k, v, nullptr, causal);
      CHECK(out["Out"].dtype() == q.dtype());
      CHECK(out["LSE"].dtype() == q.dtype());
      check_close(to_f64(out["Out"]), ref.out, tol<T>(), rtol<T>(), "Out");
      check_close(to_f64(out["LSE"]), ref.lse, tol<T>(), lse_rtol<T>(), "LSE");
    }
}

TEST_CASE_TEMPLATE("scaled_dot_product_attention: the scale attr replaces 1 / sqrt(d); an unknown batch infers", T, float, double) {
  auto q = random_tensor<T>({2, 3, 9, 6}, -2, 2, 31), k = random_tensor<T>({2, 3, 11, 6}, -2, 2, 32), v = random_tensor<T>({2, 3, 11, 4}, -1, 1, 33);
  for (float scale : {0.3f, 1.f, 2.5f})
    for (bool causal : {false, true}) {
      CAPTURE(scale); CAPTURE(causal);
      auto out = sdpa(q, k, v).attr("scale", scale).attr("causal", causal).unknown_batch().run();
      auto ref = ref_dense(q, k, v, nullptr, causal, scale);
      check_close(to_f64(out["Out"]), ref.out, tol<T>(), rtol<T>(), "Out");
      check_close(to_f64(out["LSE"]), ref.lse, tol<T>(), lse_rtol<T>(), "LSE");
    }
  // scale 1 / sqrt(d) given explicitly (rounded to f32) equals the default 0.
  const float s = float(1 / std::sqrt(6.0));
  check_close(to_f64(sdpa(q, k, v).attr("scale", s).run()["Out"]), to_f64(sdpa(q, k, v).run()["Out"]), 1e-6, 1e-6, "explicit 1/sqrt(d)");
}

// ---------------------------------------------------------------------------------------------------------------
// 2. Masks and causal alignment

TEST_CASE_TEMPLATE("scaled_dot_product_attention: float masks [Tq, Tk], [B, 1, Tq, Tk], [1, H, Tq, Tk] and bool masks", T, float, double) {
  const int64_t B = 2, H = 3, Tq = 6, Tk = 9, d = 5, dv = 4;
  auto q = random_tensor<T>({B, H, Tq, d}, -2, 2, 41), k = random_tensor<T>({B, H, Tk, d}, -2, 2, 42), v = random_tensor<T>({B, H, Tk, dv}, -1, 1, 43);
  // Additive masks: values in [-3, 1], every 7th element -inf (no full row).
  auto float_mask = [&](Shape s, uint64_t seed) {
    Tensor m = random_tensor<T>(s, -3, 1, seed);
    for (int64_t i = 0; i < m.numel(); i += 7) m.template data<T>()[i] = -std::numeric_limits<T>::infinity();
    return m;
  };
  // Bool masks: about a third false, never a full row (key (i + 1) % Tk always kept).
  auto bool_mask = [&](Shape s, uint64_t seed) {
    Tensor r = random_tensor<double>(s, 0, 1, seed);
    return bool_tensor(s, [&](int64_t e) { return r.get(e) >= 0.35 || e % Tk == ((e / Tk) % Tq + 1) % Tk; });
  };
  const std::vector<Shape> shapes{{Tq, Tk}, {B, 1, Tq, Tk}, {1, H, Tq, Tk}, {B, H, Tq, Tk}, {1, 1, Tq, Tk}};
  uint64_t seed = 50;
  for (const Shape& ms : shapes)
    for (bool is_bool : {false, true})
      for (bool causal : {false, true}) {
        CAPTURE(ms.str()); CAPTURE(is_bool); CAPTURE(causal);
        Tensor mask = is_bool ? bool_mask(ms, seed++) : float_mask(ms, seed++);
        auto out = sdpa(q, k, v).input("Mask", mask).attr("causal", causal).run();
        auto ref = ref_dense(q, k, v, &mask, causal);
        check_close(to_f64(out["Out"]), ref.out, tol<T>(), rtol<T>(), "Out");
        check_close(to_f64(out["LSE"]), ref.lse, tol<T>(), lse_rtol<T>(), "LSE");
      }
  // A bool mask equals the float mask of 0 / -inf it stands for.
  Tensor bm = bool_mask({B, 1, Tq, Tk}, 77);
  Tensor fm = make_tensor<T>({B, 1, Tq, Tk}, [&](int64_t e) { return bm.get(e) != 0 ? 0.0 : -inf; });
  auto ob = sdpa(q, k, v).input("Mask", bm).run(), of = sdpa(q, k, v).input("Mask", fm).run();
  check_close(to_f64(ob["Out"]), to_f64(of["Out"]), tol<T>(), rtol<T>(), "bool vs float mask");
  check_close(to_f64(ob["LSE"]), to_f64(of["LSE"]), tol<T>(), lse_rtol<T>(), "bool vs float mask LSE");
}

TEST_CASE_TEMPLATE("scaled_dot_product_attention: a fully masked query row gives zeros and LSE -inf", T, float, double) {
  const int64_t B = 1, H = 2, Tq = 4, Tk = 5, d = 3, dv = 2;
  auto q = random_tensor<T>({B, H, Tq, d}, -2, 2, 61), k = random_tensor<T>({B, H, Tk, d}, -2, 2, 62), v = random_tensor<T>({B, H, Tk, dv}, -1, 1, 63);
  SUBCASE("bool mask: row 1 drops every key") {
    Tensor m = bool_tensor({Tq, Tk}, [&](int64_t e) { return e / Tk != 1 && e % 3 != 0; });
    auto out = sdpa(q, k, v).input("Mask", m).run();
    for (int64_t h = 0; h < H; ++h) {
      CAPTURE(h);
      CHECK(row_zero(out["Out"], h * Tq + 1, dv));
      CHECK(out["LSE"].get(h * Tq + 1) == -inf);
      CHECK(std::isfinite(out["LSE"].get(h * Tq + 0)));
    }
    auto ref = ref_dense(q, k, v, &m);
    check_close(to_f64(out["Out"]), ref.out, tol<T>(), rtol<T>(), "Out");
    check_close(to_f64(out["LSE"]), ref.lse, tol<T>(), lse_rtol<T>(), "LSE");
  }
  SUBCASE("float mask: row 2 of head 1 all -inf") {
    Tensor m = make_tensor<T>({1, H, Tq, Tk}, [&](int64_t e) { return e / Tk == Tq + 2 ? -inf : double(e % 5) * 0.3 - 0.6; });
    auto out = sdpa(q, k, v).input("Mask", m).run();
    CHECK(row_zero(out["Out"], Tq + 2, dv));
    CHECK(out["LSE"].get(Tq + 2) == -inf);
    CHECK(!row_zero(out["Out"], 2, dv));  // head 0's row 2 is not masked
    auto ref = ref_dense(q, k, v, &m);
    check_close(to_f64(out["Out"]), ref.out, tol<T>(), rtol<T>(), "Out");
    check_close(to_f64(out["LSE"]), ref.lse, tol<T>(), lse_rtol<T>(), "LSE");
  }
  SUBCASE("causal with Tq > Tk: the first Tq - Tk queries see no key") {
    auto q2 = random_tensor<T>({B, H, 7, d}, -2, 2, 64);
    auto k2 = random_tensor<T>({B, H, 3, d}, -2, 2, 65), v2 = random_tensor<T>({B, H, 3, dv}, -1, 1, 66);
    auto out = sdpa(q2, k2, v2).attr("causal", true).run();
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < 7; ++i) {
        CAPTURE(h); CAPTURE(i);
        if (i < 4) {  // j <= i + 3 - 7 = i - 4: none for i < 4
          CHECK(row_zero(out["Out"], h * 7 + i, dv));
          CHECK(out["LSE"].get(h * 7 + i) == -inf);
        } else {
          CHECK(std::isfinite(out["LSE"].get(h * 7 + i)));
        }
      }
    auto ref = ref_dense(q2, k2, v2, nullptr, true);
    check_close(to_f64(out["Out"]), ref.out, tol<T>(), rtol<T>(), "Out");
    check_close(to_f64(out["LSE"]), ref.lse, tol<T>(), lse_rtol<T>(), "LSE");
  }
  SUBCASE("dropout on a fully masked row still gives zeros") {
    Tensor m = bool_tensor({Tq, Tk}, [&](int64_t e) { return e / Tk != 3; });
    auto out = sdpa(q, k, v).input("Mask", m).attr("dropout_prob", 0.4f).attr("fix_seed", true).attr("seed", 3).run();
    for (int64_t h = 0; h < H; ++h) {
      CHECK(row_zero(out["Out"], h * Tq + 3, dv));
      CHECK(out["LSE"].get(h * Tq + 3) == -inf);
    }
  }
}

TEST_CASE_TEMPLATE("scaled_dot_product_attention: causal with Tq < Tk is right-aligned (j <= i + Tk - Tq)", T, float, double) {
  const int64_t B = 2, H = 3, Tq = 4, Tk = 10, d = 6, dv = 5;
  auto q = random_tensor<T>({B, H, Tq, d}, -2, 2, 71), k = random_tensor<T>({B, H, Tk, d}, -2, 2, 72), v = random_tensor<T>({B, H, Tk, dv}, -1, 1, 73);
  auto causal = sdpa(q, k, v).attr("causal", true).run();
  auto full = sdpa(q, k, v).run();
  auto ref = ref_dense(q, k, v, nullptr, true);
  check_close(to_f64(causal["Out"]), ref.out, tol<T>(), rtol<T>(), "Out");
  check_close(to_f64(causal["LSE"]), ref.lse, tol<T>(), lse_rtol<T>(), "LSE");
  // The explicit bool mask of the rule gives the same.
  Tensor m = bool_tensor({Tq, Tk}, [&](int64_t e) { return e % Tk <= e / Tk + Tk - Tq; });
  auto masked = sdpa(q, k, v).input("Mask", m).run();
  check_close(to_f64(causal["Out"]), to_f64(masked["Out"]), tol<T>(), rtol<T>(), "causal vs its mask");
  // The last query row sees every key: equal to the non-causal row; the first does not.
  for (int64_t p = 0; p < B * H; ++p) {
    CAPTURE(p);
    const int64_t last = p * Tq + Tq - 1, first = p * Tq;
    CHECK(causal["LSE"].get(last) == doctest::Approx(full["LSE"].get(last)).epsilon(1e-5));
    for (int64_t c = 0; c < dv; ++c) CHECK(causal["Out"].get(last * dv + c) == doctest::Approx(full["Out"].get(last * dv + c)).epsilon(1e-4));
    CHECK(causal["LSE"].get(first) < full["LSE"].get(first));  // 7 of the 10 keys: a smaller sum of positive terms
  }
  // One query (decoding against cached keys): causal changes nothing.
  auto q1 = random_tensor<T>({B, H, 1, d}, -2, 2, 74);
  check_close(to_f64(sdpa(q1, k, v).attr("causal", true).run()["Out"]), to_f64(sdpa(q1, k, v).run()["Out"]), tol<T>(), rtol<T>(), "Tq = 1");
}

// ---------------------------------------------------------------------------------------------------------------
// 3. Ragged LoD form

TEST_CASE_TEMPLATE("scaled_dot_product_attention: LoD sequences {3, 1, 7, 130} equal the dense op and the reference per sequence", T, float, double) {
  const int64_t H = 3, d = 8, dv = 5;
  const LoD lod{{0, 3, 4, 11, 141}};
  const int64_t N = 141;
  LoDTensor q(random_tensor<T>({N, H, d}, -2, 2, 81), lod), k(random_tensor<T>({N, H, d}, -2, 2, 82), lod), v(random_tensor<T>({N, H, dv}, -1, 1, 83), lod);
  for (bool causal : {false, true}) {
    CAPTURE(causal);
    auto out = sdpa(q, k, v).attr("causal", causal).unknown_batch().run();
    CHECK(out["Out"].lod() == lod);
    REQUIRE(out["Out"].shape() == Shape{N, H, dv});
    REQUIRE(out["LSE"].shape() == Shape{N, H});
    auto ref = ref_ragged(q, k, v, causal);
    check_close(to_f64(out["Out"]), ref.out, tol<T>(), rtol<T>(), "Out");
    check_close(to_f64(out["LSE"]), ref.lse, tol<T>(), lse_rtol<T>(), "LSE");
    // Each sequence through the dense form, transposed back, equals the rows of the ragged one.
    for (size_t s = 0; s + 1 < lod[0].size(); ++s) {
      const int64_t r0 = int64_t(lod[0][s]), len = int64_t(lod[0][s + 1]) - r0;
      CAPTURE(s);
      auto dense = sdpa(ragged_to_dense(q, r0, len), ragged_to_dense(k, r0, len), ragged_to_dense(v, r0, len)).attr("causal", causal).run();
      check_close(to_f64(rows(out["Out"], r0, len)), to_f64(dense_to_ragged(dense["Out"])), tol<T>(), rtol<T>(), "Out vs dense");
      check_close(to_f64(rows(out["LSE"], r0, len)), to_f64(dense_to_ragged(dense["LSE"])), tol<T>(), lse_rtol<T>(), "LSE vs dense");
    }
  }
}

TEST_CASE_TEMPLATE("scaled_dot_product_attention: LoD and dense agree on equal-length sequences (the layouts transposed)", T, float, double) {
  const int64_t B = 3, H = 2, Tlen = 150, d = 4, dv = 6;
  auto q = random_tensor<T>({B, H, Tlen, d}, -2, 2, 91), k = random_tensor<T>({B, H, Tlen, d}, -2, 2, 92), v = random_tensor<T>({B, H, Tlen, dv}, -1, 1, 93);
  const LoD lod{{0, size_t(Tlen), size_t(2 * Tlen), size_t(3 * Tlen)}};
  LoDTensor rq(dense_to_ragged(q), lod), rk(dense_to_ragged(k), lod), rv(dense_to_ragged(v), lod);
  for (bool causal : {false, true})
    for (float p : {0.f, 0.25f}) {
      CAPTURE(causal); CAPTURE(p);
      // The dropout draws count (b, h) problems in one order in both forms, so even dropout agrees.
      auto dense = sdpa(q, k, v).attr("causal", causal).attr("dropout_prob", p).attr("fix_seed", true).attr("seed", 11).run();
      auto ragged = sdpa(rq, rk, rv).attr("causal", causal).attr("dropout_prob", p).attr("fix_seed", true).attr("seed", 11).run();
      check_close(to_f64(ragged["Out"]), to_f64(dense_to_ragged(dense["Out"])), tol<T>(), rtol<T>(), "Out");
      check_close(to_f64(ragged["LSE"]), to_f64(dense_to_ragged(dense["LSE"])), tol<T>(), lse_rtol<T>(), "LSE");
      auto ref = ref_dense(q, k, v, nullptr, causal, 0, {double(p), 11});
      check_close(to_f64(dense["Out"]), ref.out, tol<T>(), rtol<T>(), "dense Out vs reference");
    }
}

TEST_CASE_TEMPLATE("scaled_dot_product_attention: cross attention over another key LoD; Out keeps Q's LoD", T, float, double) {
  const int64_t H = 2, d = 5, dv = 3;
  const LoD qlod{{0, 2, 2, 5, 6, 206}}, klod{{0, 4, 7, 8, 8 + 133, 8 + 133 + 3}};  // an empty query sequence; Tq > Tk, Tq < Tk
  LoDTensor q(random_tensor<T>({206, H, d}, -2, 2, 101), qlod);
  LoDTensor k(random_tensor<T>({144, H, d}, -2, 2, 102), klod), v(random_tensor<T>({144, H, dv}, -1, 1, 103), klod);
  for (bool causal : {false, true}) {
    CAPTURE(causal);
    auto out = sdpa(q, k, v).attr("causal", causal).run();
    CHECK(out["Out"].lod() == qlod);
    auto ref = ref_ragged(q, k, v, causal);
    check_close(to_f64(out["Out"]), ref.out, tol<T>(), rtol<T>(), "Out");
    check_close(to_f64(out["LSE"]), ref.lse, tol<T>(), lse_rtol<T>(), "LSE");
  }
  // An empty key sequence: its queries see no key (zeros, LSE -inf); the other sequences are unaffected.
  const LoD k2lod{{0, 4, 7, 7, 12, 144}};  // sequence 2 (query rows 2..4) has no keys
  LoDTensor k2(Tensor(k), k2lod), v2(Tensor(v), k2lod);
  auto out = sdpa(q, k2, v2).run();
  for (int64_t i = 2; i < 5; ++i)
    for (int64_t h = 0; h < H; ++h) {
      CAPTURE(i); CAPTURE(h);
      CHECK(row_zero(out["Out"], i * H + h, dv));
      CHECK(out["LSE"].get(i * H + h) == -inf);
    }
  auto ref = ref_ragged(q, k2, v2);
  check_close(to_f64(out["Out"]), ref.out, tol<T>(), rtol<T>(), "Out, an empty key sequence");
  check_close(to_f64(out["LSE"]), ref.lse, tol<T>(), lse_rtol<T>(), "LSE, an empty key sequence");
}

// ---------------------------------------------------------------------------------------------------------------
// 4. Gradients (f64 central differences)

namespace {
struct Small {
  Tensor q, k, v;
};
Small small_dense(int64_t B, int64_t H, int64_t Tq, int64_t Tk, int64_t d, int64_t dv, uint64_t seed) {
  return {random_tensor<double>({B, H, Tq, d}, -1.5, 1.5, seed), random_tensor<double>({B, H, Tk, d}, -1.5, 1.5, seed + 1),
          random_tensor<double>({B, H, Tk, dv}, -1, 1, seed + 2)};
}
}  // namespace

TEST_CASE("scaled_dot_product_attention: grad of Q, K, V matches finite differences (dense)") {
  auto s = small_dense(2, 2, 3, 4, 3, 2, 111);
  sdpa(s.q, s.k, s.v).check_grad({"Q", "K", "V"}, {"Out"});
}

TEST_CASE("scaled_dot_product_attention: grad matches finite differences (dense, causal, Tq < Tk and Tq > Tk)") {
  auto s = small_dense(1, 2, 3, 5, 3, 2, 121);
  sdpa(s.q, s.k, s.v).attr("causal", true).check_grad({"Q", "K", "V"}, {"Out"});
  auto t = small_dense(1, 2, 4, 4, 3, 3, 124);
  sdpa(t.q, t.k, t.v).attr("causal", true).check_grad({"Q", "K", "V"}, {"Out"});
  auto u = small_dense(1, 1, 5, 3, 2, 2, 127);  // the first two rows see no key
  sdpa(u.q, u.k, u.v).attr("causal", true).check_grad({"Q", "K", "V"}, {"Out"});
}

TEST_CASE("scaled_dot_product_attention: grad matches finite differences (dense, additive mask)") {
  auto s = small_dense(2, 2, 3, 4, 3, 2, 131);
  Tensor m = random_tensor<double>({2, 1, 3, 4}, -2, 1, 134);
  m.data<double>()[5] = -inf;
  sdpa(s.q, s.k, s.v).input("Mask", m).check_grad({"Q", "K", "V"}, {"Out"});
  Tensor m2 = random_tensor<double>({3, 4}, -2, 1, 135);
  sdpa(s.q, s.k, s.v).input("Mask", m2).attr("causal", true).check_grad({"Q", "K", "V"}, {"Out"});
}

TEST_CASE("scaled_dot_product_attention: grad matches finite differences (dense, bool mask with a fully masked row)") {
  auto s = small_dense(1, 2, 4, 4, 3, 2, 141);
  // row 2 drops every key: no gradient flows from it (zeros, not NaN)
  Tensor m = bool_tensor({1, 2, 4, 4}, [](int64_t e) { return (e / 4) % 4 != 2 && e % 5 != 1; });
  sdpa(s.q, s.k, s.v).input("Mask", m).check_grad({"Q", "K", "V"}, {"Out"});
  // The gradient of the masked row of Q is exactly 0 (checked on the grad op's own output).
  auto g = run_grads(sdpa(s.q, s.k, s.v).input("Mask", m), {{"Q", s.q}, {"K", s.k}, {"V", s.v}, {"Mask", m}}, random_tensor<double>({1, 2, 4, 2}, -1, 1, 149));
  for (int64_t h = 0; h < 2; ++h) {
    CAPTURE(h);
    CHECK(row_zero(g[0], h * 4 + 2, 3));
    CHECK(!row_zero(g[0], h * 4 + 1, 3));
  }
  for (auto& t : g)
    for (int64_t i = 0; i < t.numel(); ++i) REQUIRE(std::isfinite(t.get(i)));
}

TEST_CASE("scaled_dot_product_attention: grad matches finite differences (LoD, self and cross, causal)") {
  const LoD qlod{{0, 2, 3, 6}}, klod{{0, 3, 5, 6}};
  LoDTensor q(random_tensor<double>({6, 2, 3}, -1.5, 1.5, 151), qlod);
  LoDTensor k(random_tensor<double>({6, 2, 3}, -1.5, 1.5, 152), klod), v(random_tensor<double>({6, 2, 2}, -1, 1, 153), klod);
  sdpa(q, k, v).check_grad({"Q", "K", "V"}, {"Out"});
  sdpa(q, k, v).attr("causal", true).check_grad({"Q", "K", "V"}, {"Out"});
  LoDTensor ks(Tensor(k), qlod), vs(Tensor(v), qlod);
  sdpa(q, ks, vs).attr("causal", true).check_grad({"Q", "K", "V"}, {"Out"});
}

TEST_CASE("scaled_dot_product_attention: grad matches finite differences (scale attr)") {
  auto s = small_dense(1, 2, 3, 4, 4, 2, 161);
  sdpa(s.q, s.k, s.v).attr("scale", 0.8f).check_grad({"Q", "K", "V"}, {"Out"});
  sdpa(s.q, s.k, s.v).attr("scale", 1.7f).attr("causal", true).check_grad({"Q", "K", "V"}, {"Out"});
}

TEST_CASE("scaled_dot_product_attention: grad matches finite differences (dropout with a fixed seed)") {
  auto s = small_dense(2, 2, 3, 4, 3, 2, 171);
  sdpa(s.q, s.k, s.v).attr("dropout_prob", 0.3f).attr("fix_seed", true).attr("seed", 5).check_grad({"Q", "K", "V"}, {"Out"});
  sdpa(s.q, s.k, s.v).attr("dropout_prob", 0.5f).attr("fix_seed", true).attr("seed", 9).attr("causal", true).check_grad({"Q", "K", "V"}, {"Out"});
  const LoD qlod{{0, 2, 5}}, klod{{0, 3, 4}};
  LoDTensor q(random_tensor<double>({5, 2, 3}, -1.5, 1.5, 175), qlod);
  LoDTensor k(random_tensor<double>({4, 2, 3}, -1.5, 1.5, 176), klod), v(random_tensor<double>({4, 2, 2}, -1, 1, 177), klod);
  sdpa(q, k, v).attr("dropout_prob", 0.4f).attr("fix_seed", true).attr("seed", 13).check_grad({"Q", "K", "V"}, {"Out"});
}

TEST_CASE_TEMPLATE("scaled_dot_product_attention: grads over several key and query tiles match the analytic reference", T, float, double) {
  // Finite differences are too slow at T > 128; the reference's backward (checked against them above through
  // the kernels on small shapes) stands in: dV = (P Z)^T dO, dS = P (Z dO V^T - rowsum), dQ = scale dS K, dK = scale dS^T Q.
  const double at = std::is_same_v<T, float> ? 1e-4 : 1e-10, rt = std::is_same_v<T, float> ? 1e-3 : 1e-8;
  auto compare = [&](const std::vector<LoDTensor>& g, const Ref& ref) {
    check_close(to_f64(g[0]), ref.dq, at, rt, "Q@GRAD");
    check_close(to_f64(g[1]), ref.dk, at, rt, "K@GRAD");
    check_close(to_f64(g[2]), ref.dv, at, rt, "V@GRAD");
  };
  const int64_t B = 1, H = 2, Tq = 300, Tk = 600, d = 8, dv = 4;  // 2 query tiles, 2 key tiles
  auto q = random_tensor<T>({B, H, Tq, d}, -2, 2, 211), k = random_tensor<T>({B, H, Tk, d}, -2, 2, 212), v = random_tensor<T>({B, H, Tk, dv}, -1, 1, 213);
  auto dout = random_tensor<T>({B, H, Tq, dv}, -1, 1, 214);
  const std::map<std::string, LoDTensor> in{{"Q", q}, {"K", k}, {"V", v}};
  for (bool causal : {false, true})
    for (float p : {0.f, 0.2f}) {
      CAPTURE(causal); CAPTURE(p);
      auto op = sdpa(q, k, v).attr("causal", causal).attr("dropout_prob", p).attr("fix_seed", true).attr("seed", 21);
      compare(run_grads(op, in, dout), ref_dense(q, k, v, nullptr, causal, 0, {double(p), 21}, &dout));
    }
  // A bool mask with fully masked rows, and causal; an additive mask per head.
  Tensor bm = bool_tensor({Tq, Tk}, [&](int64_t e) { return (e / Tk) % 37 != 5 && (e * 7919) % 11 != 0; });
  auto with_bool = in;
  with_bool["Mask"] = bm;
  compare(run_grads(sdpa(q, k, v).input("Mask", bm).attr("causal", true), with_bool, dout), ref_dense(q, k, v, &bm, true, 0, {}, &dout));
  Tensor fm = random_tensor<T>({1, H, Tq, Tk}, -2, 1, 215);
  auto with_float = in;
  with_float["Mask"] = fm;
  compare(run_grads(sdpa(q, k, v).input("Mask", fm).attr("scale", 0.4f), with_float, dout), ref_dense(q, k, v, &fm, false, 0.4f, {}, &dout));
  // Ragged: a long sequence among short ones, cross attention, causal and dropout.
  const LoD qlod{{0, 3, 133, 134}}, klod{{0, 5, 145, 146}};
  LoDTensor rq(random_tensor<T>({134, H, d}, -2, 2, 216), qlod);
  LoDTensor rk(random_tensor<T>({146, H, d}, -2, 2, 217), klod), rv(random_tensor<T>({146, H, dv}, -1, 1, 218), klod);
  LoDTensor rdout(random_tensor<T>({134, H, dv}, -1, 1, 219), qlod);
  auto rop = sdpa(rq, rk, rv).attr("causal", true).attr("dropout_prob", 0.3f).attr("fix_seed", true).attr("seed", 4);
  compare(run_grads(rop, {{"Q", rq}, {"K", rk}, {"V", rv}}, rdout), ref_ragged(rq, rk, rv, true, 0, {double(0.3f), 4}, &rdout));
}

// ---------------------------------------------------------------------------------------------------------------
// 4b. Small heads (d = dv = 8, 16 or 32, keys within one tile): the kernel goes row by row instead of by GEMM tiles.

TEST_CASE_TEMPLATE("scaled_dot_product_attention: small heads (8, 16, 32) row by row: Out, LSE and grads against the reference", T, float, double) {
  const double at = std::is_same_v<T, float> ? 1e-4 : 1e-10, rt = std::is_same_v<T, float> ? 1e-3 : 1e-8;
  auto compare = [&](const std::map<std::string, LoDTensor>& out, const std::vector<LoDTensor>& g, const Ref& ref) {
    check_close(to_f64(out.at("Out")), ref.out, tol<T>(), rtol<T>(), "Out");
    check_close(to_f64(out.at("LSE")), ref.lse, tol<T>(), lse_rtol<T>(), "LSE");
    check_close(to_f64(g[0]), ref.dq, at, rt, "Q@GRAD");
    check_close(to_f64(g[1]), ref.dk, at, rt, "K@GRAD");
    check_close(to_f64(g[2]), ref.dv, at, rt, "V@GRAD");
  };
  uint64_t seed = 700;
  for (int64_t d : {8, 16, 32}) {
    CAPTURE(d);
    // Tq < Tk, Tq > Tk (causal rows that see no key) and 100 x 100, as fortune_gpt's chunks are.
    for (auto [Tq, Tk] : {std::pair<int64_t, int64_t>{7, 13}, {13, 7}, {100, 100}}) {
      CAPTURE(Tq); CAPTURE(Tk);
      const int64_t B = 2, H = 2;
      auto q = random_tensor<T>({B, H, Tq, d}, -2, 2, seed++), k = random_tensor<T>({B, H, Tk, d}, -2, 2, seed++);
      auto v = random_tensor<T>({B, H, Tk, d}, -1, 1, seed++), dout = random_tensor<T>({B, H, Tq, d}, -1, 1, seed++);
      const std::map<std::string, LoDTensor> in{{"Q", q}, {"K", k}, {"V", v}};
      for (bool causal : {false, true})
        for (float p : {0.f, 0.3f}) {
          CAPTURE(causal); CAPTURE(p);
          auto op = sdpa(q, k, v).attr("causal", causal).attr("dropout_prob", p).attr("fix_seed", true).attr("seed", 17);
          compare(op.run(), run_grads(op, in, dout), ref_dense(q, k, v, nullptr, causal, 0, {double(p), 17}, &dout));
        }
      // A bool mask with a fully masked row, with causal; an additive mask per head with the scale attr.
      Tensor bm = bool_tensor({Tq, Tk}, [&](int64_t e) { return e / Tk != 3 && (e * 7919) % 5 != 0; });
      auto with_bool = in;
      with_bool["Mask"] = bm;
      auto bop = sdpa(q, k, v).input("Mask", bm).attr("causal", true);
      compare(bop.run(), run_grads(bop, with_bool, dout), ref_dense(q, k, v, &bm, true, 0, {}, &dout));
      Tensor fm = random_tensor<T>({1, H, Tq, Tk}, -2, 1, seed++);
      auto with_float = in;
      with_float["Mask"] = fm;
      auto fop = sdpa(q, k, v).input("Mask", fm).attr("scale", 0.4f);
      compare(fop.run(), run_grads(fop, with_float, dout), ref_dense(q, k, v, &fm, false, 0.4f, {}, &dout));
    }
    // Ragged, self (causal) and cross attention with dropout.
    const LoD qlod{{0, 3, 40, 41}}, klod{{0, 5, 60, 61}};
    LoDTensor rq(random_tensor<T>({41, 2, d}, -2, 2, seed++), qlod);
    LoDTensor rk(random_tensor<T>({61, 2, d}, -2, 2, seed++), klod), rv(random_tensor<T>({61, 2, d}, -1, 1, seed++), klod);
    LoDTensor rdout(random_tensor<T>({41, 2, d}, -1, 1, seed++), qlod);
    auto cross = sdpa(rq, rk, rv).attr("dropout_prob", 0.3f).attr("fix_seed", true).attr("seed", 4);
    compare(cross.run(), run_grads(cross, {{"Q", rq}, {"K", rk}, {"V", rv}}, rdout), ref_ragged(rq, rk, rv, false, 0, {double(0.3f), 4}, &rdout));
    LoDTensor sk(Tensor(rk.slice(0, 41).clone()), qlod), sv(Tensor(rv.slice(0, 41).clone()), qlod);
    auto self = sdpa(rq, sk, sv).attr("causal", true);
    compare(self.run(), run_grads(self, {{"Q", rq}, {"K", sk}, {"V", sv}}, rdout), ref_ragged(rq, sk, sv, true, 0, {}, &rdout));
  }
}

TEST_CASE("scaled_dot_product_attention: small heads: grad matches finite differences (causal, masked, ragged, dropout)") {
  auto s = small_dense(1, 2, 5, 6, 8, 8, 811);
  sdpa(s.q, s.k, s.v).attr("causal", true).check_grad({"Q", "K", "V"}, {"Out"});
  Tensor m = bool_tensor({1, 2, 5, 6}, [](int64_t e) { return (e / 6) % 5 != 2 && e % 7 != 1; });
  sdpa(s.q, s.k, s.v).input("Mask", m).check_grad({"Q", "K", "V"}, {"Out"});
  sdpa(s.q, s.k, s.v).attr("dropout_prob", 0.3f).attr("fix_seed", true).attr("seed", 5).check_grad({"Q", "K", "V"}, {"Out"});
  const LoD lod{{0, 2, 5}};
  LoDTensor q(random_tensor<double>({5, 2, 8}, -1.5, 1.5, 815), lod);
  LoDTensor k(random_tensor<double>({5, 2, 8}, -1.5, 1.5, 816), lod), v(random_tensor<double>({5, 2, 8}, -1, 1, 817), lod);
  sdpa(q, k, v).attr("causal", true).check_grad({"Q", "K", "V"}, {"Out"});
}

// ---------------------------------------------------------------------------------------------------------------
// 5. Dropout

TEST_CASE_TEMPLATE("scaled_dot_product_attention: dropout keeps weight (i, j) when draw n of CounterRng(seed) >= p, scaled by 1 / (1 - p)", T, float, double) {
  const int64_t B = 2, H = 3, Tq = 5, Tk = 140, d = 4, dv = 3;
  auto q = random_tensor<T>({B, H, Tq, d}, -2, 2, 181), k = random_tensor<T>({B, H, Tk, d}, -2, 2, 182), v = random_tensor<T>({B, H, Tk, dv}, -1, 1, 183);
  for (float p : {0.1f, 0.3f, 0.7f})
    for (bool causal : {false, true}) {
      CAPTURE(p); CAPTURE(causal);
      auto out = sdpa(q, k, v).attr("dropout_prob", p).attr("fix_seed", true).attr("seed", 1234).attr("causal", causal).run();
      auto ref = ref_dense(q, k, v, nullptr, causal, 0, {double(p), 1234});
      check_close(to_f64(out["Out"]), ref.out, tol<T>(), rtol<T>(), "Out");
      // LSE is that of the scores, before dropout.
      check_close(to_f64(out["LSE"]), ref_dense(q, k, v, nullptr, causal).lse, tol<T>(), lse_rtol<T>(), "LSE");
      REQUIRE(out["Seed"].dtype() == i64);
      CHECK(out["Seed"].get(0) == 1234.0);
    }
  // Ragged: the problems (s, h) s-major, each Tq_s x Tk_s draws.
  const LoD qlod{{0, 3, 4, 10}}, klod{{0, 2, 9, 140}};
  LoDTensor rq(random_tensor<T>({10, H, d}, -2, 2, 184), qlod);
  LoDTensor rk(random_tensor<T>({140, H, d}, -2, 2, 185), klod), rv(random_tensor<T>({140, H, dv}, -1, 1, 186), klod);
  auto out = sdpa(rq, rk, rv).attr("dropout_prob", 0.35f).attr("fix_seed", true).attr("seed", 77).attr("causal", true).run();
  check_close(to_f64(out["Out"]), ref_ragged(rq, rk, rv, true, 0, {double(0.35f), 77}).out, tol<T>(), rtol<T>(), "ragged Out");
  // The dropout changes the result (the reference without it differs).
  double diff = 0;
  auto plain = ref_dense(q, k, v).out;
  auto dropped = sdpa(q, k, v).attr("dropout_prob", 0.3f).attr("fix_seed", true).attr("seed", 1234).run()["Out"];
  for (int64_t i = 0; i < plain.numel(); ++i) diff = std::max(diff, std::abs(plain.get(i) - dropped.get(i)));
  CHECK(diff > 0.01);
}

TEST_CASE("scaled_dot_product_attention: the Seed output is uint32(seed) with fix_seed, and reproduces the keep mask without") {
  auto q = random_tensor<double>({1, 2, 3, 4}, -2, 2, 191), k = random_tensor<double>({1, 2, 6, 4}, -2, 2, 192), v = random_tensor<double>({1, 2, 6, 2}, -1, 1, 193);
  // A negative seed attr: uint64(uint32(-7)).
  auto neg = sdpa(q, k, v).attr("dropout_prob", 0.5f).attr("fix_seed", true).attr("seed", -7).run();
  const uint64_t want = uint64_t(uint32_t(int32_t(-7)));
  CHECK(uint64_t(neg["Seed"].data<int64_t>()[0]) == want);
  check_close(neg["Out"], ref_dense(q, k, v, nullptr, false, 0, {double(0.5f), want}).out, 1e-10, 1e-10, "Out, seed -7");
  // Two runs with one fixed seed agree exactly.
  auto again = sdpa(q, k, v).attr("dropout_prob", 0.5f).attr("fix_seed", true).attr("seed", -7).run();
  check_close(again["Out"], neg["Out"], 0, 0, "repeat");
  // Without fix_seed the seed drawn is the one in Seed: the reference keyed by it gives Out.
  auto unfixed = sdpa(q, k, v).attr("dropout_prob", 0.5f).run();
  const uint64_t drawn = uint64_t(unfixed["Seed"].data<int64_t>()[0]);
  check_close(unfixed["Out"], ref_dense(q, k, v, nullptr, false, 0, {double(0.5f), drawn}).out, 1e-10, 1e-10, "Out, drawn seed");
}

TEST_CASE_TEMPLATE("scaled_dot_product_attention: is_test ignores dropout_prob", T, float, double) {
  auto q = random_tensor<T>({2, 3, 7, 4}, -2, 2, 201), k = random_tensor<T>({2, 3, 9, 4}, -2, 2, 202), v = random_tensor<T>({2, 3, 9, 3}, -1, 1, 203);
  auto out = sdpa(q, k, v).attr("dropout_prob", 0.6f).attr("is_test", true).attr("fix_seed", true).attr("seed", 3).run();
  auto ref = ref_dense(q, k, v);
  check_close(to_f64(out["Out"]), ref.out, tol<T>(), rtol<T>(), "Out");
  check_close(to_f64(out["LSE"]), ref.lse, tol<T>(), lse_rtol<T>(), "LSE");
  // And dropout_prob 0 in training is no dropout either.
  check_close(to_f64(sdpa(q, k, v).attr("dropout_prob", 0.f).run()["Out"]), ref.out, tol<T>(), rtol<T>(), "p = 0");
}

// ---------------------------------------------------------------------------------------------------------------
// 6. Errors

TEST_CASE("scaled_dot_product_attention: bad shapes, a Mask on LoD input and bad dtypes are oar::Errors naming the shapes") {
  const std::string op = "scaled_dot_product_attention";
  // Head size d of Q and K differ (dense and ragged).
  auto d_dense = error_of([] { sdpa(random_tensor<float>({2, 3, 4, 8}), random_tensor<float>({2, 3, 5, 6}), random_tensor<float>({2, 3, 5, 6})).build(); });
  test::check_contains(d_dense, {op, "head size", "[2, 3, 4, 8]", "[2, 3, 5, 6]"});
  auto d_lod = error_of([] {
    sdpa(LoDTensor(random_tensor<float>({5, 2, 8}), {{0, 2, 5}}), LoDTensor(random_tensor<float>({6, 2, 4}), {{0, 3, 6}}),
         LoDTensor(random_tensor<float>({6, 2, 4}), {{0, 3, 6}}))
        .build();
  });
  test::check_contains(d_lod, {"head size", "[5, 2, 8]", "[6, 2, 4]"});
  // Dense B, H or Tk disagree.
  auto bh = error_of([] { sdpa(random_tensor<float>({2, 3, 4, 8}), random_tensor<float>({2, 2, 5, 8}), random_tensor<float>({2, 2, 5, 8})).build(); });
  CHECK(contains(bh, op));
  CHECK(contains(bh, "[2, 2, 5, 8]"));
  auto tk = error_of([] { sdpa(random_tensor<float>({2, 3, 4, 8}), random_tensor<float>({2, 3, 5, 8}), random_tensor<float>({2, 3, 6, 8})).build(); });
  CHECK(contains(tk, "[2, 3, 6, 8]"));
  // A Mask on LoD input.
  auto lod_mask = error_of([] {
    LoDTensor x(random_tensor<float>({5, 2, 4}), {{0, 2, 5}});
    sdpa(x, x, x).input("Mask", random_tensor<float>({5, 5})).build();
  });
  test::check_contains(lod_mask, {op, "Mask", "[5, 2, 4]"});
  // A Mask of the wrong size or dtype.
  auto mshape = error_of([] {
    sdpa(random_tensor<float>({2, 3, 4, 8}), random_tensor<float>({2, 3, 5, 8}), random_tensor<float>({2, 3, 5, 8})).input("Mask", random_tensor<float>({4, 6})).build();
  });
  CHECK(contains(mshape, "Mask"));
  CHECK(contains(mshape, "[4, 6]"));
  auto mbatch = error_of([] {
    sdpa(random_tensor<float>({2, 3, 4, 8}), random_tensor<float>({2, 3, 5, 8}), random_tensor<float>({2, 3, 5, 8})).input("Mask", random_tensor<float>({3, 1, 4, 5})).build();
  });
  CHECK(contains(mbatch, "[3, 1, 4, 5]"));
  auto mtype = error_of([] {
    sdpa(random_tensor<float>({2, 3, 4, 8}), random_tensor<float>({2, 3, 5, 8}), random_tensor<float>({2, 3, 5, 8})).input("Mask", random_tensor<double>({4, 5})).build();
  });
  CHECK(contains(mtype, "Mask"));
  CHECK(contains(mtype, "f64"));
  // Bad dtypes: integer Q; Q, K and V of different float types.
  auto ity = error_of([] { sdpa(random_tensor<int32_t>({2, 3, 4, 8}, 0, 5), random_tensor<int32_t>({2, 3, 5, 8}, 0, 5), random_tensor<int32_t>({2, 3, 5, 8}, 0, 5)).build(); });
  test::check_contains(ity, {op, "i32", "[2, 3, 4, 8]"});
  auto mixed = error_of([] { sdpa(random_tensor<float>({2, 3, 4, 8}), random_tensor<double>({2, 3, 5, 8}), random_tensor<float>({2, 3, 5, 8})).build(); });
  CHECK(contains(mixed, "f32"));
  CHECK(contains(mixed, "f64"));
  // Ranks: Q neither [B, H, Tq, d] nor [Nq, H, d]; K of another rank.
  auto rank = error_of([] { sdpa(random_tensor<float>({4, 8}), random_tensor<float>({5, 8}), random_tensor<float>({5, 8})).build(); });
  CHECK(contains(rank, "[4, 8]"));
  auto rank2 = error_of([] { sdpa(random_tensor<float>({2, 3, 4, 8}), random_tensor<float>({15, 8}), random_tensor<float>({15, 8})).build(); });
  CHECK(contains(rank2, "[15, 8]"));
  // Attribute checks: dropout_prob in [0, 1), scale >= 0.
  auto drop = error_of([] { sdpa(random_tensor<float>({1, 1, 2, 2}), random_tensor<float>({1, 1, 2, 2}), random_tensor<float>({1, 1, 2, 2})).attr("dropout_prob", 1.f).build(); });
  CHECK(contains(drop, "dropout_prob"));
  auto neg = error_of([] { sdpa(random_tensor<float>({1, 1, 2, 2}), random_tensor<float>({1, 1, 2, 2}), random_tensor<float>({1, 1, 2, 2})).attr("scale", -1.f).build(); });
  CHECK(contains(neg, "scale"));
}

TEST_CASE("scaled_dot_product_attention: LoD inputs with different sequence counts are an oar::Error at run time") {
  LoDTensor q(random_tensor<float>({5, 2, 4}), {{0, 2, 5}}), k(random_tensor<float>({6, 2, 4}), {{0, 1, 3, 6}}), v(random_tensor<float>({6, 2, 4}), {{0, 1, 3, 6}});
  auto msg = error_of([&] { sdpa(q, k, v).run(); });
  CHECK(contains(msg, "scaled_dot_product_attention"));
}
