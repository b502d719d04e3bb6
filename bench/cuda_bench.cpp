// bench/cuda_bench.cpp: oar_bench --device cuda: SGEMM through oar's mul kernel against cublasSgemm called
// directly (the bound: oar adds nothing around it), and the MLP and the book conv net training on the GPU at
// batch 64 and 512 (examples/s, the host's CPU time per step, the share of the step in cuDNN/cuBLAS kernels and in
// oar's own from CUPTI, peak device memory), and char_lm's LSTM training (chars/s). LibTorch here is Debian's CPU
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

struct KernelTotals {
  double vendor_s = 0, oar_s = 0;
  int64_t vendor_kernels = 0, oar_kernels = 0;
  std::map<std::string, std::pair<double, int64_t>> by_name;  ///< demangled name -> seconds, launches
};

/// Kernel time on the device while a KernelLog lives, from CUPTI's activity records: the vendor libraries'
/// kernels (cuDNN, cuBLAS: every kernel not in oar's namespace) apart from oar's own. One at a time.
class KernelLog {
 public:
  KernelLog() {
    totals_ = {};
    ok_ = cuptiActivityRegisterCallbacks(&requested, &completed) == CUPTI_SUCCESS &&
          cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) == CUPTI_SUCCESS;
  }
  ~KernelLog() {
    if (ok_) cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
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
      if (rec->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) continue;
      const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(rec);
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
  bool ok_ = false;
};

oar::Tensor device_random(oar::Shape s, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> v(size_t(s.numel()));
  for (auto& x : v) x = u(rng);
  return oar::Tensor::from<float>(v, s).to(oar::cuda(0));
}

void sgemm(const std::function<void(const Line&)>& emit, int reps, double min_time) {
  cublasHandle_t h = nullptr;
  if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) throw oar::Error("cublasCreate failed");
  for (int64_t n : {1024, 2048, 4096, 8192}) {
    oar::Tensor a = device_random({n, n}, 1), b = device_random({n, n}, 2), c(oar::Shape{n, n}, oar::f32, oar::cuda(0));
    const float one = 1, zero = 0;
    const int ni = int(n);
    const double direct = device_time(
        [&] { cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, ni, ni, ni, &one, b.data<float>(), ni, a.data<float>(), ni, &zero, c.data<float>(), ni); }, 5, reps,
        min_time);
    // oar: one mul op in a prepared program, its inputs fed as device tensors (no copy).
    oar::Program prog;
    oar::Block& blk = prog.global_block();
    using oar::ops::Mul;
    for (const char* v : {"x", "y"}) blk.create_var(v, {.dtype = oar::f32, .shape = oar::Shape{n, n}});
    oar::Operator op{std::string(Mul::type)};
    op.set_input(Mul::x, {"x"}).set_input(Mul::y, {"y"}).set_output(Mul::out, {"out"});
    oar::add_op(blk, std::move(op));
    oar::Scope scope;
    oar::Executor exe(oar::cuda(0));
    auto prepared = exe.prepare(prog, scope);
    oar::FeedMap feeds{{"x", oar::LoDTensor(a)}, {"y", oar::LoDTensor(b)}};
    const double through_oar = device_time([&] { exe.run(*prepared, scope, feeds); }, 5, reps, min_time);
    const double flop = 2.0 * double(n) * double(n) * double(n);
    emit({"cuda_sgemm_n" + std::to_string(n), "GFLOP/s", flop / through_oar / 1e9, "cublas", flop / direct / 1e9, 1,
          "oar: mul op through a prepared Executor on cuda:0, inputs fed on the device; cublas: cublasSgemm called directly "
          "(default math mode, no TF32); wall time, blocks of 5 calls closed by cudaDeviceSynchronize"});
  }
  cublasDestroy(h);
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
  if (!variant) {
    // The same step fed from pageable memory: the driver copies through its staging buffers on the CPU.
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
  {
    // Where the step's wall time goes on the device, over `n` steps after the timing above.
    KernelLog log;
    if (!log.ok()) {
      info(name + ": CUPTI's activity API is not available here: the kernel share is not measured");
    } else {
      cudaDeviceSynchronize();
      const int n = 50;
      const double t0 = now_s();
      for (int i = 0; i < n; ++i) opt.step(feeds, out);
      cudaDeviceSynchronize();
      const double wall = now_s() - t0;
      const KernelTotals t = log.totals();
      if (batch == 512 || !conv) {  // where the device's time goes: the kernels taking most of it
        std::vector<std::pair<double, std::string>> top;
        for (auto& [k, v] : t.by_name) top.emplace_back(v.first, fmt::format("{:6.1f} us x{:<3} {}", 1e6 * v.first / n, v.second / n, k));
        std::sort(top.rbegin(), top.rend());
        for (size_t i = 0; i < std::min<size_t>(top.size(), 10); ++i) info(name + " kernel/step: " + top[i].second);
      }
      emit({name + "_vendor_kernels", "% of step", 100 * t.vendor_s / wall, "", 0, 1,
            "time in cuDNN/cuBLAS kernels over 50 steps' wall time (CUPTI activity records; " + std::to_string(t.vendor_kernels / n) +
                " launches/step)",
            false});
      emit({name + "_oar_kernels", "% of step", 100 * t.oar_s / wall, "", 0, 1,
            "time in oar's own kernels (element-wise, reductions, optimizer) over the same wall time (" + std::to_string(t.oar_kernels / n) +
                " launches/step)",
            false});
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
        cudaDeviceSynchronize();
        const KernelTotals k0 = log.totals();
        const int n = 50;
        const double w = now_s();
        for (int i = 0; i < n; ++i) opt.step(feeds, out);
        cudaDeviceSynchronize();
        const double wall = now_s() - w;
        const KernelTotals k = log.totals();
        emit({name + "_graph_vendor_kernels", "% of step", 100 * (k.vendor_s - k0.vendor_s) / wall, "", 0, 1,
              "time in cuDNN/cuBLAS kernels over 50 steps' wall time, as a CUDA graph", false});
        emit({name + "_graph_oar_kernels", "% of step", 100 * (k.oar_s - k0.oar_s) / wall, "", 0, 1, "time in oar's own kernels, as a CUDA graph", false});
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
    if (!conv && batch == 64) {  // where the host's time goes when each block is one launch
      oar::Profiler prof;
      for (int i = 0; i < 50; ++i) opt.step(feeds, out);
      cudaDeviceSynchronize();
      for (const oar::OpTime& o : prof.times())
        if (o.total_ns > 0) info(fmt::format("{} graph host/step: {:8.1f} us  {} ({} calls/step)", name, o.total_ns / 50e3, o.op, o.calls / 50));
    }
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

bool run(const std::function<void(const Line&)>& emit, const std::function<void(const std::string&)>& info, int reps, double min_time) {
#if OAR_WITH_CUDA
  if (oar::cuda_device_count() == 0) {
    info("--device cuda: no CUDA device on this machine: nothing measured");
    return false;
  }
  // Before any context exists: waits block instead of spinning, so CPU time measures the host's own work.
  cudaSetDeviceFlags(cudaDeviceScheduleBlockingSync);
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  info(std::string("cuda:0: ") + prop.name + ", " + std::to_string(prop.totalGlobalMem >> 20) + " MiB");
  sgemm(emit, reps, min_time);
  for (bool conv : {false, true})
    for (int64_t batch : {64, 512}) train(emit, info, conv, batch, reps, min_time);
  train(emit, info, true, 512, reps, min_time, true);
  train(emit, info, true, 512, reps, min_time, false, true);
  train_lstm(emit, info, reps, min_time);
  return true;
#else
  (void)emit, (void)reps, (void)min_time;
  info("--device cuda: oar_bench was built without CUDA: nothing measured");
  return false;
#endif
}

}  // namespace bench::cuda_bench
