// bench/common.hpp: what oar_bench's translation units share: the result line, interleaved timing, and the
// peer interfaces (LibTorch in torch_peer.cpp, dlib in dlib_peer.cpp) so that no heavy peer header leaks
// into another translation unit.
#pragma once
#include <algorithm>
#include <chrono>
#include <ctime>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace bench {

/// One measurement: oar against one peer. `higher_better` says whether the unit is a rate (ratio oar/peer)
/// or a time or size (ratio peer/oar); either way ratio > 1 means oar is better.
struct Line {
  std::string bench;
  std::string unit;
  double oar = 0;
  std::string peer;  ///< "libtorch", "dlib", "openblas" or "" (no peer)
  double peer_value = 0;
  int threads = 1;
  std::string note;
  bool higher_better = true;
  double ratio() const {
    if (peer.empty() || oar <= 0 || peer_value <= 0) return 0;
    return higher_better ? oar / peer_value : peer_value / oar;
  }
};

inline double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

/// CPU seconds used by the whole process (every thread). Single-threaded settings are timed with it: on a
/// machine shared with other jobs it leaves out the time this process waited for a core.
inline double cpu_s() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

/// Which clock time_block uses: process CPU time when true (1-thread settings), wall time otherwise.
inline bool& use_cpu_clock() {
  static bool b = false;
  return b;
}

inline double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/// Something measured in blocks: `enter` applies its thread settings, `step` does one unit of work
/// (one batch, one GEMM, one program run), `leave` undoes what would disturb the other side.
struct Runner {
  virtual ~Runner() = default;
  virtual void enter() {}
  virtual void step() = 0;
  virtual void leave() {}
  /// The loss of every step so far, for runners that train and keep it (null for the others).
  virtual const std::vector<double>* losses() const { return nullptr; }
};

/// A Runner from lambdas.
struct FnRunner : Runner {
  std::function<void()> on_enter, on_step, on_leave;
  void enter() override { if (on_enter) on_enter(); }
  void step() override { on_step(); }
  void leave() override { if (on_leave) on_leave(); }
};

/// Seconds per step of one block (see use_cpu_clock): `warmup` steps, then steps until `min_time` has passed
/// (at least `min_steps`).
inline double time_block(Runner& r, double min_time, int warmup = 1, int min_steps = 2) {
  r.enter();
  for (int i = 0; i < warmup; ++i) r.step();
  int n = 0;
  double (*clock)() = use_cpu_clock() ? cpu_s : now_s;
  double t0 = clock(), t1;
  do {
    r.step();
    ++n;
    t1 = clock();
  } while (t1 - t0 < min_time || n < min_steps);
  r.leave();
  return (t1 - t0) / n;
}

/// Median seconds per step of `a` and of `b` over `reps` rounds of one block each, alternating which goes
/// first so that slow phases of a shared machine hit both sides alike. `b` may be null (oar alone).
inline std::pair<double, double> interleave(Runner& a, Runner* b, int reps, double min_time) {
  std::vector<double> ta, tb;
  for (int r = 0; r < reps; ++r) {
    if (r % 2 == 0 || !b) {
      ta.push_back(time_block(a, min_time));
      if (b) tb.push_back(time_block(*b, min_time));
    } else {
      tb.push_back(time_block(*b, min_time));
      ta.push_back(time_block(a, min_time));
    }
  }
  return {median(ta), median(tb)};
}

/// Block times of every runner of `all`, `reps` rounds of one block each, starting each round one runner later
/// so that slow phases of a shared machine fall on all of them alike: result[i] holds runner i's times.
inline std::vector<std::vector<double>> time_rotating(const std::vector<Runner*>& all, int reps, double min_time, int warmup = 1, int min_steps = 2) {
  std::vector<std::vector<double>> t(all.size());
  for (int r = 0; r < reps; ++r)
    for (size_t k = 0; k < all.size(); ++k) {
      const size_t i = (k + size_t(r)) % all.size();
      t[i].push_back(time_block(*all[i], min_time, warmup, min_steps));
    }
  return t;
}

/// Lets OpenBLAS's idle workers (they spin about 2^28 cycles after a threaded call) go to sleep.
inline void settle() { std::this_thread::sleep_for(std::chrono::milliseconds(150)); }

/// Random inputs shared by every framework (same values for all): images in [0, 1), labels in [0, classes).
struct Synthetic {
  std::vector<float> images;    ///< batch x pixels
  std::vector<int64_t> labels;  ///< batch
};
Synthetic make_synthetic(int64_t batch, int64_t pixels, uint64_t seed, int64_t classes = 10);

/// Peak memory of one training run, measured in its own process.
struct MemResult {
  bool ok = false;
  double hwm_delta_mb = 0;  ///< VmHWM at the end minus VmRSS before the framework did anything
  double oar_peak_mb = 0;   ///< oar::memory_stats().peak (oar only)
  std::string note;
};

/// One conv layer: input [n, c, hw, hw], filter [m, c, k, k], no bias; stride and zero padding the same on
/// both axes (the book net's layers: stride 1, no padding).
struct ConvLayer {
  const char* name;
  int64_t n, c, hw, m, k;
  bool input_grad;  ///< whether training needs the input's gradient (not for the first layer: it is data)
  int64_t stride = 1, pad = 0;
  int64_t out_hw() const { return (hw + 2 * pad - k) / stride + 1; }
};

/// Sequences for the recurrent benchmarks: `lengths` sequences whose rows (`input` floats each) lie one sequence
/// after the other in `x` (oar's LoD layout), all in [-1, 1).
struct Sequences {
  std::vector<float> x;
  std::vector<int64_t> lengths;
  int64_t input = 0, hidden = 0;
  int64_t rows() const {
    int64_t n = 0;
    for (int64_t l : lengths) n += l;
    return n;
  }
};

/// The character language model of the char_lm group, as both sides train it: embedding [vocab, embed] -> LSTM
/// (embed -> hidden, no peepholes, an input and a recurrent bias) -> linear to vocab, softmax cross-entropy on
/// the next character, mean over the batch's characters; Adam (lr, betas 0.9 / 0.999, eps 1e-8) on
/// lr / 2 (1 + cos(pi step / steps)), gradients clipped to a global norm of `clip`. Each step's batch is the
/// `batch` chunks of `chunk` characters starting at the next `batch` entries of `starts` (inputs
/// train[s .. s + chunk), labels one character later), each from a zero state.
struct CharLm {
  std::vector<int64_t> train, valid;  ///< character ids
  int64_t vocab = 0, embed = 0, hidden = 0, chunk = 0, batch = 0, steps = 0;
  double lr = 0, clip = 0;
  std::vector<int64_t> starts;  ///< steps x batch
  /// oar's initial parameters in LibTorch's layouts (gates i, f, g, o), so that both start from the same point:
  /// emb [vocab, embed], w_ih [4 hidden, embed], w_hh [4 hidden, hidden], b_ih, b_hh [4 hidden], w_out [vocab, hidden], b_out [vocab].
  std::vector<float> emb, w_ih, w_hh, b_ih, b_hh, w_out, b_out;
  /// Validation chunks: every `chunk` characters of `valid` (the last one shorter), scored in batches of this many.
  int64_t valid_batch = 128;
};

/// What one side's training of a CharLm gives.
struct CharLmResult {
  double valid_bpc = 0;         ///< mean cross-entropy over every validation character, in bits
  double train_cpu_s = 0;       ///< process CPU seconds of the `steps` training steps (batches built included)
  std::vector<double> losses;   ///< each step's training loss (nats per character)
};

// ---- LibTorch (torch_peer.cpp; stubs when LibTorch was not found)
namespace torch_peer {
bool available();
std::string version();
/// Per-op cost on 16 floats: `nops` ops cycling relu / scale / add. `prealloc`: in-place and add_out into
/// preallocated tensors; otherwise each op allocates its result.
std::unique_ptr<Runner> op_chain(int nops, bool prealloc);
/// Forward (NoGradGuard, eval mode) or one training step (forward, backward, optimizer) of the bench nets on
/// a batch. `threads`: torch::set_num_threads and openblas_set_num_threads. `mkldnn`: oneDNN conv on/off.
std::unique_ptr<Runner> mlp(const Synthetic& d, int64_t batch, int threads, bool train);
std::unique_ptr<Runner> conv(const Synthetic& d, int64_t batch, int threads, bool train, bool mkldnn);
/// One conv layer alone at 1 thread: forward, or backward (filter gradient + the input's when needed).
std::unique_ptr<Runner> conv_layer(const ConvLayer& l, bool backward, bool mkldnn);
/// One conv layer's backward at 1 thread as autograd runs it in training: torch::conv2d's graph is built in
/// enter() and each step computes its gradients (filter, and input when needed) from a random output gradient.
std::unique_ptr<Runner> conv_layer_autograd(const ConvLayer& l, bool mkldnn);
/// One training step (forward, backward, update) of ResNet-18 as torchvision lays it out, in torch::nn modules:
/// `batch` images [3, 224, 224] of `d`, 1000 classes, cross_entropy on logits, SGD lr 0.01 momentum 0.9.
/// `threads` as for mlp; `mkldnn`: oneDNN on/off. Its losses() holds every step's loss.
std::unique_ptr<Runner> resnet18(const Synthetic& d, int64_t batch, int threads, bool mkldnn);
/// One training step of torch::nn::LSTM(input, hidden) on `d` (loss: the mean of every output, SGD 0.1): a
/// time-major [T, batch, input] tensor when all lengths are equal, else padded to the longest and run through
/// pack_padded_sequence (enforce_sorted = false).
std::unique_ptr<Runner> lstm(const Sequences& d, int threads);
/// torch::nn::MultiheadAttention(d.input, heads) as self-attention on `d`'s sequences (sequence-first [S, B, E];
/// unequal lengths padded to the longest, with a key_padding_mask), need_weights off: `train`: forward, the
/// mean of every output, backward, SGD 0.1; otherwise a forward under NoGradGuard.
std::unique_ptr<Runner> attention(const Sequences& d, int heads, int threads, bool train);
/// Trains `m` with torch::nn::Embedding, torch::nn::LSTM and torch::nn::Linear at 1 thread (time-major
/// [chunk, batch] inputs: every chunk of a batch has the same length) and scores the validation text.
CharLmResult char_lm(const CharLm& m);
}  // namespace torch_peer

// ---- xtensor (xtensor_peer.cpp; stubs when xtensor was not found)
/// One N-D kernel on given inputs: kind transpose (ints: the permutation), slice (ints: lo, hi on axis 1 of a
/// rank-3 x), concat (x and y; ints: the axis), gather (ints: the rows of a 2-D x), reduce_sum (ints: the
/// axis), broadcast_add (y shaped to broadcast against x).
struct NdCase {
  std::string kind;
  std::vector<int64_t> x_shape, y_shape, out_shape;
  const float* x = nullptr;
  const float* y = nullptr;
  std::vector<int64_t> ints;
};
namespace xtensor_peer {
bool available();
std::unique_ptr<Runner> nd(const NdCase& c);
}  // namespace xtensor_peer

// ---- dlib (dlib_peer.cpp; stubs when dlib was not found)
namespace dlib_peer {
bool available();
std::string version();
/// One training step (dlib's compute_parameter_gradients + update_parameters: loss_multiclass_log, sgd
/// 0.1 for the MLP, adam 1e-3 for the conv net) on a batch; `threads` sets OpenBLAS's threads.
std::unique_ptr<Runner> mlp_train(const Synthetic& d, int64_t batch, int threads);
std::unique_ptr<Runner> conv_train(const Synthetic& d, int64_t batch, int threads);
}  // namespace dlib_peer

namespace cuda_bench {
/// oar_bench --device cuda (bench/cuda_bench.cpp): emits its lines; false when nothing could be measured.
bool run(const std::function<void(const Line&)>& emit, const std::function<void(const std::string&)>& info, int reps, double min_time, bool spin);
}  // namespace cuda_bench

}  // namespace bench
