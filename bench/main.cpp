// bench/main.cpp: oar_bench, oar against its peers (OpenBLAS, LibTorch, dlib) side by side in one run:
// sgemm, per-op executor overhead, MLP and conv-net forward and training throughput, training peak memory,
// ResNet-18 training at ImageNet size (run only when named).
// Usage: oar_bench [--json] [--reps N] [--min-time S] [filter]. See docs/benchmarks.md.
#include <oar/oar.hpp>
// The op structs whose constants build the op-chain and N-D programs below (oar.hpp declares layers, not ops).
#include <oar/ops/concat.hpp>
#include <oar/ops/conv2d.hpp>
#include <oar/ops/elementwise.hpp>
#include <oar/ops/elementwise_binary.hpp>
#include <oar/ops/gather.hpp>
#include <oar/ops/reduce.hpp>
#include <oar/ops/scale.hpp>
#include <oar/ops/slice.hpp>
#include <oar/ops/transpose.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <numeric>
#include <random>
#include <sstream>
#include <stdexcept>
#include <unistd.h>

#include "common.hpp"
#include "fortunes.hpp"
#include "kernels/cpu/gemm.hpp"
#include "kernels/cpu/conv_choice.hpp"

namespace bench {

Synthetic make_synthetic(int64_t batch, int64_t pixels, uint64_t seed, int64_t classes) {
  Synthetic s;
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(0.f, 1.f);
  s.images.resize(size_t(batch * pixels));
  for (auto& v : s.images) v = u(rng);
  for (int64_t i = 0; i < batch; ++i) s.labels.push_back(int64_t(rng() % uint64_t(classes)));
  return s;
}

namespace {

// ---------------------------------------------------------------- options and output

struct Options {
  bool json = false;
  int reps = 5;
  double min_time = 0.25;
  bool reps_set = false, min_time_set = false;  // given on the command line (resnet18 has its own defaults)
  bool no_peers = false;  // oar alone (profiling)
  bool profile = false;   // print oar::Profiler's per-op table of each net
  std::string device = "cpu";  // --device cuda: the GPU group alone (bench/cuda_bench.cpp)
  bool cuda_spin = false;      // --cuda-sync spin: the host spins while it waits for the GPU (else it blocks)
  std::string filter;
};
Options g_opt;
constexpr int64_t kBatch = 64;

bool use_torch() { return !g_opt.no_peers && torch_peer::available(); }
bool use_dlib() { return !g_opt.no_peers && dlib_peer::available(); }

/// A group runs when the filter is a part of its name or names one of its lines (op_overhead_alloc).
bool selected(const std::string& group) {
  return g_opt.filter.empty() || group.find(g_opt.filter) != std::string::npos || g_opt.filter.find(group) != std::string::npos;
}

std::string json_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    if (c == '\n') {
      o += "\\n";
      continue;
    }
    o += c;
  }
  return o;
}

void emit(const Line& l) {
  if (g_opt.json) {
    std::printf("{\"bench\": \"%s\", \"unit\": \"%s\", \"oar\": %.6g, \"peer\": \"%s\", \"peer_value\": %.6g, \"ratio\": %.4g, \"threads\": %d, \"note\": \"%s\"}\n",
                json_escape(l.bench).c_str(), l.unit.c_str(), l.oar, l.peer.c_str(), l.peer_value, l.ratio(), l.threads, json_escape(l.note).c_str());
  } else if (l.peer.empty()) {
    std::printf("%-26s thr=%d  oar %12.4g %-12s  (no peer)  %s\n", l.bench.c_str(), l.threads, l.oar, l.unit.c_str(), l.note.c_str());
  } else {
    std::printf("%-26s thr=%d  oar %12.4g  %-8s %12.4g %-12s ratio %6.2f  %s\n", l.bench.c_str(), l.threads, l.oar, l.peer.c_str(), l.peer_value,
                l.unit.c_str(), l.ratio(), l.note.c_str());
  }
  std::fflush(stdout);
}

void info(const std::string& s) {
  std::fprintf(g_opt.json ? stderr : stdout, "# %s\n", s.c_str());
  std::fflush(g_opt.json ? stderr : stdout);
}

std::string cpu_model() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown";
}

std::string loadavg() {
  std::ifstream f("/proc/loadavg");
  std::string a, b, c;
  f >> a >> b >> c;
  return a + " " + b + " " + c;
}

/// A field of /proc/self/status in kB (VmRSS, VmHWM).
double status_kb(const char* key) {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind(key, 0) == 0) return std::atof(line.c_str() + std::strlen(key) + 1);
  return 0;
}

std::string fmt_threads(int t) { return std::to_string(t) + (t == 1 ? " thread" : " threads"); }
std::string torch_setting(int t) {
  return "libtorch " + fmt_threads(t) + " (torch::set_num_threads + openblas_set_num_threads)" + (t > 1 ? " OMP_WAIT_POLICY=passive" : "");
}

/// oar's thread setting for a block.
struct OarRunner : FnRunner {
  explicit OarRunner(int threads, std::function<void()> step) {
    on_enter = [threads] { oar::set_num_threads(threads); };
    on_step = std::move(step);
  }
};

/// Selects the clock for a thread setting: process CPU time at 1 thread, wall time above.
int clock_for(int threads) {
  use_cpu_clock() = threads == 1;
  return threads;
}
std::string clock_note(int threads) { return threads == 1 ? "time: process CPU time" : "time: wall clock"; }

// ---------------------------------------------------------------- 1. sgemm

void bench_sgemm() {
#if !defined(OAR_WITH_BLAS)
  info("sgemm: oar was built without OpenBLAS: no peer");
#endif
  for (int64_t n : {128, 256, 512, 1024, 2048}) {
    std::vector<float> a(size_t(n * n)), b(size_t(n * n)), c(size_t(n * n));
    std::mt19937 rng(1);
    std::uniform_real_distribution<float> dist(-1, 1);
    for (auto& v : a) v = dist(rng);
    for (auto& v : b) v = dist(rng);
    const double flops = 2.0 * double(n) * double(n) * double(n);
    for (int thr : {1, 2}) {
      clock_for(thr);
      OarRunner o(thr, [&] { oar::cpu_kernels::gemm<float>(false, false, n, n, n, 1.f, a.data(), n, b.data(), n, 0.f, c.data(), n); });
      Line l{"sgemm_n" + std::to_string(n), "GFLOP/s", 0, "", 0, thr, "", true};
#if defined(OAR_WITH_BLAS)
      FnRunner p;
      p.on_enter = [thr] { openblas_set_num_threads(thr); };
      p.on_step = [&] { cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.f, a.data(), n, b.data(), n, 0.f, c.data(), n); };
      p.on_leave = [thr] {
        openblas_set_num_threads(1);
        if (thr > 1) settle();
      };
      auto [to, tp] = interleave(o, &p, g_opt.reps, g_opt.min_time);
      l.peer = "openblas";
      l.peer_value = flops / tp * 1e-9;
      l.note = std::string("row-major NN; oar::cpu_kernels::gemm (") + oar::cpu_kernels::gemm_backend_name() + " serial, split over oar's pool) vs cblas_sgemm, openblas core " +
               openblas_get_corename() + " via openblas_get_corename(), openblas_set_num_threads(" + std::to_string(thr) + "); " + clock_note(thr);
#else
      auto [to, tp] = interleave(o, nullptr, g_opt.reps, g_opt.min_time);
      (void)tp;
#endif
      l.oar = flops / to * 1e-9;
      emit(l);
    }
  }
}

// ---------------------------------------------------------------- 2. op_overhead

/// A Program of `nops` ops on a [16] f32 tensor cycling relu, scale 0.5, elementwise_add(h, x).
oar::Program op_chain_program(int nops) {
  oar::Program prog;
  oar::Block& b = prog.global_block();
  b.create_var("x", {.dtype = oar::f32, .shape = oar::Shape{16}});
  std::string prev = "x";
  for (int i = 0; i < nops; ++i) {
    std::string out = "h" + std::to_string(i);
    using oar::ops::ElementwiseAdd, oar::ops::ReluOp, oar::ops::Scale;
    oar::Operator op{std::string(i % 3 == 0 ? ReluOp::type : i % 3 == 1 ? Scale::type : ElementwiseAdd::type)};
    op.set_input(ReluOp::x, {prev}).set_output(ReluOp::out, {out});  // the three ops share the names X and Out
    if (i % 3 == 1) op.set_attr(Scale::scale, 0.5f);
    if (i % 3 == 2) op.set_input(ElementwiseAdd::y, {"x"});
    oar::add_op(b, std::move(op));
    prev = out;
  }
  return prog;
}

void bench_op_overhead() {
  const int nops = 99;  // 33 x (relu, scale, elementwise_add)
  oar::Program prog = op_chain_program(nops);
  oar::Scope scope;
  oar::Executor exe;
  auto prepared = exe.prepare(prog, scope);
  std::vector<float> xv(16);
  for (int i = 0; i < 16; ++i) xv[size_t(i)] = float(i) / 16 - 0.4f;
  oar::FeedMap feeds{{"x", oar::LoDTensor(oar::Tensor::from<float>(xv))}};
  clock_for(1);
  OarRunner o(1, [&] { exe.run(*prepared, scope, feeds); });
  const std::string what = std::to_string(nops) + " chained ops (relu, scale, elementwise_add) on 16 floats";
  if (!use_torch()) {
    auto [to, tp] = interleave(o, nullptr, g_opt.reps, g_opt.min_time);
    emit({"op_overhead", "ns/op", to / nops * 1e9, "", 0, 1, "LibTorch not found: no peer; oar: Executor::prepare once + run, " + what, false});
    return;
  }
  for (bool prealloc : {true, false}) {
    auto p = torch_peer::op_chain(nops, prealloc);
    auto [to, tp] = interleave(o, p.get(), g_opt.reps, g_opt.min_time);
    emit({prealloc ? "op_overhead_prealloc" : "op_overhead_alloc", "ns/op", to / nops * 1e9, "libtorch", tp / nops * 1e9, 1,
          "oar: Executor::prepare once + run (one feed), " + what + "; libtorch 1 thread, NoGradGuard, " +
              (prealloc ? "relu_ / mul_ in place + at::add_out into preallocated" : "torch::relu / x * 0.5 / x + x0, allocating each result") + "; " + clock_note(1),
          false});
  }
}

// ---------------------------------------------------------------- 2b. nd: N-D kernels against xtensor

/// One op on the inputs of `c`, run by a prepared executor (1 thread), against the same computation as an
/// xtensor expression evaluated into a preallocated buffer. Ratio > 1: oar's kernel is faster.
void bench_nd() {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> dist(-1, 1);
  auto random = [&](int64_t n) {
    std::vector<float> v(static_cast<size_t>(n));
    for (auto& e : v) e = dist(rng);
    return v;
  };
  auto numel = [](const std::vector<int64_t>& s) { return std::accumulate(s.begin(), s.end(), int64_t(1), std::multiplies<>()); };
  struct Case {
    bench::NdCase nd;
    std::string what;
  };
  std::vector<int64_t> rows(4096);
  for (auto& r : rows) r = std::uniform_int_distribution<int64_t>(0, 49999)(rng);
  std::vector<Case> cases = {
      {{"transpose", {32, 64, 28, 28}, {}, {32, 28, 28, 64}, nullptr, nullptr, {0, 2, 3, 1}}, "NCHW -> NHWC, [32, 64, 28, 28]"},
      {{"slice", {64, 256, 196}, {}, {64, 128, 196}, nullptr, nullptr, {64, 192}}, "[64, 256, 196], axis 1 from 64 to 192"},
      {{"concat", {64, 128, 196}, {64, 128, 196}, {64, 256, 196}, nullptr, nullptr, {1}}, "two [64, 128, 196] on axis 1"},
      {{"gather", {50000, 128}, {}, {4096, 128}, nullptr, nullptr, rows}, "4096 random rows of [50000, 128]"},
      {{"reduce_sum", {64, 128, 256}, {}, {64, 256}, nullptr, nullptr, {1}}, "[64, 128, 256] over axis 1"},
      {{"reduce_sum", {1024, 1024}, {}, {1024}, nullptr, nullptr, {1}}, "[1024, 1024] over axis 1 (rows)"},
      {{"broadcast_add", {64, 128, 28, 28}, {128, 1, 1}, {64, 128, 28, 28}, nullptr, nullptr, {}}, "[64, 128, 28, 28] + [128] on axis 1"},
  };
  clock_for(1);
  for (auto& c : cases) {
    bench::NdCase& nd = c.nd;
    std::vector<float> xv = random(numel(nd.x_shape)), yv = nd.y_shape.empty() ? std::vector<float>{} : random(numel(nd.y_shape));
    nd.x = xv.data();
    nd.y = yv.data();
    oar::Program prog;
    oar::Block& b = prog.global_block();
    b.create_var("x", {.dtype = oar::f32, .shape = oar::Shape(nd.x_shape)});
    oar::FeedMap feeds{{"x", oar::LoDTensor(oar::Tensor::from<float>(xv, oar::Shape(nd.x_shape)))}};
    std::vector<int32_t> ints(nd.ints.begin(), nd.ints.end());
    oar::Operator op;
    if (nd.kind == "transpose") {
      op = oar::Operator(std::string(oar::ops::Transpose::type));
      op.set_input(oar::ops::Transpose::x, {"x"}).set_output(oar::ops::Transpose::out, {"out"}).set_attr(oar::ops::Transpose::axis, ints);
    } else if (nd.kind == "slice") {
      op = oar::Operator(std::string(oar::ops::Slice::type));
      op.set_input(oar::ops::Slice::input, {"x"}).set_output(oar::ops::Slice::out, {"out"});
      op.set_attr(oar::ops::Slice::axes, std::vector<int32_t>{1}).set_attr(oar::ops::Slice::starts, std::vector<int32_t>{ints[0]});
      op.set_attr(oar::ops::Slice::ends, std::vector<int32_t>{ints[1]});
    } else if (nd.kind == "concat") {
      b.create_var("y", {.dtype = oar::f32, .shape = oar::Shape(nd.y_shape)});
      feeds.emplace("y", oar::LoDTensor(oar::Tensor::from<float>(yv, oar::Shape(nd.y_shape))));
      op = oar::Operator(std::string(oar::ops::Concat::type));
      op.set_input(oar::ops::Concat::x, {"x", "y"}).set_output(oar::ops::Concat::out, {"out"}).set_attr(oar::ops::Concat::axis, ints[0]);
    } else if (nd.kind == "gather") {
      b.create_var("idx", {.dtype = oar::i64, .shape = oar::Shape{int64_t(nd.ints.size())}});
      feeds.emplace("idx", oar::LoDTensor(oar::Tensor::from<int64_t>(nd.ints)));
      op = oar::Operator(std::string(oar::ops::Gather::type));
      op.set_input(oar::ops::Gather::x, {"x"}).set_input(oar::ops::Gather::index, {"idx"}).set_output(oar::ops::Gather::out, {"out"});
    } else if (nd.kind == "reduce_sum") {
      op = oar::Operator(std::string(oar::ops::ReduceSum::type));
      op.set_input(oar::ops::ReduceSum::x, {"x"}).set_output(oar::ops::ReduceSum::out, {"out"}).set_attr(oar::ops::ReduceSum::dim, ints);
    } else {  // broadcast_add: oar's Y is [C] on axis 1
      b.create_var("y", {.dtype = oar::f32, .shape = oar::Shape{nd.y_shape[0]}});
      feeds.emplace("y", oar::LoDTensor(oar::Tensor::from<float>(yv, oar::Shape{nd.y_shape[0]})));
      op = oar::Operator(std::string(oar::ops::ElementwiseAdd::type));
      op.set_input(oar::ops::ElementwiseAdd::x, {"x"}).set_input(oar::ops::ElementwiseAdd::y, {"y"}).set_output(oar::ops::ElementwiseAdd::out, {"out"});
      op.set_attr(oar::ops::ElementwiseAdd::axis, int32_t(1));
    }
    oar::add_op(b, std::move(op));
    oar::Scope scope;
    oar::Executor exe;
    auto prepared = exe.prepare(prog, scope);
    std::vector<oar::LoDTensor> out;
    OarRunner o(1, [&] { exe.run(*prepared, scope, feeds, {"out"}, out); });
    std::unique_ptr<bench::Runner> peer = g_opt.no_peers ? nullptr : bench::xtensor_peer::nd(nd);
    auto [to, tp] = interleave(o, peer.get(), g_opt.reps, g_opt.min_time);
    // Bytes moved: what is read and written (a gather reads only the rows it writes).
    const int64_t moved = nd.kind == "gather" ? 2 * numel(nd.out_shape) : numel(nd.x_shape) + (yv.empty() ? 0 : numel(nd.y_shape)) + numel(nd.out_shape);
    const double bytes = double(moved) * 4;
    emit({"nd_" + nd.kind, "GB/s", bytes / to * 1e-9, peer ? "xtensor" : "", peer ? bytes / tp * 1e-9 : 0, 1,
          c.what + "; oar: the op through a prepared Executor (feeds shared, output reused); xtensor 0.24: the expression assigned to "
                   "an xt::adapt of a preallocated buffer; GB/s = bytes read and written / time; " + clock_note(1),
          true});
  }
}

// ---------------------------------------------------------------- 3-5. nets

/// oar's two bench nets on one tape; `train` builds an Optimizer, otherwise an Evaluator of the prediction.
struct OarNet {
  oar::Tape tape;
  oar::Var img, label, pred, cost;
  std::unique_ptr<oar::Model> model;
  std::unique_ptr<oar::Optimizer> opt;
  std::unique_ptr<oar::Evaluator> eval;
  oar::FeedMap feeds;

  /// `dp`: train data-parallel over its ranks (the dist group).
  OarNet(bool conv, bool train, const Synthetic& d, int64_t batch, bool fuse = false, const oar::DataParallel* dp = nullptr) {
    if (conv) {
      img = oar::data("img", oar::f32, {-1, 1, 28, 28});
      auto c1 = oar::conv2d(img, 20, 5).act(oar::relu);
      auto p1 = oar::pool2d(c1, 2);
      auto bn = oar::batch_norm(p1);
      auto c2 = oar::conv2d(bn, 50, 5).act(oar::relu);
      auto p2 = oar::pool2d(c2, 2);
      pred = oar::fc(p2, 10).act(oar::softmax);
    } else {
      img = oar::data("img", oar::f32, {-1, 784});
      auto h = oar::fc(img, 200).act(oar::relu);
      pred = oar::fc(h, 10).act(oar::softmax);
    }
    label = oar::data("label", oar::i64, {-1, 1});
    cost = oar::mean(oar::cross_entropy(pred, label));
    oar::Shape ishape = conv ? oar::Shape{batch, 1, 28, 28} : oar::Shape{batch, 784};
    if (train) {
      model = std::make_unique<oar::Model>(tape.program({cost}));
      auto rule = conv ? oar::optim::adam(1e-3) : oar::optim::sgd(0.1);
      opt = dp ? std::make_unique<oar::Optimizer>(*model, cost, rule, *dp) : std::make_unique<oar::Optimizer>(*model, cost, rule);
      feeds[model->name_of(label)] = oar::LoDTensor(oar::Tensor::from<int64_t>(d.labels, {batch, 1}));
    } else {
      model = std::make_unique<oar::Model>(tape.program(pred));
      eval = std::make_unique<oar::Evaluator>(*model, std::vector<std::string>{}, oar::EvaluatorOptions{.fuse = fuse});
    }
    feeds[model->name_of(img)] = oar::LoDTensor(oar::Tensor::from<float>(d.images, ishape));
  }
  /// Set when Optimizer::step failed at construction (see workaround_step).
  std::string workaround;
  oar::Executor update_exe;
  std::shared_ptr<oar::PreparedBlock> update_run;

  void step() {
    if (!opt) eval->forward(feeds);
    else if (workaround.empty()) opt->step(feeds);
    else workaround_step();
  }
  /// Optimizer::step's work done by hand: GradientMachine::forward_backward, then the optimizer's update program
  /// run with the gradients fed by name (they must not stay referenced between steps: that would stop the
  /// executor from reusing their buffers).
  void workaround_step() {
    oar::GradientMachine& gm = opt->machine();
    gm.forward_backward(feeds);
    oar::FeedMap grads;
    for (auto& [p, g] : gm.params_grads()) grads[g] = gm.scope().tensor(g);
    update_exe.run(*update_run, gm.scope(), grads);
  }
  /// Tries Optimizer::step once; when it throws, switches to workaround_step and records why.
  void check_step() {
    if (!opt) return;
    try {
      opt->step(feeds);
    } catch (const std::exception& e) {
      workaround = e.what();
      update_run = update_exe.prepare(opt->update_program(), opt->machine().scope());
      workaround_step();
    }
  }
};

std::string oar_step_note(const OarNet& n) {
  if (n.workaround.empty()) return "oar Optimizer::step";
  std::string why = n.workaround.substr(0, n.workaround.find('\n'));
  return "oar: Optimizer::step FAILS here (" + why +
         "), so forward_backward + the optimizer's update program with the gradients fed (same work)";
}

/// --profile: 50 steps of `net` at 1 thread under oar::Profiler, the table to stderr.
void profile_net(const std::string& name, OarNet& net) {
  if (!g_opt.profile) return;
  oar::set_num_threads(1);
  net.step();
  const int64_t allocs = oar::memory_stats().allocations;
  oar::Profiler prof(true);
  for (int i = 0; i < 50; ++i) net.step();
  info(name + ": oar::Profiler, 50 steps, 1 thread, " + std::to_string(oar::memory_stats().allocations - allocs) + " tensor allocations\n" +
       prof.report());
}

/// LibTorch's conv net: oneDNN on or off, whichever is faster here (a short calibration).
bool torch_conv_mkldnn(const Synthetic& d, int threads, bool train) {
  auto on = torch_peer::conv(d, kBatch, threads, train, true);
  auto off = torch_peer::conv(d, kBatch, threads, train, false);
  auto [t_on, t_off] = interleave(*on, off.get(), 3, g_opt.min_time / 2);
  return t_on < t_off;
}

/// The MLP's large products timed alone with OpenBLAS's own threading (best of 2000): the forward's X [64 x 784]
/// W1 [784 x 200] (99% of its 20 MFLOP) and, for a training step, also dW1 = X^T dH [784 x 64] [64 x 200] (98% of its
/// 41 MFLOP together). No framework can run the pass faster than these alone: emitted as the "peer" gemm_bound of
/// oar's measured rate (ratio: the share of the bound oar reaches).
void emit_mlp_gemm_bound(const std::string& name, double oar_rate, int threads, bool train) {
#if defined(OAR_WITH_BLAS)
  std::vector<float> x(64 * 784, 0.5f), w(784 * 200, 0.1f), h(64 * 200), dh(64 * 200, 0.2f), dw(784 * 200);
  openblas_set_num_threads(threads);
  double best = 1e9;
  for (int rep = 0; rep < 2000; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 64, 200, 784, 1.f, x.data(), 784, w.data(), 200, 0.f, h.data(), 200);
    if (train) cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, 784, 200, 64, 1.f, x.data(), 784, dh.data(), 200, 0.f, dw.data(), 200);
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  openblas_set_num_threads(1);
  if (threads > 1) settle();
  emit({name, "examples/s", oar_rate, "gemm_bound", kBatch / best, threads,
        std::string("the bound: 64 / (") + (train ? "the step's two large sgemm calls" : "the forward's large sgemm call") + " alone, OpenBLAS " +
            openblas_get_corename() + " with " + std::to_string(threads) + " thread(s), best of 2000, wall clock); ratio = the share of it oar reaches",
        true});
#else
  (void)name, (void)oar_rate, (void)threads, (void)train;
#endif
}

void bench_forward(bool conv) {
  Synthetic d = make_synthetic(kBatch, 784, 7);
  // The conv net twice: as built, and with EvaluatorOptions::fuse (conv + bias + relu in one op, api/fuse.hpp).
  for (bool fuse : conv ? std::vector<bool>{false, true} : std::vector<bool>{false}) {
    const std::string name = std::string(conv ? "conv_forward" : "mlp_forward") + (fuse ? "_fused" : "");
    OarNet net(conv, false, d, kBatch, fuse);
    profile_net(name, net);
    for (int thr : {1, 2}) {
      clock_for(thr);
      OarRunner o(thr, [&] { net.step(); });
      const std::string what = std::string("batch 64 f32, oar Evaluator::forward (is_test") + (fuse ? ", EvaluatorOptions::fuse" : "") + ") vs " +
                               (conv ? "torch::nn Conv2d/BatchNorm2d/Linear eval()" : "torch::nn::Linear") + " + softmax, NoGradGuard; " + clock_note(thr);
      if (!use_torch()) {
        auto [to, tp] = interleave(o, nullptr, g_opt.reps, g_opt.min_time);
        emit({name, "examples/s", kBatch / to, "", 0, thr, "LibTorch not found: no peer; " + what, true});
        continue;
      }
      bool mkldnn = conv ? torch_conv_mkldnn(d, thr, false) : true;
      auto p = conv ? torch_peer::conv(d, kBatch, thr, false, mkldnn) : torch_peer::mlp(d, kBatch, thr, false);
      auto [to, tp] = interleave(o, p.get(), g_opt.reps, g_opt.min_time);
      emit({name, "examples/s", kBatch / to, "libtorch", kBatch / tp, thr,
            what + "; " + torch_setting(thr) + (conv ? std::string(", oneDNN conv ") + (mkldnn ? "on" : "off") + " (faster of the two here)" : ""), true});
      if (!conv) emit_mlp_gemm_bound(name, kBatch / to, thr, false);
    }
  }
}

void bench_train(bool conv) {
  const std::string name = conv ? "conv_train" : "mlp_train";
  const std::string rule = conv ? "Adam 1e-3" : "SGD 0.1";
  Synthetic d = make_synthetic(kBatch, 784, 11);
  OarNet net(conv, true, d, kBatch);
  net.check_step();
  if (!net.workaround.empty()) info(name + ": " + oar_step_note(net));
  profile_net(name, net);
  for (int thr : {1, 2}) {
    clock_for(thr);
    OarRunner o(thr, [&] { net.step(); });
    std::vector<std::pair<std::string, std::unique_ptr<Runner>>> peers;
    std::vector<std::string> notes;
    bool mkldnn = true;
    if (use_torch()) {
      if (conv) mkldnn = torch_conv_mkldnn(d, thr, true);
      peers.emplace_back("libtorch", conv ? torch_peer::conv(d, kBatch, thr, true, mkldnn) : torch_peer::mlp(d, kBatch, thr, true));
      notes.push_back(torch_setting(thr) + ", torch::optim, cross_entropy on logits" +
                      (conv ? std::string(", oneDNN conv ") + (mkldnn ? "on" : "off") + " (faster of the two here)" : ""));
    } else {
      info(name + ": LibTorch not found: its comparison is skipped");
    }
    if (use_dlib()) {
      peers.emplace_back("dlib", conv ? dlib_peer::conv_train(d, kBatch, thr) : dlib_peer::mlp_train(d, kBatch, thr));
      notes.push_back("dlib " + dlib_peer::version() + ", compute_parameter_gradients + update_parameters, loss_multiclass_log, " +
                      (conv ? "adam(0, 0.9, 0.999) lr 1e-3" : "sgd(0, 0) lr 0.1") + ", openblas_set_num_threads(" + std::to_string(thr) + ")");
    } else {
      info(name + ": dlib not found: its comparison is skipped");
    }
    if (peers.empty()) {
      auto [to, tp] = interleave(o, nullptr, g_opt.reps, g_opt.min_time);
      emit({name, "examples/s", kBatch / to, "", 0, thr, "no peer found", true});
      continue;
    }
    // Interleave oar with every peer in rotating order.
    std::vector<Runner*> all{&o};
    for (auto& p : peers) all.push_back(p.second.get());
    const auto t = time_rotating(all, g_opt.reps, g_opt.min_time);
    double to = median(t[0]);
    for (size_t i = 0; i < peers.size(); ++i)
      emit({name, "examples/s", kBatch / to, peers[i].first, kBatch / median(t[i + 1]), thr,
            "batch 64 f32, " + rule + ", one step = forward + backward + update; " +
                (net.workaround.empty() ? std::string("oar Optimizer::step") : std::string("oar: forward_backward + update program (Optimizer::step fails, see header)")) +
                "; " + notes[i] + "; " + clock_note(thr), true});
    if (!conv) emit_mlp_gemm_bound(name, kBatch / to, thr, true);
  }
}

// ---------------------------------------------------------------- lstm

/// `batch` sequences of `input` floats per step, lengths uniform in [lo, hi] (all `lo` when lo == hi).
Sequences make_sequences(int64_t batch, int64_t input, int64_t hidden, int64_t lo, int64_t hi, uint64_t seed) {
  Sequences d;
  d.input = input;
  d.hidden = hidden;
  std::mt19937_64 rng(seed);
  for (int64_t b = 0; b < batch; ++b) d.lengths.push_back(lo + int64_t(rng() % uint64_t(hi - lo + 1)));
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  d.x.resize(size_t(d.rows() * input));
  for (auto& v : d.x) v = u(rng);
  return d;
}

/// oar's side: fc(x, 4H) -> dynamic_lstm without peepholes -> mean of every hidden state; SGD 0.1 through
/// Optimizer::step. The same work as torch::nn::LSTM (input and recurrent products, gate math, both biases).
struct OarLstm {
  std::unique_ptr<oar::Model> model;
  std::unique_ptr<oar::Optimizer> opt;
  oar::FeedMap feeds;
  explicit OarLstm(const Sequences& d) {
    oar::Tape tape;
    auto x = oar::data("x", oar::f32, {-1, d.input}).lod_level(1);
    auto h = oar::dynamic_lstm(oar::fc(x, 4 * d.hidden), 4 * d.hidden).use_peepholes(false);
    auto loss = oar::mean(h);
    model = std::make_unique<oar::Model>(tape.program(loss));
    opt = std::make_unique<oar::Optimizer>(*model, loss, oar::optim::sgd(0.1));
    oar::Lengths lengths(1);
    for (int64_t l : d.lengths) lengths[0].push_back(size_t(l));
    feeds[model->name_of(x)] = oar::LoDTensor::from_lengths(oar::Tensor::from<float>(d.x, {d.rows(), d.input}), lengths);
  }
  void step() { opt->step(feeds); }
};

/// LSTM 64 -> 128 on a batch of 32 sequences: T = 32 for all (steps/s), and lengths uniform in 8..64 against
/// LibTorch with padding + pack_padded_sequence (tokens/s).
void bench_lstm() {
  for (bool ragged : {false, true}) {
    const Sequences d = ragged ? make_sequences(32, 64, 128, 8, 64, 5) : make_sequences(32, 64, 128, 32, 32, 5);
    const double tokens = double(d.rows());
    OarLstm net(d);
    for (int thr : {1, 2}) {
      clock_for(thr);
      OarRunner o(thr, [&] { net.step(); });
      auto p = use_torch() ? torch_peer::lstm(d, thr) : nullptr;
      auto [to, tp] = interleave(o, p.get(), g_opt.reps, g_opt.min_time);
      const std::string what = ragged ? "32 sequences, lengths uniform in 8..64 (" + std::to_string(d.rows()) + " tokens)" : "32 sequences of T = 32";
      const std::string note = "LSTM 64 -> 128, " + what + ", forward + backward + SGD 0.1 on the mean of every hidden state; oar: fc + dynamic_lstm " +
                               "(no peepholes), Optimizer::step, LoD input, no padding; libtorch: torch::nn::LSTM" +
                               (ragged ? ", padded + pack_padded_sequence (enforce_sorted false)" : ", time-major") + ", " + torch_setting(thr) + "; " + clock_note(thr);
      if (ragged) emit({"lstm_ragged", "tokens/s", tokens / to, p ? "libtorch" : "", p ? tokens / tp : 0, thr, note, true});
      else emit({"lstm", "steps/s", 1 / to, p ? "libtorch" : "", p ? 1 / tp : 0, thr, note, true});
    }
  }
}

// ---------------------------------------------------------------- attention

/// oar's side of the attention group: multi_head_attention(x, heads, d_model) on LoD sequences (nothing padded),
/// loss the mean of every output; `train`: Optimizer::step with SGD 0.1, else Evaluator::forward.
struct OarAttention {
  std::unique_ptr<oar::Model> model;
  std::unique_ptr<oar::Optimizer> opt;
  std::unique_ptr<oar::Evaluator> ev;
  oar::FeedMap feeds;
  OarAttention(const Sequences& d, int heads, bool train) {
    oar::Tape tape;
    auto x = oar::data("x", oar::f32, {-1, d.input}).lod_level(1);
    auto y = oar::multi_head_attention(x, heads, d.input);
    auto loss = oar::mean(y);
    model = std::make_unique<oar::Model>(tape.program(train ? loss : y));
    if (train) opt = std::make_unique<oar::Optimizer>(*model, loss, oar::optim::sgd(0.1));
    else ev = std::make_unique<oar::Evaluator>(*model);
    oar::Lengths lengths(1);
    for (int64_t l : d.lengths) lengths[0].push_back(size_t(l));
    feeds[model->name_of(x)] = oar::LoDTensor::from_lengths(oar::Tensor::from<float>(d.x, {d.rows(), d.input}), lengths);
  }
  void step() {
    if (opt) opt->step(feeds);
    else ev->forward(feeds);
  }
};

constexpr int64_t kAttnBatch = 8, kAttnModel = 256;
constexpr int kAttnHeads = 4;

/// The attention group's batches: 8 sequences of T (t128, t512, t2048) or of lengths uniform in 16..512 (ragged).
Sequences attention_batch(const std::string& shape) {
  if (shape == "ragged") return make_sequences(kAttnBatch, kAttnModel, 0, 16, 512, 7);
  const int64_t t = std::atoll(shape.c_str() + 1);
  return make_sequences(kAttnBatch, kAttnModel, 0, t, t, 7);
}

bool run_child_mem(const std::string& netname, const std::string& fw, double& hwm_mb, double& oar_mb);

/// Multi-head self-attention (d_model 256, 4 heads, batch 8), forward and training step, 1 and 2 threads, oar
/// against torch::nn::MultiheadAttention; then each side's peak memory in a process of its own.
void bench_attention() {
  if (g_opt.profile) {  // where a step goes at T = 512, 1 thread, per op
    for (bool train : {false, true}) {
      OarAttention net(attention_batch("t512"), kAttnHeads, train);
      oar::set_num_threads(1);
      net.step();
      const int64_t allocs = oar::memory_stats().allocations;
      oar::Profiler prof(true);
      for (int i = 0; i < 10; ++i) net.step();
      info(std::string("attention t512 ") + (train ? "training" : "forward") + ": oar::Profiler, 10 steps, 1 thread, " +
           std::to_string(oar::memory_stats().allocations - allocs) + " tensor allocations\n" + prof.report());
    }
  }
  for (const char* shape : {"t128", "t512", "t2048", "ragged"}) {
    const Sequences d = attention_batch(shape);
    const double tokens = double(d.rows());
    const bool ragged = std::string(shape) == "ragged";
    for (bool train : {false, true}) {
      OarAttention net(d, kAttnHeads, train);
      for (int thr : {1, 2}) {
        clock_for(thr);
        OarRunner o(thr, [&] { net.step(); });
        auto p = use_torch() ? torch_peer::attention(d, kAttnHeads, thr, train) : nullptr;
        auto [to, tp] = interleave(o, p.get(), g_opt.reps, g_opt.min_time);
        const std::string what = ragged ? "8 sequences, lengths uniform in 16..512 (" + std::to_string(d.rows()) + " tokens)"
                                        : "8 sequences of " + std::string(shape).substr(1);
        const std::string note = std::string("multi-head self-attention, d_model 256, 4 heads, ") + what + (train ? ", forward + backward + SGD 0.1 on the mean" : ", forward") +
                                 "; oar: multi_head_attention on LoD input, no padding; libtorch: torch::nn::MultiheadAttention, need_weights off" +
                                 (ragged ? ", padded with a key_padding_mask" : "") + ", " + torch_setting(thr) + "; " + clock_note(thr);
        emit({std::string("attention_") + shape + (train ? "_train" : "_forward"), "tokens/s", tokens / to, p ? "libtorch" : "", p ? tokens / tp : 0, thr, note,
              true});
      }
    }
  }
  // Peak memory of a training step: oar's tensor peak grows with T, not T^2 (the scores are never held whole).
  double oar512 = 0, oar2048 = 0;
  for (const char* shape : {"t512", "t2048"}) {
    double hwm = 0, tensors = 0, peer = 0, dummy = 0;
    if (!run_child_mem(std::string("attention-") + shape, "oar", hwm, tensors)) {
      info(std::string("attention peak memory: the oar child failed at ") + shape);
      continue;
    }
    (std::string(shape) == "t512" ? oar512 : oar2048) = tensors;
    const bool peer_ok = use_torch() && run_child_mem(std::string("attention-") + shape, "libtorch", peer, dummy);
    emit({std::string("attention_") + shape + "_train_peak_mem", "MB", tensors, peer_ok ? "libtorch" : "", peer, 1,
          "3 training steps at 1 thread, each framework in its own process; oar: oar::memory_stats().peak (tensor bytes); libtorch: VmHWM - VmRSS at "
          "start; one T x T score matrix of all heads and sequences: " +
              fmt::format("{:.0f} MB", double(kAttnBatch * kAttnHeads) * std::pow(double(std::atoll(shape + 1)), 2) * 4 / (1 << 20)),
          false});
  }
  if (oar512 > 0 && oar2048 > 0)
    emit({"attention_peak_mem_growth_t512_to_t2048", "x", oar2048 / oar512, "", 0, 1, "oar's tensor peak at T = 2048 over T = 512: 4 is linear in T, 16 quadratic",
          false});
}

// ---------------------------------------------------------------- char_lm

/// oar's side of char_lm: examples/char_lm.cpp's model with named parameters (so that LibTorch can start
/// from the same values), trained by Optimizer::step on `m`'s batches in order, then scored by an Evaluator.
struct OarCharLm {
  const CharLm& m;
  oar::Tape tape;
  oar::Var ids, next, nats, cost;
  std::unique_ptr<oar::Model> model, scorer;

  explicit OarCharLm(const CharLm& lm) : m(lm) {
    ids = oar::data("ids", oar::i64, {-1, 1}).lod_level(1);
    next = oar::data("next", oar::i64, {-1, 1});
    auto emb = oar::embedding(ids, {m.vocab, m.embed}).param("emb_w");
    auto x = oar::fc(emb, 4 * m.hidden).param("proj_w").bias("proj_b");
    auto h = oar::dynamic_lstm(x, 4 * m.hidden).use_peepholes(false).param("lstm_w").bias("lstm_b");
    nats = oar::softmax_with_cross_entropy(oar::fc(h, m.vocab).param("out_w").bias("out_b"), next);
    cost = oar::mean(nats);
    model = std::make_unique<oar::Model>(tape.program(cost));
    scorer = std::make_unique<oar::Model>(tape.program(nats));
  }

  /// Chunks of up to m.chunk characters at `starts` (cut at the end of `text`) as LoD sequences, and their next characters.
  oar::FeedMap batch(const std::vector<int64_t>& text, const int64_t* starts, size_t count) const {
    std::vector<int64_t> x, y;
    oar::Lengths lengths(1);
    for (size_t i = 0; i < count; ++i) {
      const auto s = size_t(starts[i]);
      const size_t n = std::min(size_t(m.chunk), text.size() - 1 - s);
      x.insert(x.end(), text.begin() + long(s), text.begin() + long(s + n));
      y.insert(y.end(), text.begin() + long(s + 1), text.begin() + long(s + 1 + n));
      lengths[0].push_back(n);
    }
    const auto rows = int64_t(x.size());
    return {{model->name_of(ids), oar::LoDTensor::from_lengths(oar::Tensor::from<int64_t>(x, {rows, 1}), lengths)},
            {model->name_of(next), oar::LoDTensor(oar::Tensor::from<int64_t>(y, {rows, 1}))}};
  }

  /// The initial parameters in LibTorch's layouts. oar's gate columns are [c~ | i | f | o] of x W (W: [in, 4H]);
  /// LibTorch's rows are [i | f | g | o] of W x (W: [4H, in]).
  void export_initial(CharLm& out) const {
    const int64_t H = m.hidden, V = m.vocab;
    auto values = [&](const char* name) {
      auto s = model->parameter(name).span<float>();
      return std::vector<float>(s.begin(), s.end());
    };
    const int64_t oar_gate[4] = {1, 2, 0, 3};  // LibTorch's gate k is oar's gate oar_gate[k]
    auto gates = [&](const std::vector<float>& w, int64_t in, std::vector<float>& rows, std::vector<float>& bias, const std::vector<float>& b) {
      rows.assign(size_t(4 * H * in), 0.f);
      bias.assign(size_t(4 * H), 0.f);
      for (int64_t k = 0; k < 4; ++k)
        for (int64_t j = 0; j < H; ++j) {
          const int64_t col = oar_gate[k] * H + j;
          for (int64_t i = 0; i < in; ++i) rows[size_t((k * H + j) * in + i)] = w[size_t(i * 4 * H + col)];
          bias[size_t(k * H + j)] = b[size_t(col)];
        }
    };
    out.emb = values("emb_w");
    gates(values("proj_w"), m.embed, out.w_ih, out.b_ih, values("proj_b"));
    gates(values("lstm_w"), H, out.w_hh, out.b_hh, values("lstm_b"));
    const std::vector<float> w = values("out_w");  // [H, V]
    out.w_out.assign(size_t(V * H), 0.f);
    for (int64_t v = 0; v < V; ++v)
      for (int64_t k = 0; k < H; ++k) out.w_out[size_t(v * H + k)] = w[size_t(k * V + v)];
    out.b_out = values("out_b");
  }

  CharLmResult train() {
    oar::set_num_threads(1);
    auto rule = oar::optim::adam(m.lr).with_schedule(oar::optim::cosine_decay(double(m.steps))).with_clip(oar::ClipByGlobalNorm(float(m.clip)));
    oar::Optimizer opt(*model, cost, rule);
    std::vector<oar::LoDTensor> out;
    CharLmResult r;
    const double t0 = cpu_s();
    for (int64_t step = 0; step < m.steps; ++step) {
      opt.step(batch(m.train, m.starts.data() + step * m.batch, size_t(m.batch)), out);
      r.losses.push_back(double(out[0].get(0)));
    }
    r.train_cpu_s = cpu_s() - t0;

    oar::Evaluator ev(*scorer);
    std::vector<int64_t> starts;
    for (int64_t s = 0; s + 1 < int64_t(m.valid.size()); s += m.chunk) starts.push_back(s);
    double total = 0;
    int64_t count = 0;
    for (size_t b = 0; b < starts.size(); b += size_t(m.valid_batch)) {
      auto res = ev.forward(batch(m.valid, starts.data() + b, std::min(size_t(m.valid_batch), starts.size() - b)));
      for (float v : res[0].span<float>()) total += v;
      count += res[0].dim(0);
    }
    r.valid_bpc = total / double(count) / std::log(2.0);
    return r;
  }
};

/// examples/char_lm.cpp's model, settings and data for kCharLmSteps steps, in oar and in LibTorch from the same
/// initial parameters on the same batches: validation bits per character (both sides score every validation
/// character the same way) and training steps per CPU second at 1 thread.
void bench_char_lm() {
  constexpr int64_t kCharLmSteps = 500;
  fortunes::Corpus text;
  try {
    text = fortunes::load();
  } catch (const std::exception& e) {
    info(std::string("char_lm skipped: ") + e.what());
    return;
  }
  CharLm m;
  m.train = std::move(text.train);
  m.valid = std::move(text.valid);
  m.vocab = fortunes::kVocab;
  m.embed = 64;
  m.hidden = 256;
  m.chunk = 100;
  m.batch = 32;
  m.steps = kCharLmSteps;
  m.lr = 1e-2;
  m.clip = 5;
  std::mt19937_64 rng(11);  // examples/char_lm.cpp's first batches
  std::uniform_int_distribution<size_t> pick(0, m.train.size() - size_t(m.chunk) - 2);
  for (int64_t i = 0; i < m.steps * m.batch; ++i) m.starts.push_back(int64_t(pick(rng)));

  OarCharLm net(m);
  net.export_initial(m);
  const CharLmResult o = net.train();
  const CharLmResult p = use_torch() ? torch_peer::char_lm(m) : CharLmResult{};
  const bool peer = use_torch();
  auto tail_mean = [](const std::vector<double>& l) {
    double s = 0;
    const size_t n = std::min<size_t>(50, l.size());
    for (size_t i = l.size() - n; i < l.size(); ++i) s += l[i];
    return n ? s / double(n) / std::log(2.0) : 0.0;
  };
  double early = 0;  // the two runs agree until rounding differences, amplified by training, part them
  for (size_t i = 0; peer && i < 20; ++i) early = std::max(early, std::abs(o.losses[i] - p.losses[i]) / std::log(2.0));
  char losses[320];
  std::snprintf(losses, sizeof losses,
                "training loss (bits/char) at step 1: oar %.5f, libtorch %.5f; largest difference over steps 1-20: %.2g; mean of the last 50 steps: oar %.4f, libtorch %.4f",
                o.losses.front() / std::log(2.0), peer ? p.losses.front() / std::log(2.0) : 0.0, early, tail_mean(o.losses), peer ? tail_mean(p.losses) : 0.0);
  const std::string setting = "embedding 64 -> LSTM 256 (no peepholes) -> linear 98, softmax cross-entropy on the next character; " +
                              std::to_string(m.steps) + " steps of 32 chunks x 100 characters from the same random starts, Adam 1e-2 on a cosine to 0, " +
                              "global-norm clip 5, the same initial parameters; oar: fc + dynamic_lstm over LoD sequences, Optimizer::step; " +
                              "libtorch: torch::nn::Embedding + LSTM + Linear, time-major, 1 thread";
  emit({"char_lm_valid_bpc", "bits/char", o.valid_bpc, peer ? "libtorch" : "", p.valid_bpc, 1,
        setting + "; validation: science, wisdom, sports, food (" + std::to_string(m.valid.size()) + " characters) in chunks of 100 from a zero state; " + losses, false});
  emit({"char_lm_train", "steps/s", double(m.steps) / o.train_cpu_s, peer ? "libtorch" : "", peer ? double(m.steps) / p.train_cpu_s : 0, 1,
        setting + " (batches built included); time: process CPU time of the whole run, one run each", true});
}

// ---------------------------------------------------------------- conv layers alone

/// A random f32 tensor (uniform [0, 1)).
oar::Tensor random_f32(oar::Shape shape, uint64_t seed) {
  std::vector<float> v(size_t(shape.numel()));
  std::mt19937 rng{uint32_t(seed)};
  std::uniform_real_distribution<float> dist(0, 1);
  for (auto& x : v) x = dist(rng);
  return oar::Tensor::from<float>(v, shape);
}

/// One conv layer alone as a one-op program on random inputs, run by a prepared executor: conv2d (forward) or
/// conv2d_grad (backward: the filter's gradient, and the input's when the layer needs it).
struct OarConvLayer {
  oar::Program prog;
  oar::Scope scope;
  oar::Executor exe;
  oar::FeedMap feeds;
  std::shared_ptr<oar::PreparedBlock> prepared;

  OarConvLayer(const ConvLayer& l, bool backward) {
    const int64_t o = l.out_hw();
    const auto s = int32_t(l.stride), p = int32_t(l.pad);
    oar::Block& b = prog.global_block();
    b.create_var("x", {.dtype = oar::f32, .shape = oar::Shape{l.n, l.c, l.hw, l.hw}});
    b.create_var("w", {.dtype = oar::f32, .shape = oar::Shape{l.m, l.c, l.k, l.k}});
    feeds = {{"x", oar::LoDTensor(random_f32({l.n, l.c, l.hw, l.hw}, 1))}, {"w", oar::LoDTensor(random_f32({l.m, l.c, l.k, l.k}, 2))}};
    using oar::ops::Conv2d;
    oar::Operator op{std::string(Conv2d::type) + (backward ? "_grad" : "")};
    op.set_input(Conv2d::input, {"x"}).set_input(Conv2d::filter, {"w"});
    op.set_attr(Conv2d::strides, std::vector<int32_t>{s, s}).set_attr(Conv2d::paddings, std::vector<int32_t>{p, p});
    op.set_attr(Conv2d::dilations, std::vector<int32_t>{1, 1}).set_attr(Conv2d::groups, int32_t(1));
    if (backward) {
      b.create_var("dy", {.dtype = oar::f32, .shape = oar::Shape{l.n, l.m, o, o}});
      feeds["dy"] = oar::LoDTensor(random_f32({l.n, l.m, o, o}, 3));
      op.set_input(Conv2d::output_grad, {"dy"}).set_output(Conv2d::input_grad, {l.input_grad ? "dx" : oar::kEmptyVarName});
      op.set_output(Conv2d::filter_grad, {"dw"});
    } else {
      op.set_output(Conv2d::output, {"y"});
    }
    oar::add_op(b, std::move(op));
    prepared = exe.prepare(prog, scope);
  }
  void run() { exe.run(*prepared, scope, feeds); }
};

/// Each conv layer of the book net alone, forward and backward, oar's conv2d / conv2d_grad kernel (a one-op
/// program) against LibTorch's at::conv2d / at::convolution_backward, 1 thread: how the kernels compare
/// without the rest of the net.
void bench_conv_layers() {
  const ConvLayer layers[] = {{"conv_layer1", kBatch, 1, 28, 20, 5, false}, {"conv_layer2", kBatch, 20, 12, 50, 5, true}};
  clock_for(1);
  for (const ConvLayer& l : layers)
    for (bool backward : {false, true}) {
      OarConvLayer layer(l, backward);
      OarRunner runner(1, [&] { layer.run(); });
      const std::string name = std::string(l.name) + (backward ? "_backward" : "_forward");
      const std::string what = fmt::format("input [{}, {}, {}, {}], filter [{}, {}, {}, {}], no bias; oar {} kernel vs LibTorch {}{}; {}", l.n, l.c, l.hw, l.hw, l.m,
                                           l.c, l.k, l.k, backward ? "conv2d_grad" : "conv2d", backward ? "at::convolution_backward" : "at::conv2d",
                                           backward ? (l.input_grad ? " (input and filter grads)" : " (filter grad only)") : "", clock_note(1));
      if (!use_torch()) {
        auto [to, tp] = interleave(runner, nullptr, g_opt.reps, g_opt.min_time);
        emit({name, "ms", to * 1e3, "", 0, 1, "LibTorch not found: no peer; " + what, false});
        continue;
      }
      auto on = torch_peer::conv_layer(l, backward, true), off = torch_peer::conv_layer(l, backward, false);
      auto [t_on, t_off] = interleave(*on, off.get(), 3, g_opt.min_time / 2);
      Runner* peer = t_on < t_off ? on.get() : off.get();
      auto [to, tp] = interleave(runner, peer, g_opt.reps, g_opt.min_time);
      emit({name, "ms", to * 1e3, "libtorch", tp * 1e3, 1,
            what + "; libtorch 1 thread, oneDNN " + (t_on < t_off ? "on" : "off") + " (faster of the two here)", false});
    }
}

// ---------------------------------------------------------------- resnet18: the net

constexpr int64_t kResnetBatch = 16;
constexpr int64_t kResnetPixels = 3 * 224 * 224;
constexpr uint64_t kResnetSeed = 17;

/// ResNet-18 written on oar's layers as a user would (torchvision's layout, as torch_peer::resnet18): conv 7x7/2
/// (64) + batch norm + relu, max pool 3x3/2, four stages of two basic blocks (64, 128, 256, 512 channels, the
/// first block of stages 2-4 with stride 2 and a 1x1 projection + batch norm on its shortcut), global average
/// pool, fc 1000, softmax cross-entropy; momentum SGD (lr 0.01, momentum 0.9) through Optimizer::step.
struct OarResnet18 {
  oar::Tape tape;
  oar::Var img, label, cost;
  std::unique_ptr<oar::Model> model;
  std::unique_ptr<oar::Optimizer> opt;
  oar::FeedMap feeds;
  std::vector<oar::LoDTensor> out;
  std::vector<double> losses;  ///< every step's loss

  /// conv k x k (stride s, padding k / 2, no bias: batch norm follows) + batch norm, then relu when asked.
  static oar::Var conv_bn(const oar::Var& x, int64_t filters, int64_t k, int64_t stride, bool relu) {
    auto bn = oar::batch_norm(oar::conv2d(x, filters, k).stride(stride).padding(k / 2).bias(false));
    if (relu) bn.act(oar::relu);
    return bn;
  }
  /// relu(bn(conv(relu(bn(conv(x))))) + shortcut), the shortcut projected when the shape changes.
  static oar::Var basic_block(const oar::Var& x, int64_t in, int64_t out, int64_t stride) {
    oar::Var h = conv_bn(conv_bn(x, out, 3, stride, true), out, 3, 1, false);
    oar::Var shortcut = stride != 1 || in != out ? conv_bn(x, out, 1, stride, false) : x;
    return oar::relu(h + shortcut);  // one fused_elementwise op
  }

  /// `batch` examples per step (`d` holds at least as many); `dp`: train data-parallel over its ranks.
  explicit OarResnet18(const Synthetic& d, int64_t batch = kResnetBatch, const oar::DataParallel* dp = nullptr) {
    img = oar::data("img", oar::f32, {-1, 3, 224, 224});
    label = oar::data("label", oar::i64, {-1, 1});
    oar::Var h = oar::pool2d(conv_bn(img, 64, 7, 2, true), 3).stride(2).padding(1);
    int64_t in = 64;
    for (int64_t width : {64, 128, 256, 512}) {
      h = basic_block(h, in, width, width == 64 ? 1 : 2);
      h = basic_block(h, width, width, 1);
      in = width;
    }
    oar::Var logits = oar::fc(oar::pool2d(h, 7).type(oar::PoolType::avg).global(), 1000);
    cost = oar::mean(oar::softmax_with_cross_entropy(logits, label));
    model = std::make_unique<oar::Model>(tape.program({cost}));
    opt = dp ? std::make_unique<oar::Optimizer>(*model, cost, oar::optim::momentum(0.01, 0.9), *dp)
             : std::make_unique<oar::Optimizer>(*model, cost, oar::optim::momentum(0.01, 0.9));
    feeds[model->name_of(img)] = oar::LoDTensor(oar::Tensor::from<float>(std::span<const float>(d.images).first(size_t(batch * kResnetPixels)), {batch, 3, 224, 224}));
    feeds[model->name_of(label)] = oar::LoDTensor(oar::Tensor::from<int64_t>(std::span<const int64_t>(d.labels).first(size_t(batch)), {batch, 1}));
  }
  void step() {
    opt->step(feeds, out);
    losses.push_back(double(out[0].get(0)));
  }
};

/// oar's thread setting around OarResnet18::step, its losses readable.
struct OarResnetRunner : OarRunner {
  const OarResnet18& net;
  OarResnetRunner(int threads, OarResnet18& n) : OarRunner(threads, [&n] { n.step(); }), net(n) {}
  const std::vector<double>* losses() const override { return &net.losses; }
};

// ---------------------------------------------------------------- peak memory (one process per framework)

/// In a fresh process (`oar_bench --child-mem <mlp|conv|resnet18|attention-SHAPE> <framework>`): trains 20 steps
/// (resnet18 and attention: 3), prints "MEM <VmHWM - VmRSS at start, MB> <oar tensor peak, MB>". Frameworks: oar,
/// libtorch (oneDNN on), libtorch-no-mkldnn (resnet18 only), dlib (not resnet18 nor attention).
int child_mem(const std::string& netname, const std::string& fw) {
  if (netname.rfind("attention-", 0) == 0) {
    const Sequences d = attention_batch(netname.substr(10));
    oar::set_num_threads(1);
    const double base_kb = status_kb("VmRSS:");
    oar::reset_peak_memory();
    std::unique_ptr<OarAttention> net;
    std::unique_ptr<Runner> r;
    if (fw == "oar") {
      net = std::make_unique<OarAttention>(d, kAttnHeads, true);
      r = std::make_unique<OarRunner>(1, [&] { net->step(); });
    } else if (fw == "libtorch") {
      r = torch_peer::attention(d, kAttnHeads, 1, true);
    }
    if (!r) return 2;
    r->enter();
    for (int i = 0; i < 3; ++i) r->step();
    r->leave();
    std::printf("MEM %.3f %.3f\n", (status_kb("VmHWM:") - base_kb) / 1024.0, fw == "oar" ? double(oar::memory_stats().peak.load()) / (1 << 20) : 0.0);
    return 0;
  }
  const bool conv = netname == "conv", resnet = netname == "resnet18";
  Synthetic d = resnet ? make_synthetic(kResnetBatch, kResnetPixels, kResnetSeed, 1000) : make_synthetic(kBatch, 784, 11);
  oar::set_num_threads(1);
  const double base_kb = status_kb("VmRSS:");
  oar::reset_peak_memory();
  std::unique_ptr<Runner> r;
  std::unique_ptr<OarNet> net;
  std::unique_ptr<OarResnet18> resnet_net;
  if (fw == "oar" && resnet) {
    resnet_net = std::make_unique<OarResnet18>(d);
    r = std::make_unique<OarResnetRunner>(1, *resnet_net);
  } else if (fw == "oar") {
    net = std::make_unique<OarNet>(conv, true, d, kBatch);
    net->check_step();
    r = std::make_unique<OarRunner>(1, [&] { net->step(); });
  } else if (resnet && (fw == "libtorch" || fw == "libtorch-no-mkldnn")) {
    r = torch_peer::resnet18(d, kResnetBatch, 1, fw == "libtorch");
  } else if (fw == "libtorch") {
    r = conv ? torch_peer::conv(d, kBatch, 1, true, true) : torch_peer::mlp(d, kBatch, 1, true);
  } else if (fw == "dlib" && !resnet) {
    r = conv ? dlib_peer::conv_train(d, kBatch, 1) : dlib_peer::mlp_train(d, kBatch, 1);
  }
  if (!r) return 2;
  r->enter();
  for (int i = 0; i < (resnet ? 3 : 20); ++i) r->step();
  r->leave();
  std::printf("MEM %.3f %.3f\n", (status_kb("VmHWM:") - base_kb) / 1024.0, fw == "oar" ? double(oar::memory_stats().peak.load()) / (1 << 20) : 0.0);
  return 0;
}

bool run_child_mem(const std::string& netname, const std::string& fw, double& hwm_mb, double& oar_mb) {
  std::string cmd = "/proc/" + std::to_string(::getpid()) + "/exe --child-mem " + netname + " " + fw;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return false;
  char buf[256];
  bool ok = false;
  while (std::fgets(buf, sizeof buf, p))
    if (std::sscanf(buf, "MEM %lf %lf", &hwm_mb, &oar_mb) == 2) ok = true;
  return ::pclose(p) == 0 && ok;
}

void bench_memory(bool conv) {
  const std::string netname = conv ? "conv" : "mlp";
  double oar_hwm = 0, oar_tensors = 0, dummy = 0;
  if (!run_child_mem(netname, "oar", oar_hwm, oar_tensors)) {
    info(netname + "_train_peak_mem: the oar child failed");
    return;
  }
  const std::string how = "batch 64, 20 training steps at 1 thread, each framework in its own process; ";
  for (const char* fw : {"libtorch", "dlib"}) {
    if (std::string(fw) == "libtorch" ? !use_torch() : !use_dlib()) continue;
    double peer_hwm = 0;
    if (!run_child_mem(netname, fw, peer_hwm, dummy)) {
      info(netname + "_train_peak_mem: the " + fw + " child failed");
      continue;
    }
    emit({netname + "_train_peak_mem", "MB", oar_tensors, fw, peer_hwm, 1,
          how + "oar: oar::memory_stats().peak (tensor bytes); " + fw + ": VmHWM - VmRSS at start", false});
    emit({netname + "_train_peak_rss", "MB", oar_hwm, fw, peer_hwm, 1, how + "both: VmHWM - VmRSS at start of the process's work", false});
  }
}

// ---------------------------------------------------------------- resnet18: the measurements

/// Fails loudly unless the loss of `r`'s first steps (up to 5) fell from the first to the last and stayed finite.
void check_loss_falls(const std::string& who, const Runner& r) {
  const std::vector<double>* l = r.losses();
  const size_t n = l ? std::min<size_t>(5, l->size()) : 0;
  std::string seq;
  bool finite = true;
  for (size_t i = 0; i < n; ++i) {
    seq += fmt::format("{}{:.4f}", i ? ", " : "", (*l)[i]);
    finite = finite && std::isfinite((*l)[i]);
  }
  info("resnet18: " + who + ": loss of steps 1-" + std::to_string(n) + ": " + seq);
  if (n < 2 || !finite || !((*l)[n - 1] < (*l)[0]))
    throw std::runtime_error("resnet18: the loss of " + who + " did not fall over its first steps (" + seq + ")");
}

/// Training steps/s at 1 and 2 threads: oar against LibTorch with oneDNN on and off (each a fresh net per
/// thread count; oar's one net goes on training). Each block: 2 warm-up steps, then at least 3 steps and
/// `min_time` seconds; the three sides rotate over `reps` rounds. Then oar's step at 1 thread under the
/// profiler: the share of conv2d and conv2d_grad.
void bench_resnet18_train(const Synthetic& d, int reps, double min_time) {
  OarResnet18 net(d);
  {  // the first step times the convolution kernels of every new shape (kernels/cpu/conv_choice.hpp)
    clock_for(1);
    oar::set_num_threads(1);
    const double t0 = now_s();
    net.step();
    const double t1 = now_s();
    net.step();
    info(fmt::format("resnet18: oar's first step at 1 thread took {:.2f} s (it times the convolution kernels for each new shape), the second {:.2f} s",
                     t1 - t0, now_s() - t1));
    for (const std::string& line : oar::cpu_kernels::conv_choice_report()) info("resnet18: oar's convolution kernel for " + line);
  }
  for (int thr : {1, 2}) {
    clock_for(thr);
    OarResnetRunner o(thr, net);
    std::vector<std::unique_ptr<Runner>> peers;  // oneDNN on, off
    if (use_torch())
      for (bool mkldnn : {true, false}) peers.push_back(torch_peer::resnet18(d, kResnetBatch, thr, mkldnn));
    std::vector<Runner*> all{&o};
    for (auto& p : peers) all.push_back(p.get());
    const auto t = time_rotating(all, reps, min_time, 2, 3);
    if (thr == 1) check_loss_falls("oar", o);
    for (size_t i = 0; i < peers.size(); ++i) check_loss_falls(fmt::format("libtorch oneDNN {}, {}", i == 0 ? "on" : "off", fmt_threads(thr)), *peers[i]);
    const double to = median(t[0]);
    const std::string what = "batch 16 x 3 x 224 x 224 f32, 1000 classes, momentum SGD 0.01 / 0.9, one step = forward + backward + update; oar "
                             "Optimizer::step (GEMM " + oar::cpu_kernels::gemm_backend_name() + "); " + std::to_string(reps) +
                             " round(s) of 2 warm-up + >= 3 steps and >= " + fmt::format("{:g}", min_time) + " s; " + clock_note(thr);
    if (peers.empty()) {
      emit({"resnet18_train", "steps/s", 1 / to, "", 0, thr, "LibTorch not found: no peer; " + what, true});
      continue;
    }
    const double t_on = median(t[1]), t_off = median(t[2]);
    const std::string setting = torch_setting(thr) + ", torch::nn ResNet-18, torch::optim::SGD, cross_entropy on logits";
    emit({"resnet18_train_mkldnn_on", "steps/s", 1 / to, "libtorch", 1 / t_on, thr, what + "; " + setting + ", oneDNN on", true});
    emit({"resnet18_train_mkldnn_off", "steps/s", 1 / to, "libtorch", 1 / t_off, thr, what + "; " + setting + ", oneDNN off", true});
    emit({"resnet18_train", "steps/s", 1 / to, "libtorch", 1 / std::min(t_on, t_off), thr,
          what + "; " + setting + ", the faster of oneDNN on / off: " + (t_on < t_off ? "on" : "off"), true});
  }

  // Where oar's step goes: 2 steps at 1 thread under the profiler (per op with --profile, which prints the table).
  oar::set_num_threads(1);
  std::vector<oar::OpTime> times;
  {
    oar::Profiler prof(g_opt.profile);
    for (int i = 0; i < 2; ++i) net.step();
    times = prof.times();
    if (g_opt.profile) info("resnet18_train: oar::Profiler, 2 steps, 1 thread, per op\n" + prof.report());
  }
  std::map<std::string, double> by_type;  // ms per step
  double total = 0;
  for (const oar::OpTime& ot : times) {
    const double ms = double(ot.total_ns) * 1e-6 / 2;
    by_type[ot.op.substr(0, ot.op.find(" -> "))] += ms;
    total += ms;
  }
  std::vector<std::pair<double, std::string>> ranked;
  for (auto& [op, ms] : by_type) ranked.emplace_back(ms, op);
  std::sort(ranked.rbegin(), ranked.rend());
  std::string top;
  for (size_t i = 0; i < ranked.size() && i < 8; ++i) top += fmt::format("{}{} {:.0f} ms ({:.1f}%)", i ? ", " : "", ranked[i].second, ranked[i].first, 100 * ranked[i].first / total);
  info(fmt::format("resnet18_train: oar's step at 1 thread under oar::Profiler (2 steps, wall time): the kernels take {:.0f} ms per step; {}", total, top));
}

/// ResNet-18's distinct convolutions at batch 16, and how many the net has of each.
struct ResnetConv {
  ConvLayer l;
  int count;
};
const ResnetConv kResnetConvs[] = {
    {{"stem_c3_h224_k7_s2", kResnetBatch, 3, 224, 64, 7, false, 2, 3}, 1},
    {{"c64_h56_k3_s1", kResnetBatch, 64, 56, 64, 3, true, 1, 1}, 4},
    {{"c64_h56_k3_s2", kResnetBatch, 64, 56, 128, 3, true, 2, 1}, 1},
    {{"c64_h56_k1_s2", kResnetBatch, 64, 56, 128, 1, true, 2, 0}, 1},
    {{"c128_h28_k3_s1", kResnetBatch, 128, 28, 128, 3, true, 1, 1}, 3},
    {{"c128_h28_k3_s2", kResnetBatch, 128, 28, 256, 3, true, 2, 1}, 1},
    {{"c128_h28_k1_s2", kResnetBatch, 128, 28, 256, 1, true, 2, 0}, 1},
    {{"c256_h14_k3_s1", kResnetBatch, 256, 14, 256, 3, true, 1, 1}, 3},
    {{"c256_h14_k3_s2", kResnetBatch, 256, 14, 512, 3, true, 2, 1}, 1},
    {{"c256_h14_k1_s2", kResnetBatch, 256, 14, 512, 1, true, 2, 0}, 1},
    {{"c512_h7_k3_s1", kResnetBatch, 512, 7, 512, 3, true, 1, 1}, 3},
};

/// Each distinct convolution alone at 1 thread, forward (oar conv2d vs torch::conv2d) and backward (oar
/// conv2d_grad vs autograd's backward of torch::conv2d), LibTorch with oneDNN on and off (the faster one is
/// the peer); the three rotate over `reps` rounds. Then the count-weighted sums: the convolutions of one step.
void bench_resnet18_convs(int reps) {
  clock_for(1);
  double sum_oar = 0, sum_torch = 0, sum_oar2 = 0;
  for (const ResnetConv& rc : kResnetConvs) {
    const ConvLayer& l = rc.l;
    oar::cpu_kernels::ConvGeom g;
    g.c = l.c, g.h = g.w = l.hw, g.kh = g.kw = l.k, g.sh = g.sw = l.stride, g.ph = g.pw = l.pad, g.oh = g.ow = l.out_hw();
    const double gflop = 2.0 * double(l.n * l.m * l.c * l.k * l.k * l.out_hw() * l.out_hw()) * 1e-9;  // one product
    for (bool backward : {false, true}) {
      OarConvLayer layer(l, backward);
      OarRunner o(1, [&] { layer.run(); });
      std::vector<std::unique_ptr<Runner>> peers;
      if (use_torch())
        for (bool mkldnn : {true, false}) peers.push_back(backward ? torch_peer::conv_layer_autograd(l, mkldnn) : torch_peer::conv_layer(l, false, mkldnn));
      std::vector<Runner*> all{&o};
      for (auto& p : peers) all.push_back(p.get());
      const auto t = time_rotating(all, reps, g_opt.min_time);
      const double to = median(t[0]);
      using oar::cpu_kernels::ConvPass;
      const oar::cpu_kernels::ConvShapeKey key(backward ? (l.input_grad ? ConvPass::backward_both : ConvPass::backward_dw) : ConvPass::forward, sizeof(float), l.n, g,
                                               l.m, 1);
      const char* algo = oar::cpu_kernels::conv_kernel_in_use(key, g, l.m, 1);
      const double products = backward ? (l.input_grad ? 2 : 1) : 1;
      const std::string name = fmt::format("resnet18_conv_{}_{}", l.name, backward ? "bwd" : "fwd");
      std::string what = fmt::format("x{} in the net; input [{}, {}, {}, {}], filter [{}, {}, {}, {}], stride {}, padding {}, no bias; oar {} ({}), {:.1f} GFLOP/s",
                                     rc.count, l.n, l.c, l.hw, l.hw, l.m, l.c, l.k, l.k, l.stride, l.pad, backward ? "conv2d_grad" : "conv2d", algo,
                                     products * gflop / to);
      sum_oar += rc.count * to;
      {  // the same at 2 threads (wall clock): how well oar's kernel splits this shape
        clock_for(2);
        OarRunner o2(2, [&] { layer.run(); });
        std::vector<double> t2;
        for (int r = 0; r < reps; ++r) t2.push_back(time_block(o2, g_opt.min_time));
        clock_for(1);
        sum_oar2 += rc.count * median(t2);
        emit({name + "_2thr", "ms", median(t2) * 1e3, "oar_1_thread", to * 1e3, 2,
              fmt::format("oar alone at 2 threads (wall clock) against its own 1-thread time (process CPU time): the ratio is the speed-up of 2 threads; oar {}",
                          algo),
              false});
      }
      if (peers.empty()) {
        emit({name, "ms", to * 1e3, "", 0, 1, "LibTorch not found: no peer; " + what, false});
        continue;
      }
      const double t_on = median(t[1]), t_off = median(t[2]);
      sum_torch += rc.count * std::min(t_on, t_off);
      what += fmt::format("; libtorch {} ({}), 1 thread, oneDNN on {:.2f} ms, off {:.2f} ms (the faster is the peer); {}",
                          backward ? "autograd backward of torch::conv2d" : "torch::conv2d", backward ? (l.input_grad ? "input and filter grads" : "filter grad only") : "forward",
                          t_on * 1e3, t_off * 1e3, clock_note(1));
      emit({name, "ms", to * 1e3, "libtorch", std::min(t_on, t_off) * 1e3, 1, what, false});
    }
  }
  info(fmt::format("resnet18 convolutions of one step at 2 threads: oar {:.0f} ms ({:.2f}x its 1-thread sum)", sum_oar2 * 1e3, sum_oar / sum_oar2));
  info(fmt::format("resnet18 convolutions of one step (each shape alone x its count in the net, forward + backward, 1 thread): oar {:.0f} ms{}", sum_oar * 1e3,
                   use_torch() ? fmt::format(", libtorch {:.0f} ms (the faster oneDNN setting per shape)", sum_torch * 1e3) : std::string()));
}

/// Peak RSS of 3 training steps at 1 thread, each framework in its own process.
void bench_resnet18_memory() {
  double oar_hwm = 0, oar_tensors = 0, dummy = 0;
  if (!run_child_mem("resnet18", "oar", oar_hwm, oar_tensors)) throw std::runtime_error("resnet18: the oar memory child failed");
  const std::string how = "batch 16, 3 training steps at 1 thread, each in its own process; VmHWM - VmRSS at start; oar's tensors peak at " +
                          fmt::format("{:.0f}", oar_tensors) + " MB (oar::memory_stats().peak)";
  if (!use_torch()) {
    emit({"resnet18_train_peak_rss", "MB", oar_hwm, "", 0, 1, "LibTorch not found: no peer; " + how, false});
    return;
  }
  for (const char* fw : {"libtorch", "libtorch-no-mkldnn"}) {
    double peer_hwm = 0;
    if (!run_child_mem("resnet18", fw, peer_hwm, dummy)) throw std::runtime_error(std::string("resnet18: the ") + fw + " memory child failed");
    emit({std::string("resnet18_train_peak_rss") + (fw == std::string("libtorch") ? "_mkldnn_on" : "_mkldnn_off"), "MB", oar_hwm, "libtorch", peer_hwm, 1,
          how + "; libtorch oneDNN " + (fw == std::string("libtorch") ? "on" : "off"), false});
  }
}

/// The resnet18 group (run only when named: it takes minutes). Its own defaults: 1 round of training blocks of
/// >= 5 s, 3 rounds per conv shape; --reps / --min-time override them.
void bench_resnet18() {
  const Synthetic d = make_synthetic(kResnetBatch, kResnetPixels, kResnetSeed, 1000);
  info("resnet18: oar GEMM " + oar::cpu_kernels::gemm_backend_name() + ", conv algorithm setting " +
       std::string(oar::conv_algorithm() == oar::ConvAlgorithm::automatic ? "automatic (timed per shape)"
                   : oar::conv_algorithm() == oar::ConvAlgorithm::im2col  ? "im2col"
                   : oar::conv_algorithm() == oar::ConvAlgorithm::winograd ? "winograd"
                                                                          : "winograd_small") +
       (std::getenv("OPENBLAS_CORETYPE") ? std::string(", OPENBLAS_CORETYPE=") + std::getenv("OPENBLAS_CORETYPE") : std::string(", OPENBLAS_CORETYPE unset")));
  const double t0 = now_s();
  bench_resnet18_train(d, g_opt.reps_set ? g_opt.reps : 1, g_opt.min_time_set ? g_opt.min_time : 5.0);
  bench_resnet18_convs(g_opt.reps_set ? g_opt.reps : 3);
  bench_resnet18_memory();
  info(fmt::format("resnet18: {:.0f} s in all", now_s() - t0));
}


// ---------------------------------------------------------------- dist: data-parallel training over MPI

/// One measurement of data-parallel training: seconds per step (the median over blocks), and per step the
/// seconds the communicator spent in collectives and the seconds the step waited for them (the part the
/// backward pass did not hide).
struct DistTiming {
  double step_s = 0, comm_s = 0, waited_s = 0;
};

/// Times `steps` (after 2 warm-up steps) of `net` in blocks of `block` steps: wall clock (ranks run at once).
template <class Step>
DistTiming time_dist(Step&& step, oar::Communicator* c, int blocks, int block) {
  step();
  step();
  std::vector<double> per;
  if (c) c->reset_stats();
  for (int b = 0; b < blocks; ++b) {
    const double t0 = now_s();
    for (int i = 0; i < block; ++i) step();
    per.push_back((now_s() - t0) / block);
  }
  DistTiming t{median(per), 0, 0};
  if (c) {
    auto st = c->stats();
    t.comm_s = st.busy_seconds / (blocks * block);
    t.waited_s = st.waited_seconds / (blocks * block);
  }
  return t;
}

/// `oar_bench --child-dist conv|resnet18|latency BLOCKS BLOCK BUCKET_BYTES OVERLAP [THREADS]` under mpirun (or
/// alone: a world of one): one rank on THREADS threads (1) with the per-rank batch times THREADS; rank 0 prints
/// "DIST step_s comm_s waited_s gradient_bytes" (the slowest rank's times; bench/dist_netns.sh reads it too).
int child_dist(int argc, char** argv) {
  oar::dist::Context ctx(argc, argv);
  const std::string net = argv[2];
  const int blocks = std::atoi(argv[3]), block = std::atoi(argv[4]);
  const int threads = argc > 7 ? std::atoi(argv[7]) : 1;
  oar::DataParallel dp = oar::dist::data_parallel(ctx).bucket_bytes(std::atoll(argv[5])).overlap(std::atoi(argv[6]) != 0);
  oar::set_num_threads(threads);
  if (net == "latency") {  // seconds per all-reduce of 8 bytes and of BLOCK MB (BLOCKS: calls of each)
    std::vector<float> big(size_t(block) * 262144, 1.f);
    double one = 1, per[2] = {0, 0};
    auto& comm = *ctx.communicator();
    for (int k = 0; k < 2; ++k) {
      auto call = [&] { k == 0 ? comm.all_reduce_sum(&one, 1, oar::DType::f64, "latency") : comm.all_reduce_sum(big.data(), int64_t(big.size()), oar::DType::f32, "latency"); };
      for (int i = 0; i < 10; ++i) call();
      const double t0 = now_s();
      for (int i = 0; i < blocks; ++i) call();
      per[k] = (now_s() - t0) / blocks;
    }
    if (ctx.is_root()) std::printf("DIST %.9g %.9g 0 0\n", per[0], per[1]);
    return 0;
  }
  DistTiming t;
  double grad_bytes = 0;
  auto bytes_of = [&](const oar::Optimizer& opt) {
    for (auto& pg : opt.machine().params_grads()) grad_bytes += double(opt.model().parameter(pg.param).bytes());
  };
  if (net == "conv") {
    Synthetic d = make_synthetic(kBatch * threads, 784, 11 + uint64_t(ctx.rank()));
    OarNet n(true, true, d, kBatch * threads, false, &dp);
    bytes_of(*n.opt);
    t = time_dist([&] { n.step(); }, ctx.communicator().get(), blocks, block);
  } else {
    Synthetic d = make_synthetic(kResnetBatch * threads, kResnetPixels, kResnetSeed + uint64_t(ctx.rank()), 1000);
    OarResnet18 n(d, kResnetBatch * threads, &dp);
    bytes_of(*n.opt);
    t = time_dist([&] { n.step(); }, ctx.communicator().get(), blocks, block);
  }
  // The slowest rank sets the pace: report the largest step time.
  double v[3] = {t.step_s, t.comm_s, t.waited_s};
  std::vector<int64_t> sizes;
  std::vector<char> all = ctx.communicator()->all_gather(v, sizeof v, sizes, "bench timings");
  double worst[3] = {0, 0, 0};
  for (int r = 0; r < ctx.world_size(); ++r) {
    double x[3];
    std::memcpy(x, all.data() + size_t(r) * sizeof x, sizeof x);
    for (int k = 0; k < 3; ++k) worst[k] = std::max(worst[k], x[k]);
  }
  if (ctx.is_root()) std::printf("DIST %.9g %.9g %.9g %.0f\n", worst[0], worst[1], worst[2], grad_bytes);
  return 0;
}

/// Runs `ranks` ranks of child_dist under mpirun (0: one process of `threads` threads, without mpirun; -2: two
/// such processes at once, one per core, that do not communicate: the machine's own ceiling for two ranks) and
/// reads rank 0's line (with -2 the slower process's).
DistTiming run_ranks(int ranks, const std::string& net, int blocks, int block, int64_t bucket, bool overlap, int threads = 1) {
  const std::string child = fmt::format("/proc/{}/exe --child-dist {} {} {} {} {} {}", ::getpid(), net, blocks, block, bucket, overlap ? 1 : 0, threads);
  const std::string cmd =
      ranks == 0    ? child + " 2>&1"
      : ranks == -2 ? fmt::format("(taskset -c 0 {} & taskset -c 1 {}; wait) 2>&1", child, child)
                    : fmt::format("OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun --bind-to core -np {} {} 2>&1", ranks, child);
  FILE* f = ::popen(cmd.c_str(), "r");
  if (!f) throw std::runtime_error("dist: cannot start mpirun");
  char line[4096];
  DistTiming t;
  bool got = false;
  std::string all;
  while (std::fgets(line, sizeof line, f)) {
    all += line;
    DistTiming one;
    if (std::sscanf(line, "DIST %lf %lf %lf", &one.step_s, &one.comm_s, &one.waited_s) == 3 && one.step_s > t.step_s) t = one, got = true;
  }
  const int rc = ::pclose(f);
  if (!got || rc != 0) throw std::runtime_error("dist: " + cmd + " failed:\n" + all);
  return t;
}

/// 2 ranks x 1 thread (mpirun on this machine) against 1 process x 1 thread and 1 process x 2 threads (the
/// global batch in one process), book conv net (64 per rank) and ResNet-18 (16 per rank), weak scaling. Every
/// setting runs in a fresh process of the same code (child_dist), in rounds that take turns, so that a slow
/// phase of the shared machine hits them alike; each figure is the median over the rounds.
void bench_dist() {
  if (std::system("command -v mpirun > /dev/null 2>&1") != 0) {
    info("dist: mpirun not found (Debian openmpi-bin): skipped");
    return;
  }
  const DistTiming lat = run_ranks(2, "latency", 200, 1, 0, true);
  emit({"dist_allreduce_8B", "us", 1e6 * lat.step_s, "", 0, 1, "2 ranks, shared memory, oar's ring all-reduce of one double (the loss and metrics)", false});
  emit({"dist_allreduce_1MB", "us", 1e6 * lat.comm_s, "", 0, 1, "2 ranks, shared memory, 262144 floats", false});
  struct Net {
    std::string name;
    int64_t batch;
    int blocks, block;
  };

  const int64_t bucket = int64_t(25) << 20;
  for (const Net& n : {Net{"conv", kBatch, 5, 10}, Net{"resnet18", kResnetBatch, 2, 2}}) {
    const int rounds = g_opt.reps_set ? g_opt.reps : n.name == "conv" ? 5 : 3;
    std::vector<double> t1, t12, t2, t2_off, comm, waited, waited_off, t_apart;
    for (int r = 0; r < rounds; ++r) {
      t1.push_back(run_ranks(0, n.name, n.blocks, n.block, bucket, true, 1).step_s);
      t_apart.push_back(run_ranks(-2, n.name, n.blocks, n.block, bucket, true, 1).step_s);
      t12.push_back(run_ranks(0, n.name, n.blocks, n.block, bucket, true, 2).step_s);
      const DistTiming on = run_ranks(2, n.name, n.blocks, n.block, bucket, true);
      const DistTiming off = run_ranks(2, n.name, n.blocks, n.block, bucket, false);
      t2.push_back(on.step_s), comm.push_back(on.comm_s), waited.push_back(on.waited_s);
      t2_off.push_back(off.step_s), waited_off.push_back(off.waited_s);
    }
    const bool conv = n.name == "conv";
    const double ex1 = double(n.batch) / median(t1), ex12 = 2.0 * double(n.batch) / median(t12), ex2 = 2.0 * double(n.batch) / median(t2);
    const double c = median(comm), w = median(waited);
    const std::string what = fmt::format("{} batch {} per rank, weak scaling; mpirun -np 2 --bind-to core on this machine (shared memory); median of {} rounds",
                                         conv ? "book conv net" : "ResNet-18", n.batch, rounds);
    emit({"dist_" + n.name + "_2ranks", "examples/s", ex2, "1 process 1 thread", ex1, 1, what + "; target >= 1.9", true});
    emit({"dist_" + n.name + "_2ranks_vs_2_apart", "examples/s", ex2, "2 processes apart", 2.0 * double(n.batch) / median(t_apart), 1,
          "two one-thread processes at once, one per core, without communicating (the slower one's pace): the ceiling this machine allows two ranks", true});
    emit({"dist_" + n.name + "_2ranks_vs_2threads", "examples/s", ex2, "1 process 2 threads", ex12, 2,
          fmt::format("the same global batch ({}) in one process on 2 threads", 2 * n.batch), true});
    emit({"dist_" + n.name + "_allreduce_share", "%", 100 * c / median(t2), "", 0, 1,
          fmt::format("of a step on the communicator's thread ({:.2f} ms); {:.0f}% of it hidden behind the backward pass ({:.2f} ms waited per step, "
                      "the wait for the slower rank included)",
                      1e3 * c, c > 0 ? 100 * std::max(0.0, c - w) / c : 0, 1e3 * w),
          false});
    emit({"dist_" + n.name + "_2ranks_no_overlap", "examples/s", 2.0 * double(n.batch) / median(t2_off), "with overlap", ex2, 1,
          fmt::format("every bucket summed after the backward pass; {:.2f} ms waited per step", 1e3 * median(waited_off)), true});
  }
}
}  // namespace
}  // namespace bench

int main(int argc, char** argv) try {
  using namespace bench;
  if (argc >= 4 && std::strcmp(argv[1], "--child-mem") == 0) return child_mem(argv[2], argv[3]);
  if (argc >= 7 && std::strcmp(argv[1], "--child-dist") == 0) return child_dist(argc, argv);
  // LibTorch's best 2-thread setting needs OMP_WAIT_POLICY=passive before libgomp starts: set it and re-exec.
  // --openblas-core NAME sets OPENBLAS_CORETYPE (read when OpenBLAS loads) likewise.
  bool reexec = false;
  if (!std::getenv("OMP_WAIT_POLICY")) {
    ::setenv("OMP_WAIT_POLICY", "passive", 1);
    reexec = true;
  }
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], "--openblas-core") == 0) {
      const char* cur = std::getenv("OPENBLAS_CORETYPE");
      if (!cur || std::strcmp(cur, argv[i + 1]) != 0) {
        ::setenv("OPENBLAS_CORETYPE", argv[i + 1], 1);
        reexec = true;
      }
    }
  if (reexec) ::execv("/proc/self/exe", argv);
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--json") g_opt.json = true;
    else if (a == "--reps" && i + 1 < argc) g_opt.reps = std::max(1, std::atoi(argv[++i])), g_opt.reps_set = true;
    else if (a == "--min-time" && i + 1 < argc) g_opt.min_time = std::atof(argv[++i]), g_opt.min_time_set = true;
    else if (a == "--no-peers") g_opt.no_peers = true;
    else if (a == "--profile") g_opt.profile = true;
    else if (a == "--openblas-core" && i + 1 < argc) ++i;  // applied above
    else if (a == "--device" && i + 1 < argc) g_opt.device = argv[++i];
    else if (a == "--cuda-sync" && i + 1 < argc) {
      const std::string v = argv[++i];
      if (v != "spin" && v != "block") throw std::runtime_error("--cuda-sync must be spin or block, got '" + v + "'");
      g_opt.cuda_spin = v == "spin";
    }
    else if (a == "-h" || a == "--help") {
      std::printf("usage: oar_bench [--json] [--reps N (5)] [--min-time S (0.25)] [--openblas-core NAME] [--no-peers] [--profile] [--device cuda [--cuda-sync block|spin]] [filter]\n"
                  "  --openblas-core NAME: set OPENBLAS_CORETYPE (e.g. SkylakeX, Haswell) for every framework\n"
                  "  --no-peers: measure oar alone (for profiling it)\n"
                  "  --profile: print oar's time per op type (oar::Profiler) for each net, 1 thread\n"
                  "  --device cuda: the GPU group alone: SGEMM against cuBLAS, MLP and conv net training at batch 64 and 512\n"
                  "  --cuda-sync spin: the host spins while it waits for the GPU (rows *_spin, no CPU-time rows); block (default)\n"
                  "benchmarks: sgemm op_overhead nd mlp_forward conv_forward conv_layer mlp_train conv_train lstm char_lm (filter: substring);\n"
                  "  dist (2 ranks under mpirun against 1 process: conv net and ResNet-18; minutes; runs only when named)\n"
                  "  attention (multi-head attention against LibTorch, T 128 / 512 / 2048 and ragged, peak memory; minutes; runs only when named)\n"
                  "  resnet18 (minutes; runs only when named: its own defaults 1 round of >= 5 s training blocks, 3 rounds per conv shape)\n"
                  "  mlp_forward and mlp_train also print gemm_bound: their large products alone on OpenBLAS, a rate no framework can pass\n");
      return 0;
    } else g_opt.filter = a;
  }
  info("cpu: " + cpu_model() + ", nproc " + std::to_string(::sysconf(_SC_NPROCESSORS_ONLN)) + ", load " + loadavg());
#if defined(OAR_WITH_BLAS)
  info(std::string("openblas: core ") + openblas_get_corename() + ", " + openblas_get_config() +
       (std::getenv("OPENBLAS_CORETYPE") ? std::string(", OPENBLAS_CORETYPE=") + std::getenv("OPENBLAS_CORETYPE") : std::string()));
  if (std::string(openblas_get_corename()) == "Prescott" && __builtin_cpu_supports("avx2"))
    info("note: OpenBLAS fell back to its generic Prescott (SSE3) kernels on this AVX2 CPU (model not known to it); "
         "--openblas-core SkylakeX or Haswell selects fast kernels for oar and the peers alike");
#endif
  info("libtorch: " + torch_peer::version() + ", dlib: " + dlib_peer::version() + ", OMP_WAIT_POLICY=" + std::getenv("OMP_WAIT_POLICY") + ", reps " +
       std::to_string(g_opt.reps) + " (median), block >= " + std::to_string(g_opt.min_time) + " s");
  if (g_opt.device == "cuda") return cuda_bench::run(emit, info, g_opt.reps, g_opt.min_time, g_opt.cuda_spin) ? 0 : 1;
  if (g_opt.device != "cpu") throw std::runtime_error("--device must be cpu or cuda, got '" + g_opt.device + "'");
  if (selected("sgemm")) bench_sgemm();
  if (selected("op_overhead")) bench_op_overhead();
  if (selected("nd")) bench_nd();
  if (selected("mlp_forward")) bench_forward(false);
  if (selected("conv_forward")) bench_forward(true);
  if (selected("conv_layer")) bench_conv_layers();
  if (selected("mlp_train")) {
    bench_train(false);
    bench_memory(false);
  }
  if (selected("conv_train")) {
    bench_train(true);
    bench_memory(true);
  }
  if (selected("lstm")) bench_lstm();
  if (selected("char_lm")) bench_char_lm();
  if (!g_opt.filter.empty() && selected("attention")) bench_attention();
  if (!g_opt.filter.empty() && selected("resnet18")) bench_resnet18();
  if (!g_opt.filter.empty() && selected("dist")) bench_dist();
  info("load at the end " + loadavg());
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "oar_bench: %s\n", e.what());
  return 1;
}
