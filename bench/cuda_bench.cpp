// bench/cuda_bench.cpp: oar_bench --device cuda: SGEMM (full f32 and TF32) and 16-bit GEMMs through oar's mul
// kernel against cuBLAS called directly (the bound: oar adds nothing around it), and the MLP and the book conv net training on the GPU at
// batch 64 and 512 (examples/s, the host's CPU time per step, the share of the step in cuDNN/cuBLAS kernels, in
// oar's own, in copies and with the device idle from CUPTI, peak device memory; each also as the loop of
// Optimizer::step_async, which reads a step's loss after queuing the next), and char_lm's LSTM training (chars/s). LibTorch here is Debian's CPU
// build, so cuBLAS is the only peer. Without a device (or in a build without CUDA) it says so and measures nothing.
#include <oar/oar.hpp>
#include <oar/ops/mul.hpp>

#include <fmt/format.h>

#include <cstdio>
#include <random>

#include "common.hpp"

#if OAR_WITH_CUDA
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cupti.h>

#include <cxxabi.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <mutex>
#endif

namespace bench::cuda_bench {

namespace {

#if OAR_WITH_CUDA
/// Seconds per call of `step` (which queues work on the device): blocks of `k` calls closed by a device
/// synchronisation, until `min_time` has passed; the median of `reps` blocks.
template <class F>
double device_time(F&& step, int k, int reps, double min_time) {
  for (int i = 0; i < 2; ++i) step();
  cudaDeviceSynchronize();
  std::vector<double> per;
  for (int r = 0; r < reps; ++r) {
    int n = 0;
    const double t0 = now_s();
    double t1;
    do {
      for (int i = 0; i < k; ++i) step();
      cudaDeviceSynchronize();
      n += k;
      t1 = now_s();
    } while (t1 - t0 < min_time);
    per.push_back((t1 - t0) / n);
  }
  return median(per);
}

/// device_time of two steps measured in turns, block by block (a: a block, b: a block, ...), so that a GPU's
/// clocks drifting over the run (heat, power) fall on both alike: the medians of each.
template <class A, class B>
std::pair<double, double> device_time_paired(A&& a, B&& b, int k, int reps, double min_time) {
  std::vector<double> ta, tb;
  for (int r = 0; r < reps; ++r) {
    ta.push_back(device_time(a, k, 1, min_time));
    tb.push_back(device_time(b, k, 1, min_time));
  }
  return {median(ta), median(tb)};
}

struct ApiCall {
  uint64_t start, end;  ///< CUPTI timestamps (ns)
  uint32_t thread;
  bool runtime;  ///< the runtime API's (cuda*), else the driver's (cu*)
  uint32_t cbid;
};

struct KernelTotals {
  double vendor_s = 0, oar_s = 0, copy_s = 0;  ///< kernels, and copies and memsets
  int64_t vendor_kernels = 0, oar_kernels = 0;
  std::vector<std::pair<uint64_t, uint64_t>> busy;  ///< every kernel's, copy's and memset's [start, end) (CUPTI ns)
  std::map<std::string, std::pair<double, int64_t>> by_name;  ///< demangled name -> seconds, launches
  std::vector<ApiCall> api;  ///< with KernelLog(true): every CUDA runtime and driver call
};

/// Kernel time on the device while a KernelLog lives, from CUPTI's activity records: the vendor libraries'
/// kernels (cuDNN, cuBLAS: every kernel not in oar's namespace) apart from oar's own; with `api`, instead, the
/// host's time in each CUDA runtime and driver call (kernel records would make every launch costlier). One at a time.
class KernelLog {
 public:
  explicit KernelLog(bool api = false) : api_(api) {
    totals_ = {};
    ok_ = cuptiActivityRegisterCallbacks(&requested, &completed) == CUPTI_SUCCESS &&
          (api ? cuptiActivityEnable(CUPTI_ACTIVITY_KIND_RUNTIME) == CUPTI_SUCCESS && cuptiActivityEnable(CUPTI_ACTIVITY_KIND_DRIVER) == CUPTI_SUCCESS
               : cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) == CUPTI_SUCCESS &&
                     cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY) == CUPTI_SUCCESS && cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET) == CUPTI_SUCCESS);
  }
  ~KernelLog() {
    if (api_) cuptiActivityDisable(CUPTI_ACTIVITY_KIND_RUNTIME), cuptiActivityDisable(CUPTI_ACTIVITY_KIND_DRIVER);
    else
      cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), cuptiActivityDisable(CUPTI_ACTIVITY_KIND_MEMCPY),
          cuptiActivityDisable(CUPTI_ACTIVITY_KIND_MEMSET);
  }
  KernelLog(const KernelLog&) = delete;
  KernelLog& operator=(const KernelLog&) = delete;

  bool ok() const { return ok_; }
  /// What has run so far (flushes CUPTI's buffers; the device must be synchronised first).
  KernelTotals totals() const {
    cuptiActivityFlushAll(1);
    std::lock_guard lock(mu_);
    return totals_;
  }

 private:
  static void CUPTIAPI requested(uint8_t** buffer, size_t* size, size_t* max_records) {
    *size = size_t(8) << 20;
    *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, *size));
    *max_records = 0;
  }
  static void CUPTIAPI completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
    CUpti_Activity* rec = nullptr;
    std::lock_guard lock(mu_);
    while (cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
      if (rec->kind == CUPTI_ACTIVITY_KIND_RUNTIME || rec->kind == CUPTI_ACTIVITY_KIND_DRIVER) {
        const auto* a = reinterpret_cast<const CUpti_ActivityAPI*>(rec);
        totals_.api.push_back({a->start, a->end, a->threadId, rec->kind == CUPTI_ACTIVITY_KIND_RUNTIME, a->cbid});
        continue;
      }
      if (rec->kind == CUPTI_ACTIVITY_KIND_MEMCPY || rec->kind == CUPTI_ACTIVITY_KIND_MEMSET) {
        uint64_t start = 0, end = 0;
        if (rec->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
          const auto* c = reinterpret_cast<const CUpti_ActivityMemcpy6*>(rec);
          start = c->start, end = c->end;
        } else {
          const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(rec);
          start = m->start, end = m->end;
        }
        totals_.copy_s += double(end - start) * 1e-9;
        totals_.busy.emplace_back(start, end);
        continue;
      }
      if (rec->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) continue;
      const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(rec);
      totals_.busy.emplace_back(k->start, k->end);
      const double s = double(k->end - k->start) * 1e-9;
      // Mangled names: oar's kernels live in oar::cuda_kernels ("_ZN3oar12cuda_kernels...").
      const bool ours = k->name && std::string_view(k->name).find("3oar") != std::string_view::npos;
      (ours ? totals_.oar_s : totals_.vendor_s) += s;
      ++(ours ? totals_.oar_kernels : totals_.vendor_kernels);
      if (k->name) {
        int status = 0;
        char* d = abi::__cxa_demangle(k->name, nullptr, nullptr, &status);
        auto& [t, n] = totals_.by_name[status == 0 && d ? std::string(d).substr(0, 110) : std::string(k->name).substr(0, 110)];
        std::free(d);
        t += s;
        ++n;
      }
    }
    std::free(buffer);
  }
  static inline std::mutex mu_;
  static inline KernelTotals totals_;
  bool api_ = false;
  bool ok_ = false;
};

/// The host's time per step outside CUDA calls: `reps` samples of `steps` calls of `step` (which ends with the
/// host waiting for its fetch) timed by CUPTI's clock, each less the union of the CUDA runtime and driver calls
/// made on the thread that made the most of them (this one: the calls nest, runtime in driver, and other
/// threads' calls overlap); the median sample, since a lent machine's host has hiccups. What is left is the
/// host's own work between calls: oar's executor and Optimizer, and, op by op, cuBLAS's and cuDNN's own host
/// code around their launches. Also the calls taking most of that thread's time, per step.
template <class F>
std::pair<double, std::vector<std::string>> host_outside_cuda(F&& step, int steps, int reps) {
  KernelLog log(true);
  if (!log.ok()) return {-1, {}};
  step();
  cudaDeviceSynchronize();
  std::vector<std::pair<uint64_t, uint64_t>> windows;
  for (int r = 0; r < reps; ++r) {
    uint64_t t0 = 0, t1 = 0;
    cuptiGetTimestamp(&t0);
    for (int i = 0; i < steps; ++i) step();
    cuptiGetTimestamp(&t1);
    windows.emplace_back(t0, t1);
  }
  cudaDeviceSynchronize();
  const KernelTotals t = log.totals();
  const uint64_t begin = windows.front().first, end = windows.back().second;
  std::map<uint32_t, uint64_t> per_thread;
  for (const ApiCall& c : t.api)
    if (c.start >= begin && c.end <= end) per_thread[c.thread] += c.end - c.start;
  if (per_thread.empty()) return {-1, {}};
  const uint32_t main_thread = std::max_element(per_thread.begin(), per_thread.end(), [](auto& x, auto& y) { return x.second < y.second; })->first;
  std::vector<ApiCall> calls;
  for (const ApiCall& c : t.api)
    if (c.thread == main_thread && c.start >= begin && c.end <= end) calls.push_back(c);
  std::sort(calls.begin(), calls.end(), [](const ApiCall& x, const ApiCall& y) { return x.start < y.start; });
  std::map<std::string, std::pair<uint64_t, int64_t>> by_call;  // outermost calls only: name -> ns, calls
  std::vector<double> outside;
  for (auto [t0, t1] : windows) {
    uint64_t covered = 0, reach = t0;
    for (const ApiCall& c : calls) {
      if (c.start < t0 || c.end > t1) continue;
      if (c.end > reach) covered += c.end - std::max(c.start, reach);
      if (c.start >= reach) {
        const char* nm = nullptr;
        cuptiGetCallbackName(c.runtime ? CUPTI_CB_DOMAIN_RUNTIME_API : CUPTI_CB_DOMAIN_DRIVER_API, c.cbid, &nm);
        auto& [ns, n] = by_call[nm ? nm : "?"];
        ns += c.end - c.start;
        ++n;
      }
      reach = std::max(reach, c.end);
    }
    outside.push_back(double(t1 - t0 - covered) / steps / 1e3);
  }
  const double all = double(steps) * reps;
  std::vector<std::pair<uint64_t, std::string>> top;
  for (auto& [k, v] : by_call) top.emplace_back(v.first, fmt::format("{:8.1f} us  {} ({} calls/step)", double(v.first) / all / 1e3, k, double(v.second) / all));
  std::sort(top.rbegin(), top.rend());
  std::vector<std::string> lines;
  for (size_t i = 0; i < std::min<size_t>(top.size(), 8); ++i) lines.push_back(top[i].second);
  return {median(outside), lines};
}

/// Percentages of a sample's wall time: in the vendor libraries' kernels, in oar's, in copies and memsets, and
/// with nothing running on the device at all (what is left is kernels and copies overlapping).
struct Shares {
  double vendor = 0, ours = 0, copies = 0, idle = 0;
};

/// The part of [t0, t1) that no interval of `busy` covers.
inline uint64_t uncovered(std::vector<std::pair<uint64_t, uint64_t>> busy, uint64_t t0, uint64_t t1) {
  std::sort(busy.begin(), busy.end());
  uint64_t covered = 0, reach = t0;
  for (auto [a, b] : busy) {
    a = std::max(a, reach), b = std::min(b, t1);
    if (b > a) covered += b - a, reach = b;
  }
  return t1 - t0 - std::min(covered, t1 - t0);
}

/// Shares over `reps` samples of `steps` calls of `step` while `log` lives: the medians, since one sample can
/// hold a hiccup of the host. `seen`: the log's totals over all the samples, for the launch counts and the
/// kernels by name.
template <class F>
Shares kernel_shares(const KernelLog& log, F&& step, int steps, int reps, KernelTotals& seen) {
  std::vector<double> vendor, ours, copies, idle;
  cudaDeviceSynchronize();
  const KernelTotals first = log.totals();
  KernelTotals k0 = first;
  for (int r = 0; r < reps; ++r) {
    uint64_t c0 = 0, c1 = 0;
    cuptiGetTimestamp(&c0);
    const double t0 = now_s();
    for (int i = 0; i < steps; ++i) step();
    cudaDeviceSynchronize();
    const double wall = now_s() - t0;
    cuptiGetTimestamp(&c1);
    KernelTotals k = log.totals();
    vendor.push_back(100 * (k.vendor_s - k0.vendor_s) / wall);
    ours.push_back(100 * (k.oar_s - k0.oar_s) / wall);
    copies.push_back(100 * (k.copy_s - k0.copy_s) / wall);
    const std::vector<std::pair<uint64_t, uint64_t>> in_sample(k.busy.begin() + std::ptrdiff_t(k0.busy.size()), k.busy.end());
    idle.push_back(100 * double(uncovered(in_sample, c0, c1)) / double(std::max<uint64_t>(c1 - c0, 1)));
    k0 = std::move(k);
  }
  seen = k0;
  seen.vendor_kernels -= first.vendor_kernels, seen.oar_kernels -= first.oar_kernels;
  for (auto& [name, v] : first.by_name) seen.by_name[name].first -= v.first, seen.by_name[name].second -= v.second;
  return {median(vendor), median(ours), median(copies), median(idle)};
}

/// Emits a Shares as `prefix` + _vendor_kernels, _oar_kernels, _copies and _device_idle; `how` ends each note.
void emit_shares(const std::function<void(const Line&)>& emit, const std::string& prefix, const Shares& s, const std::string& how) {
  emit({prefix + "_vendor_kernels", "% of step", s.vendor, "", 0, 1, "time in cuDNN/cuBLAS kernels over the steps' wall time, " + how, false});
  emit({prefix + "_oar_kernels", "% of step", s.ours, "", 0, 1, "time in oar's own kernels (element-wise, reductions, optimizer), " + how, false});
  emit({prefix + "_copies", "% of step", s.copies, "", 0, 1, "time in copies and memsets on the device (feeds, fetches), " + how, false});
  emit({prefix + "_device_idle", "% of step", s.idle, "", 0, 1, "time with no kernel, copy or memset running on the device, " + how, false});
}

enum class Gemm { f32, tf32, f16, bf16 };

/// A device tensor of uniform values in [-1, 1] in `dt` (f32, f16 or bf16: the same values rounded).
oar::Tensor device_random(oar::Shape s, uint64_t seed, oar::DType dt = oar::f32) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> v(size_t(s.numel()));
  for (auto& x : v) x = u(rng);
  if (dt == oar::f16) {
    std::vector<oar::half> h(v.size());
    for (size_t i = 0; i < v.size(); ++i) h[i] = oar::to_half(v[i]);
    return oar::Tensor::from<oar::half>(h, s).to(oar::cuda(0));
  }
  if (dt == oar::bf16) {
    std::vector<oar::bfloat16> h(v.size());
    for (size_t i = 0; i < v.size(); ++i) h[i] = oar::to_bfloat16(v[i]);
    return oar::Tensor::from<oar::bfloat16>(h, s).to(oar::cuda(0));
  }
  return oar::Tensor::from<float>(v, s).to(oar::cuda(0));
}

/// C = A B for square n through oar's mul op against the same product by cuBLAS called directly: f32 in full
/// precision (cublasSgemm), f32 with TF32 allowed on both sides (oar::set_cuda_tf32, CUBLAS_TF32_TENSOR_OP_MATH),
/// or f16 / bf16 in and out with f32 accumulation (cublasGemmEx, CUBLAS_COMPUTE_32F, as oar's 16-bit mul).
void gemm(const std::function<void(const Line&)>& emit, int reps, double min_time, Gemm mode) {
  cublasHandle_t h = nullptr;
  if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) throw oar::Error("cublasCreate failed");
  // The math mode oar's mul sets (kernels/cuda/host.hpp): TF32 when allowed; for 16 bits, reductions in f32 too.
  if (mode == Gemm::tf32) cublasSetMathMode(h, CUBLAS_TF32_TENSOR_OP_MATH);
  if (mode == Gemm::f16 || mode == Gemm::bf16) cublasSetMathMode(h, CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION);
  oar::set_cuda_tf32(mode == Gemm::tf32);
  const oar::DType dt = mode == Gemm::f16 ? oar::f16 : mode == Gemm::bf16 ? oar::bf16 : oar::f32;
  const cudaDataType ct = mode == Gemm::f16 ? CUDA_R_16F : mode == Gemm::bf16 ? CUDA_R_16BF : CUDA_R_32F;
  const char* tag = mode == Gemm::f32 ? "cuda_sgemm" : mode == Gemm::tf32 ? "cuda_sgemm_tf32" : mode == Gemm::f16 ? "cuda_hgemm" : "cuda_bf16gemm";
  const std::string what = mode == Gemm::f32    ? "cublasSgemm called directly (default math mode, no TF32)"
                           : mode == Gemm::tf32 ? "cublasSgemm called directly in CUBLAS_TF32_TENSOR_OP_MATH; oar under set_cuda_tf32(true)"
                                                : std::string("cublasGemmEx called directly (") + (mode == Gemm::f16 ? "f16" : "bf16") +
                                                      " in and out, CUBLAS_COMPUTE_32F, reductions in f32 as oar's)";
  for (int64_t n : {1024, 2048, 4096, 8192}) {
    oar::Tensor a = device_random({n, n}, 1, dt), b = device_random({n, n}, 2, dt), c(oar::Shape{n, n}, dt, oar::cuda(0));
    const float one = 1, zero = 0;
    const int ni = int(n);
    auto direct_call = [&] {
      if (dt == oar::f32)
        cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, ni, ni, ni, &one, b.data<float>(), ni, a.data<float>(), ni, &zero, c.data<float>(), ni);
      else
        cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, ni, ni, ni, &one, b.raw(), ct, ni, a.raw(), ct, ni, &zero, c.raw(), ct, ni, CUBLAS_COMPUTE_32F,
                     CUBLAS_GEMM_DEFAULT);
    };
    // oar: one mul op in a prepared program, its inputs fed as device tensors (no copy).
    oar::Program prog;
    oar::Block& blk = prog.global_block();
    using oar::ops::Mul;
    for (const char* v : {"x", "y"}) blk.create_var(v, {.dtype = dt, .shape = oar::Shape{n, n}});
    oar::Operator op{std::string(Mul::type)};
    op.set_input(Mul::x, {"x"}).set_input(Mul::y, {"y"}).set_output(Mul::out, {"out"});
    oar::add_op(blk, std::move(op));
    oar::Scope scope;
    oar::Executor exe(oar::cuda(0));
    auto prepared = exe.prepare(prog, scope);
    oar::FeedMap feeds{{"x", oar::LoDTensor(a)}, {"y", oar::LoDTensor(b)}};
    const auto [direct, through_oar] = device_time_paired(direct_call, [&] { exe.run(*prepared, scope, feeds); }, 5, reps, min_time);
    const double flop = 2.0 * double(n) * double(n) * double(n);
    emit({std::string(tag) + "_n" + std::to_string(n), "GFLOP/s", flop / through_oar / 1e9, "cublas", flop / direct / 1e9, 1,
          "oar: mul op through a prepared Executor on cuda:0, inputs fed on the device; cublas: " + what +
              "; wall time, blocks of 5 calls closed by cudaDeviceSynchronize, the two in turns"});
  }
  oar::set_cuda_tf32(false);
  cublasDestroy(h);
}

/// Emits `name + suffix + "_host_outside_cuda"` (host_outside_cuda over `reps` samples of 50 steps); `calls`: also the CUDA calls taking
/// the most host time per step.
template <class F>
void host_outside(const std::function<void(const Line&)>& emit, const std::function<void(const std::string&)>& info, const std::string& name,
                  const std::string& suffix, F&& step, bool calls, int reps) {
  auto [us, top] = host_outside_cuda(step, 50, reps);
  if (us < 0) return info(name + suffix + ": CUPTI's API records are not available here: the host's time outside CUDA calls is not measured");
  emit({name + suffix + "_host_outside_cuda", "us/step", us, "", 0, 1,
        std::string(suffix.empty() ? "" : "as a CUDA graph: ") +
            "host time per step outside CUDA runtime and driver calls (CUPTI API records, the training thread): oar's executor and Optimizer" +
            (suffix.empty() ? ", and cuBLAS's and cuDNN's own host code" : ""),
        false});
  if (calls)
    for (const std::string& l : top) info(name + suffix + " in CUDA calls/step: " + l);
}

/// `f16`: the same net trained with `.with_mixed_precision()` (16-bit products and convolutions, loss scaling);
/// `search`: with set_cuda_conv_search(true) (cuDNN's algorithms timed on the first step). These two report
/// the speed, kernel shares and graph figures only.
void train(const std::function<void(const Line&)>& emit, const std::function<void(const std::string&)>& info, bool conv, int64_t batch, int reps,
           double min_time, bool f16 = false, bool search = false) {
  const bool variant = f16 || search;
  oar::set_cuda_conv_search(search);
  oar::Tape tape;
  oar::Var img, pred;
  if (conv) {
    img = oar::data("img", oar::f32, {-1, 1, 28, 28});
    auto conv_pool = [](const oar::Var& x, int filters) { return oar::pool2d(oar::conv2d(x, filters, 5).act(oar::relu), 2).type(oar::PoolType::max).stride(2); };
    pred = oar::fc(conv_pool(oar::batch_norm(conv_pool(img, 20)), 50), 10).act(oar::softmax);
  } else {
    img = oar::data("img", oar::f32, {-1, 784});
    pred = oar::fc(oar::fc(img, 200).act(oar::relu), 10).act(oar::softmax);
  }
  auto label = oar::data("label", oar::i64, {-1, 1});
  auto cost = oar::mean(oar::cross_entropy(pred, label));
  oar::reset_peak_memory(oar::cuda(0));
  oar::Model model(tape.program({cost}), oar::cuda(0));
  oar::optim::Rule rule = oar::optim::adam(1e-3);
  if (f16) rule.with_mixed_precision();
  oar::Optimizer opt(model, cost, rule);
  Synthetic d = make_synthetic(batch, 784, 11);
  oar::FeedMap feeds;
  // In page-locked memory (Reader::pin_memory does this for a training loop): each step copies them by DMA.
  feeds[model.name_of(img)] = oar::LoDTensor(oar::Tensor::from<float>(d.images, conv ? oar::Shape{batch, 1, 28, 28} : oar::Shape{batch, 784}).pin_memory());
  feeds[model.name_of(label)] = oar::LoDTensor(oar::Tensor::from<int64_t>(d.labels, {batch, 1}).pin_memory());
  std::vector<oar::LoDTensor> out;
  const double first = now_s();
  opt.step(feeds, out);
  info(std::string(conv ? "conv" : "mlp") + " batch " + std::to_string(batch) + ": first step (cuDNN/cuBLAS set-up included) " +
       std::to_string((now_s() - first) * 1e3) + " ms, loss " + std::to_string(out.at(0).get(0)));
  const double cpu0 = cpu_s(), wall0 = now_s();
  const double per_step = device_time([&] { opt.step(feeds, out); }, 10, reps, min_time);
  const double host_share = (cpu_s() - cpu0) / (now_s() - wall0);
  const std::string name =
      std::string(conv ? "cuda_conv_train" : "cuda_mlp_train") + "_b" + std::to_string(batch) + (f16 ? "_mixed_f16" : "") + (search ? "_search" : "");
  emit({name, "examples/s", double(batch) / per_step, "", 0, 1,
        std::string(conv ? "book conv net" : "MLP 784-200-10") + ", Adam 1e-3" + (f16 ? " with_mixed_precision() (f16 products, loss scaling)" : "") +
            (search ? " with set_cuda_conv_search(true)" : "") +
            ", oar::Optimizer::step (feeds copied from pinned host memory, loss fetched every step)"});
  // With blocking synchronisation (set in run()) the host thread sleeps while it waits for the device, so its
  // CPU time is the host's own work per step: the executor, the launches and the copies' set-up.
  emit({name + "_host", "us/step", per_step * host_share * 1e6, "", 0, 1,
        "process CPU time per step while the GPU trains (cudaDeviceScheduleBlockingSync: waiting does not count)", false});
  // The loop that keeps the GPU busy: each step queued (Optimizer::step_async) before the loss of the step before
  // is read, so the host prepares step k+1 while the device runs step k.
  oar::PendingFetch last;
  auto async_step = [&] {
    oar::PendingFetch next = opt.step_async(feeds);
    last.wait();
    last = std::move(next);
  };
  {
    const double t = device_time(async_step, 10, reps, min_time);
    last.wait();
    emit({name + "_async", "examples/s", double(batch) / t, "", 0, 1,
          "the same with Optimizer::step_async, each step's loss read once the next step is queued", true});
  }
  if (!variant) {
    // The same step fed from pageable memory: the executor copies each feed into page-locked memory on the
    // training thread and queues the copy from there.
    oar::FeedMap pageable;
    for (auto& [k, v] : feeds) pageable[k] = oar::LoDTensor(v.clone());
    const double c0 = cpu_s(), w0 = now_s();
    const double t = device_time([&] { opt.step(pageable, out); }, 10, reps, min_time);
    const double share = (cpu_s() - c0) / (now_s() - w0);
    emit({name + "_pageable", "examples/s", double(batch) / t, "", 0, 1, "the same with the feeds in pageable host memory", true});
    emit({name + "_pageable_host", "us/step", t * share * 1e6, "", 0, 1, "process CPU time per step, feeds in pageable memory", false});
  }
  if (!variant && (batch == 512 || !conv)) {
    // The host's side: wall time per op type while the kernels are queued (the executor, launches, copies).
    oar::Profiler prof;
    for (int i = 0; i < 50; ++i) opt.step(feeds, out);
    cudaDeviceSynchronize();
    for (const oar::OpTime& o : prof.times())
      if (o.total_ns > 0) info(fmt::format("{} host/step: {:8.1f} us  {} ({} calls/step)", name, o.total_ns / 50e3, o.op, o.calls / 50));
  }
  if (!variant) host_outside(emit, info, name, "", [&] { opt.step(feeds, out); }, !conv && batch == 64, reps);
  {
    // Where the step's wall time goes on the device, over `n` steps after the timing above.
    KernelLog log;
    if (!log.ok()) {
      info(name + ": CUPTI's activity API is not available here: the kernel share is not measured");
    } else {
      const int n = 50;
      KernelTotals t;
      const Shares sh = kernel_shares(log, [&] { opt.step(feeds, out); }, n, reps, t);
      const int64_t steps = int64_t(n) * reps;
      if (batch == 512 || !conv) {  // where the device's time goes: the kernels taking most of it
        std::vector<std::pair<double, std::string>> top;
        for (auto& [k, v] : t.by_name) top.emplace_back(v.first, fmt::format("{:6.1f} us x{:<3} {}", 1e6 * v.first / double(steps), v.second / steps, k));
        std::sort(top.rbegin(), top.rend());
        for (size_t i = 0; i < std::min<size_t>(top.size(), 10); ++i) info(name + " kernel/step: " + top[i].second);
      }
      info(fmt::format("{}: {} cuDNN/cuBLAS and {} oar kernel launches per step", name, t.vendor_kernels / steps, t.oar_kernels / steps));
      const std::string over = "50 steps, the median of " + std::to_string(reps) + " (CUPTI activity records)";
      emit_shares(emit, name, sh, over);
      KernelTotals ta;
      const Shares sa = kernel_shares(log, async_step, n, reps, ta);
      last.wait();
      emit_shares(emit, name + "_async", sa, over + ", the step_async loop");
    }
  }
  {
    // The same step captured once as a CUDA graph and replayed (oar::set_cuda_graphs): one launch per block.
    // CUPTI records a graph's kernels only when it is on before the graph is made, so the share comes first.
    const oar::CudaGraphStats g0 = oar::cuda_graph_stats();
    {
      KernelLog log;
      oar::set_cuda_graphs(true);
      for (int i = 0; i < 4; ++i) opt.step(feeds, out);  // two eager runs, then the capture
      if (log.ok()) {
        KernelTotals seen;
        const Shares sh = kernel_shares(log, [&] { opt.step(feeds, out); }, 50, reps, seen);
        const std::string over = "50 steps, the median of " + std::to_string(reps) + ", as CUDA graphs";
        emit_shares(emit, name + "_graph", sh, over);
        KernelTotals ta;
        const Shares sa = kernel_shares(log, async_step, 50, reps, ta);
        last.wait();
        emit_shares(emit, name + "_graph_async", sa, over + ", the step_async loop");
      }
    }
    const double c0 = cpu_s(), w0 = now_s();
    const double t = device_time([&] { opt.step(feeds, out); }, 10, reps, min_time);
    const double share = (cpu_s() - c0) / (now_s() - w0);
    const oar::CudaGraphStats g1 = oar::cuda_graph_stats();
    emit({name + "_graph", "examples/s", double(batch) / t, "", 0, 1,
          "the same step as a CUDA graph (set_cuda_graphs(true); " + std::to_string(g1.captures - g0.captures) + " captures, " +
              std::to_string(g1.launches - g0.launches) + " launches, " + std::to_string(g1.abandoned - g0.abandoned) + " given up)",
          true});
    emit({name + "_graph_host", "us/step", t * share * 1e6, "", 0, 1, "process CPU time per step, as a CUDA graph", false});
    {
      const double ta = device_time(async_step, 10, reps, min_time);
      last.wait();
      emit({name + "_graph_async", "examples/s", double(batch) / ta, "", 0, 1, "the step_async loop as CUDA graphs", true});
    }
    if (!conv && batch == 64) {  // where the host's time goes when each block is one launch
      oar::Profiler prof;
      for (int i = 0; i < 50; ++i) opt.step(feeds, out);
      cudaDeviceSynchronize();
      for (const oar::OpTime& o : prof.times())
        if (o.total_ns > 0) info(fmt::format("{} graph host/step: {:8.1f} us  {} ({} calls/step)", name, o.total_ns / 50e3, o.op, o.calls / 50));
    }
    host_outside(emit, info, name, "_graph", [&] { opt.step(feeds, out); }, !conv && batch == 64, reps);
    oar::set_cuda_graphs(false);
  }
  emit({name + "_peak_mem", "MB", double(oar::memory_stats(oar::cuda(0)).peak.load()) / 1e6, "", 0, 1,
        "peak bytes held by oar's cuda:0 allocator over model creation and training" + std::string(search ? " (the search's scratch included)" : ""),
        false});
  oar::set_cuda_conv_search(false);
}

/// examples/char_lm.cpp's model (embedding 64 -> fc 4 x 256 -> dynamic_lstm 256 -> fc 98, softmax_with_cross_entropy,
/// Adam with clipping by global norm 5) on 32 random sequences of 100 ids: the lstm op's per-step products and
/// gate kernels, lookup_table's gradient and the clipping, all on the device.
void train_lstm(const std::function<void(const Line&)>& emit, const std::function<void(const std::string&)>& info, int reps, double min_time) {
  constexpr int64_t vocab = 98, embed = 64, hidden = 256, seqs = 32, len = 100;
  oar::Tape tape;
  auto ids = oar::data("ids", oar::i64, {-1, 1}).lod_level(1);
  auto next = oar::data("next", oar::i64, {-1, 1});
  auto h = oar::dynamic_lstm(oar::fc(oar::embedding(ids, {vocab, embed}), 4 * hidden), 4 * hidden).use_peepholes(false);
  auto cost = oar::mean(oar::softmax_with_cross_entropy(oar::fc(h, vocab), next));
  oar::reset_peak_memory(oar::cuda(0));
  oar::Model model(tape.program({cost}), oar::cuda(0));
  oar::Optimizer opt(model, cost, oar::optim::adam(1e-2).with_clip(oar::ClipByGlobalNorm(5)));
  std::mt19937_64 rng(5);
  std::uniform_int_distribution<int64_t> pick(0, vocab - 1);
  std::vector<int64_t> x(size_t(seqs * len)), y(x.size());
  for (size_t i = 0; i < x.size(); ++i) x[i] = pick(rng), y[i] = pick(rng);
  std::vector<size_t> offsets(size_t(seqs) + 1);
  for (size_t s = 0; s <= size_t(seqs); ++s) offsets[s] = s * size_t(len);
  oar::FeedMap feeds;
  feeds[model.name_of(ids)] = oar::LoDTensor(oar::Tensor::from<int64_t>(x, {seqs * len, 1}).pin_memory(), {offsets});
  feeds[model.name_of(next)] = oar::LoDTensor(oar::Tensor::from<int64_t>(y, {seqs * len, 1}).pin_memory());
  std::vector<oar::LoDTensor> out;
  const double first = now_s();
  opt.step(feeds, out);
  info("lstm: first step " + std::to_string((now_s() - first) * 1e3) + " ms, loss " + std::to_string(out.at(0).get(0)));
  const double cpu0 = cpu_s(), wall0 = now_s();
  const double per_step = device_time([&] { opt.step(feeds, out); }, 5, reps, min_time);
  const double host_share = (cpu_s() - cpu0) / (now_s() - wall0);
  const std::string note = "char_lm's model: 32 sequences of 100 characters, embedding 64, lstm 256, Adam + clipping by global norm";
  emit({"cuda_lstm_train", "chars/s", double(seqs * len) / per_step, "", 0, 1, note, true});
  emit({"cuda_lstm_train_host", "us/step", per_step * host_share * 1e6, "", 0, 1, "process CPU time per step (the host drives 100 time steps)", false});
  {
    oar::Profiler prof;
    for (int i = 0; i < 10; ++i) opt.step(feeds, out);
    cudaDeviceSynchronize();
    for (const oar::OpTime& o : prof.times())
      if (o.total_ns > 0) info(fmt::format("cuda_lstm_train host/step: {:8.1f} us  {} ({} calls/step)", o.total_ns / 10e3, o.op, o.calls / 10));
  }
  KernelLog log;
  if (log.ok()) {
    cudaDeviceSynchronize();
    const int n = 10;
    const double t0 = now_s();
    for (int i = 0; i < n; ++i) opt.step(feeds, out);
    cudaDeviceSynchronize();
    const double wall = now_s() - t0;
    const KernelTotals t = log.totals();
    emit({"cuda_lstm_train_vendor_kernels", "% of step", 100 * t.vendor_s / wall, "", 0, 1,
          "time in cuBLAS kernels over 10 steps' wall time (" + std::to_string(t.vendor_kernels / n) + " launches/step)", false});
    emit({"cuda_lstm_train_oar_kernels", "% of step", 100 * t.oar_s / wall, "", 0, 1,
          "time in oar's own kernels (" + std::to_string(t.oar_kernels / n) + " launches/step)", false});
  }
  emit({"cuda_lstm_train_peak_mem", "MB", double(oar::memory_stats(oar::cuda(0)).peak.load()) / 1e6, "", 0, 1,
        "peak bytes held by oar's cuda:0 allocator over model creation and training", false});
}
#endif

}  // namespace

bool run(const std::function<void(const Line&)>& emit_line, const std::function<void(const std::string&)>& info, int reps, double min_time, bool spin) {
#if OAR_WITH_CUDA
  if (oar::cuda_device_count() == 0) {
    info("--device cuda: no CUDA device on this machine: nothing measured");
    return false;
  }
  // Before any context exists: by default waits block instead of spinning, so CPU time measures the host's own
  // work; but a blocked thread wakes tens of microseconds after the device ends, which the GPU spends idle at
  // every step's fetch. `spin` (--cuda-sync spin) measures the rest as a program with CUDA's default policy
  // on a many-core host would run (it spins), its rows named *_spin, without the CPU-time rows (spinning is CPU).
  cudaSetDeviceFlags(spin ? cudaDeviceScheduleSpin : cudaDeviceScheduleBlockingSync);
  if (spin) info("--cuda-sync spin: the host spins while it waits for the device (cudaDeviceScheduleSpin)");
  const std::function<void(const Line&)> emit = [&](const Line& l) {
    if (!spin) return emit_line(l);
    if (l.unit == "us/step" && l.bench.ends_with("_host")) return;
    Line s = l;
    s.bench += "_spin";
    emit_line(s);
  };
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  info(std::string("cuda:0: ") + prop.name + ", " + std::to_string(prop.totalGlobalMem >> 20) + " MiB");
  for (Gemm g : {Gemm::f32, Gemm::tf32, Gemm::f16, Gemm::bf16}) gemm(emit, reps, min_time, g);
  for (bool conv : {false, true})
    for (int64_t batch : {64, 512}) train(emit, info, conv, batch, reps, min_time);
  train(emit, info, true, 512, reps, min_time, true);
  train(emit, info, true, 512, reps, min_time, false, true);
  train_lstm(emit, info, reps, min_time);
  return true;
#else
  (void)emit_line, (void)reps, (void)min_time, (void)spin;
  info("--device cuda: oar_bench was built without CUDA: nothing measured");
  return false;
#endif
}

}  // namespace bench::cuda_bench
