// tests/support/op_check.hpp: THE op harness. One op in a fresh program: (1) shape inference at build time
// against the run-time shape, (2) forward against a plain reference, (3) analytic gradients (from the op's
// grad maker and grad kernel) against central differences in f64, as Fluid's OpTest does.
#pragma once
#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <optional>
#include <random>
#include <string_view>

#include <oar/oar.hpp>

namespace oar::test {

/// Uniform random tensor of `shape` in [lo, hi) with a fixed seed.
template <class T>
Tensor random_tensor(Shape shape, double lo = -1, double hi = 1, uint64_t seed = 7) {
  std::mt19937_64 rng(seed);
  std::vector<T> v(size_t(shape.numel()));
  if constexpr (std::is_floating_point_v<T>) {
    std::uniform_real_distribution<double> d(lo, hi);
    for (auto& x : v) x = T(d(rng));
  } else {
    std::uniform_int_distribution<int64_t> d(int64_t(lo), int64_t(hi) - 1);
    for (auto& x : v) x = T(d(rng));
  }
  return Tensor::from<T>(v, shape);
}

/// [n, d] rows of positive weights, each normalized to sum 1: soft labels for the cross entropies.
template <class T>
Tensor soft_labels(int64_t n, int64_t d, uint64_t seed) {
  Tensor t = random_tensor<T>({n, d}, 0.05, 1, seed);
  T* p = t.data<T>();
  for (int64_t i = 0; i < n; ++i) {
    T s = 0;
    for (int64_t j = 0; j < d; ++j) s += p[i * d + j];
    for (int64_t j = 0; j < d; ++j) p[i * d + j] /= s;
  }
  return t;
}

/// A one-element bool tensor [1]: a condition to feed.
inline LoDTensor flag_of(bool v) {
  Tensor t(Shape{1}, boolean);
  t.data<bool>()[0] = v;
  return LoDTensor(t);
}

/// A tensor of `shape` whose elements are f(i) for the flat index i.
template <class T, class F>
Tensor make_tensor(Shape shape, F f) {
  std::vector<T> v(size_t(shape.numel()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = T(f(int64_t(i)));
  return Tensor::from<T>(v, shape);
}

inline Tensor to_f64(const Tensor& t) {
  std::vector<double> v(size_t(t.numel()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = t.get(int64_t(i));
  return Tensor::from<double>(v, t.shape());
}

/// Element-wise |a - b| <= atol + rtol * |b|, with a message naming the first mismatch.
inline void check_close(const Tensor& a, const Tensor& b, double atol = 1e-5, double rtol = 1e-5, const std::string& what = "") {
  REQUIRE_MESSAGE(a.shape() == b.shape(), what << ": shape " << a.shape().str() << " vs expected " << b.shape().str());
  for (int64_t i = 0; i < a.numel(); ++i) {
    double x = a.get(i), y = b.get(i);
    bool ok = (std::isnan(x) && std::isnan(y)) || (x == y) || std::abs(x - y) <= atol + rtol * std::abs(y);
    if (!ok) {
      FAIL_CHECK(what << ": element " << i << " is " << x << ", expected " << y);
      return;
    }
  }
}

/// One op under test. Inputs are fed as data; outputs are fetched by slot.
class OpTest {
 public:
  explicit OpTest(std::string type) : type_(std::move(type)) {}

  OpTest& input(const std::string& slot, LoDTensor t) {
    inputs_.push_back({slot, {std::move(t)}});
    return *this;
  }
  OpTest& inputs(const std::string& slot, std::vector<LoDTensor> ts) {
    inputs_.push_back({slot, std::move(ts)});
    return *this;
  }
  /// Input `slot` as SelectedRows (sparse rows, a sparse gradient). Not a feed: run() puts it in the run's scope
  /// with its value copied to the run's place (check_grad does not take it).
  OpTest& selected_rows_input(const std::string& slot, SelectedRows sr) {
    sparse_inputs_.push_back({slot, std::move(sr)});
    return *this;
  }
  /// Leaves this case out of the automatic comparison with cuda:0 (run(), check_grad), saying why: a case whose
  /// CUDA kernel answers differently by design (NaN where the CPU's check throws needs the data on the host).
  OpTest& cpu_only(std::string why) {
    cpu_only_ = std::move(why);
    return *this;
  }
  /// Declares an output slot with `n` variables (single-output slots are declared automatically from the schema).
  OpTest& outputs(const std::string& slot, size_t n) {
    out_counts_[slot] = n;
    return *this;
  }
  template <class V>
  OpTest& attr(const std::string& name, V v) {
    attrs_[name] = to_attribute(std::move(v));
    return *this;
  }
  /// Leaves out run()'s check of each output against its inferred shape and dtype: for a grad op run alone,
  /// whose outputs' shapes come from forward variables that are not its inputs.
  OpTest& skip_inferred_check() {
    check_inferred_ = false;
    return *this;
  }
  /// Declares input dim 0 unknown (-1) at build time, as a batch dimension is.
  OpTest& unknown_batch(bool u = true) {
    unknown_batch_ = u;
    return *this;
  }

  /// The same case with every f32 input (dense and sparse) widened to f64: its outputs are the f32 case's exact
  /// answer up to f64 rounding, which tells how far the f32 kernels are from it.
  OpTest widened() const {
    OpTest w = *this;
    for (auto& [slot, ts] : w.inputs_)
      for (LoDTensor& t : ts)
        if (t.dtype() == f32) t = LoDTensor(to_f64(t), t.lod());
    for (auto& [slot, sr] : w.sparse_inputs_)
      if (sr.value.dtype() == f32) sr.value = to_f64(sr.value);
    return w;
  }
  bool has_f32_input() const {
    for (auto& [slot, ts] : inputs_)
      for (const LoDTensor& t : ts)
        if (t.dtype() == f32) return true;
    for (auto& [slot, sr] : sparse_inputs_)
      if (sr.value.dtype() == f32) return true;
    return false;
  }

  /// Builds the one-op program (validating the op and inferring shapes); exposes it for inspection.
  Program build() const {
    Program p;
    Block& b = p.global_block();
    Operator op(type_);
    for (auto& [slot, ts] : inputs_) {
      std::vector<std::string> names;
      for (size_t i = 0; i < ts.size(); ++i) {
        std::string n = var_name(slot, i);
        Shape s = ts[i].shape();
        if (unknown_batch_ && s.rank() > 0) s[0] = -1;
        b.create_var(n, {.dtype = ts[i].dtype(), .shape = s, .lod_level = ts[i].lod_level()});
        names.push_back(n);
      }
      op.set_input(slot, names);
    }
    for (auto& [slot, sr] : sparse_inputs_) {
      Shape s = sr.value.shape();
      if (s.rank() > 0) s[0] = sr.height;
      b.create_var(var_name(slot, 0), {.dtype = sr.value.dtype(), .shape = s, .kind = VarKind::selected_rows});
      op.set_input(slot, {var_name(slot, 0)});
    }
    const OpDef& d = op_def(type_);
    for (auto& s : d.outputs) {
      size_t n = out_counts_.count(s.name) ? out_counts_.at(s.name) : 1;
      std::vector<std::string> names;
      for (size_t i = 0; i < n; ++i) names.push_back(var_name(s.name, i));
      op.set_output(s.name, names);
    }
    for (auto& [k, v] : attrs_) op.set_attr(k, v);
    add_op(b, op);
    return p;
  }

  /// Runs the op; returns every output by "<slot>" (or "<slot>#i" for i > 0). Checks the run-time shape
  /// of each output against the one shape inference gave. An input whose LoD does not fit its rows (set, then
  /// resized) is placed in the scope instead of fed: the executor refuses such a feed, and the tensor stands
  /// for one an earlier op left behind, which only the op's own LoD check can meet.
  /// On `place` the inputs are copied there, and the outputs come back to the host.
  /// run() with no place runs on the CPU and then, where a CUDA device is present, on cuda:0 too, comparing
  /// every output with the CPU's (same_as_cpu): every op test is also its op's CPU-against-CUDA case.
  std::map<std::string, LoDTensor> run() const {
    auto out = run(cpu());
    if (auto again = second_place(build())) same_as_cpu(out, run(*again), type_);
    return out;
  }
  std::map<std::string, LoDTensor> run(Place place) const {
    Program p = build();
    Scope scope;
    Executor exe(place);
    FeedMap feeds;
    for (auto& [slot, ts] : inputs_)
      for (size_t i = 0; i < ts.size(); ++i) {
        const LoDTensor& t = ts[i];
        if (!t.lod().empty() && !lod_error(t.lod(), t.rank() > 0 ? t.dim(0) : 0).empty()) scope.var(var_name(slot, i)).tensor() = t;
        else feeds[var_name(slot, i)] = t;
      }
    for (auto& [slot, sr] : sparse_inputs_) scope.var(var_name(slot, 0)).selected_rows() = SelectedRows{sr.rows, sr.height, sr.value.to(place, true)};
    std::vector<std::string> fetch, keys;
    const Operator& op = p.global_block().op(0);
    for (auto& s : op.outputs())
      for (size_t i = 0; i < s.args.size(); ++i) {
        fetch.push_back(s.args[i]);
        keys.push_back(i == 0 ? s.slot : s.slot + "#" + std::to_string(i));
      }
    auto outs = exe.run(p, scope, feeds, fetch);
    std::map<std::string, LoDTensor> result;
    for (size_t i = 0; i < outs.size(); ++i) {
      const Variable& v = p.global_block().var(fetch[i]);
      const Shape& inferred = v.shape();
      bool ok = inferred.rank() == outs[i].rank() && outs[i].dtype() == v.dtype();
      for (int d = 0; ok && d < inferred.rank(); ++d) ok = dims_compatible(inferred[d], outs[i].dim(d));
      CHECK_MESSAGE((ok || !check_inferred_), type_ << ": output " << keys[i] << " inferred " << inferred.str() << " " << name(v.dtype()) << " but ran as "
                              << outs[i].shape().str() << " " << name(outs[i].dtype()));
      result[keys[i]] = outs[i];
    }
    return result;
  }

  /// Fluid's check_grad with a weighted loss: loss = mean over `outputs` of mean(w * output), w a fixed random
  /// tensor in [0.5, 1.5) per output (a plain mean gives every output element the same gradient, which hides
  /// layout bugs and gives zero gradients for softmax rows and normalized batches); numeric gradients of each
  /// input in `check` by central differences (delta) against the grad kernels' results. Inputs must be f64.
  void check_grad(const std::vector<std::string>& check, const std::vector<std::string>& outputs, double delta = 0.005,
                  double max_relative_error = 0.005, const std::set<std::string>& no_grad = {}) const {
    Program p = build();
    Block& b = p.global_block();
    const Operator fwd = b.op(0);
    std::set<std::string> ng;
    for (auto& [slot, ts] : inputs_)
      for (size_t i = 0; i < ts.size(); ++i)
        if (no_grad.count(slot) || std::find(check.begin(), check.end(), slot) == check.end()) ng.insert(var_name(slot, i));
    const OpDef& d = op_def(type_);
    REQUIRE_MESSAGE(bool(d.grad), type_ << " has no grad maker");
    GradContext gc(fwd, b, ng);
    std::vector<Operator> gops = d.grad(gc);
    // The output gradients are fed, like a loss's seed; an integer output (indices, lengths) has none.
    auto differentiable = [&](const std::string& n) { return b.var(n).dtype() == f32 || b.var(n).dtype() == f64; };
    for (auto& s : fwd.outputs())
      for (auto& n : s.args) {
        if (!differentiable(n)) continue;
        const Variable& v = b.var(n);
        b.create_var(grad_var_name(n), {.dtype = v.dtype(), .shape = v.shape(), .lod_level = v.lod_level()});
      }
    for (auto& g : gops) add_op(b, g);

    FeedMap feeds;
    for (auto& [slot, ts] : inputs_)
      for (size_t i = 0; i < ts.size(); ++i) feeds[var_name(slot, i)] = ts[i];
    // Forward values of the outputs give the seeds' shapes.
    auto fwd_out = run_outputs(feeds);
    double n_out = double(outputs.size());
    std::map<std::string, Tensor> weight;  // by output var name
    uint64_t wseed = 1000;
    for (auto& o : outputs) {
      const std::string n = var_name(o, 0);
      weight[n] = random_tensor<double>(fwd_out.at(n).shape(), 0.5, 1.5, wseed++);
    }
    for (auto& s : fwd.outputs())
      for (size_t i = 0; i < s.args.size(); ++i) {
        if (!differentiable(s.args[i])) continue;
        const LoDTensor& o = fwd_out.at(s.args[i]);
        const bool seeded = i == 0 && std::find(outputs.begin(), outputs.end(), s.slot) != outputs.end();
        const Tensor* w = seeded ? &weight.at(s.args[i]) : nullptr;
        auto v = [&](int64_t j) { return w ? w->get(j) / (double(o.numel()) * n_out) : 0.0; };
        Tensor t = o.dtype() == f64 ? make_tensor<double>(o.shape(), v) : make_tensor<float>(o.shape(), v);
        feeds[grad_var_name(s.args[i])] = LoDTensor(t, o.lod());
      }
    Scope scope;
    Executor exe;
    std::vector<std::string> fetch;
    for (auto& slot : check)
      for (size_t i = 0; i < count(slot); ++i) fetch.push_back(grad_var_name(var_name(slot, i)));
    auto analytic = exe.run(p, scope, feeds, fetch);
    if (auto again = second_place(p)) {  // the grad kernels on cuda:0 against the CPU's, from the same feeds
      Scope device_scope;
      Executor device(*again);
      auto on_device = device.run(p, device_scope, feeds, fetch);
      std::map<std::string, LoDTensor> want, got;
      for (size_t i = 0; i < fetch.size(); ++i) want[fetch[i]] = analytic[i], got[fetch[i]] = on_device[i];
      same_as_cpu(want, got, type_ + " gradients");
    }

    size_t k = 0;
    for (auto& slot : check)
      for (size_t i = 0; i < count(slot); ++i, ++k) {
        const Tensor& x = input_tensor(slot, i);
        REQUIRE_MESSAGE(x.dtype() == f64, "check_grad needs f64 inputs (" << slot << ")");
        Tensor numeric = to_f64(x);
        for (int64_t e = 0; e < x.numel(); ++e) {
          auto loss_at = [&](double shift) {
            FeedMap f2 = base_feeds();
            Tensor xp = x.clone();
            xp.data<double>()[e] += shift;
            f2[var_name(slot, i)] = LoDTensor(xp, input_lod(slot, i));
            auto outs = run_outputs(f2);
            double loss = 0;
            for (auto& o : outputs) {
              const LoDTensor& t = outs.at(var_name(o, 0));
              const Tensor& w = weight.at(var_name(o, 0));
              double sum = 0;
              for (int64_t j = 0; j < t.numel(); ++j) sum += w.get(j) * t.get(j);
              loss += sum / double(t.numel());
            }
            return loss / n_out;
          };
          numeric.data<double>()[e] = (loss_at(delta) - loss_at(-delta)) / (2 * delta);
        }
        const Tensor& a = analytic[k];
        REQUIRE_MESSAGE(a.shape() == x.shape(), type_ << ": " << slot << "@GRAD has shape " << a.shape().str() << ", input " << x.shape().str());
        double worst = 0;
        int64_t at = 0;
        for (int64_t e = 0; e < x.numel(); ++e) {
          double nv = numeric.get(e), av = a.get(e);
          double scale = std::abs(nv) < 1e-3 ? 1.0 : std::abs(nv);
          double rel = std::abs(nv - av) / scale;
          if (rel > worst || std::isnan(rel)) worst = rel, at = e;
        }
        CHECK_MESSAGE(worst <= max_relative_error, type_ << ": gradient of " << slot << " off by " << worst << " (relative) at element " << at
                                                        << ": numeric " << numeric.get(at) << ", analytic " << a.get(at));
      }
  }

 private:
  /// Where the case runs again to be compared with the CPU: cuda:0 when a device is present, every op of `p` has
  /// a CUDA kernel and each gives the same result every run (OpDef::replayable: not a random op that draws a new
  /// seed per run). OAR_OPTEST_AGAIN=cpu makes it a second CPU run in a fresh scope instead, which checks this
  /// path without a GPU and catches a kernel whose result depends on memory it never wrote.
  std::optional<Place> second_place(const Program& p) const {
    static const bool on_cpu = [] {
      const char* e = std::getenv("OAR_OPTEST_AGAIN");
      return e && std::string_view(e) == "cpu";
    }();
    if (!cpu_only_.empty() || (!on_cpu && cuda_device_count() == 0)) return std::nullopt;
    for (const Operator* op : p.global_block().ops()) {
      const KernelEntry* k = KernelRegistry::instance().find(op->type());
      const OpDef* d = OpRegistry::instance().find(op->type());
      if (!k || !(on_cpu ? k->cpu : k->cuda) || !d || (d->replayable && !d->replayable(*op))) return std::nullopt;
    }
    return on_cpu ? cpu() : cuda(0);
  }
  /// |cuda - cpu| <= atol + rtol |cpu| per output, by dtype: rounding and summation order only (f64 1e-9,
  /// f32 1e-4 + 1e-3 relative, 16-bit 1e-2); integers and bools exactly.
  static void same_as_cpu(const std::map<std::string, LoDTensor>& cpu_out, const std::map<std::string, LoDTensor>& gpu_out, const std::string& what) {
    REQUIRE(cpu_out.size() == gpu_out.size());
    for (auto& [key, want] : cpu_out) {
      const LoDTensor& got = gpu_out.at(key);
      CHECK_MESSAGE(got.dtype() == want.dtype(), what << " run again: " << key << " dtype");
      CHECK_MESSAGE(got.lod() == want.lod(), what << " run again: " << key << " LoD");
      const DType t = want.dtype();
      const double tol = t == f64 ? 1e-9 : t == f32 ? 1e-3 : t == f16 || t == bf16 ? 1e-2 : 0;
      check_close(got, want, t == f32 ? 1e-4 : tol, tol, what + " run again (cuda:0, or the CPU with OAR_OPTEST_AGAIN=cpu) against the CPU: " + key);
    }
  }

  static std::string var_name(const std::string& slot, size_t i) { return slot + "_" + std::to_string(i); }
  size_t count(const std::string& slot) const {
    for (auto& [s, ts] : inputs_) if (s == slot) return ts.size();
    return 0;
  }
  const Tensor& input_tensor(const std::string& slot, size_t i) const {
    for (auto& [s, ts] : inputs_) if (s == slot) return ts.at(i);
    throw Error("no input " + slot);
  }
  LoD input_lod(const std::string& slot, size_t i) const {
    for (auto& [s, ts] : inputs_) if (s == slot) return ts.at(i).lod();
    return {};
  }
  FeedMap base_feeds() const {
    FeedMap f;
    for (auto& [slot, ts] : inputs_)
      for (size_t i = 0; i < ts.size(); ++i) f[var_name(slot, i)] = ts[i];
    return f;
  }
  std::map<std::string, LoDTensor> run_outputs(const FeedMap& feeds) const {
    Program p = build();
    Scope scope;
    Executor exe;
    std::vector<std::string> fetch = p.global_block().op(0).output_names();
    auto outs = exe.run(p, scope, feeds, fetch);
    std::map<std::string, LoDTensor> m;
    for (size_t i = 0; i < fetch.size(); ++i) m[fetch[i]] = outs[i];
    return m;
  }

  std::string type_;
  std::vector<std::pair<std::string, std::vector<LoDTensor>>> inputs_;
  std::vector<std::pair<std::string, SelectedRows>> sparse_inputs_;
  std::map<std::string, size_t> out_counts_;
  std::map<std::string, Attribute> attrs_;
  bool unknown_batch_ = false;
  bool check_inferred_ = true;
  std::string cpu_only_;  ///< why the case is left out of the comparison with cuda:0 (empty: compared)
};

/// The op types of a block, in order.
inline std::vector<std::string> op_types(const Program& p, int block = 0) {
  std::vector<std::string> out;
  for (auto* op : p.block(block).ops()) out.push_back(op->type());
  return out;
}

/// Whether `s` contains `part` (an error text, a program's dump, ...).
inline bool contains(std::string_view s, std::string_view part) { return s.find(part) != std::string_view::npos; }

/// CHECKs that `s` contains each of `parts`; a failure names the missing part and shows `s`.
inline void check_contains(std::string_view s, std::initializer_list<std::string_view> parts) {
  for (std::string_view part : parts) CHECK_MESSAGE(contains(s, part), "'", part, "' is not in: ", s);
}

/// The error text of `f()` (which must throw oar::Error), for CHECK(contains(...)).
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  FAIL("expected an oar::Error");
  return {};
}

}  // namespace oar::test
