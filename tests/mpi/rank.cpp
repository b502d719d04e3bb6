// tests/mpi/rank.cpp: one rank of the distributed tests, started by tests/mpi/mpirun.sh under `mpirun -np N`
// (or alone, a world of one). Each mode prints "PASS ..." and returns 0 when its checks hold:
//   equal MODEL        N ranks with global batch B (B / N each) end with the parameters of one process with
//                      batch B (1e-5 relative), and every rank holds the same bits after every step.
//                      MODEL: mlp (dense), sparse (an is_sparse embedding), conv (with batch norm over the
//                      global batch: sync_batch_norm), lstm (LoD input).
//   save DIR           trains to the middle of the second epoch, writes DIR/dist.ckpt, stops.
//   resume DIR         resumes DIR/dist.ckpt (written by another world size) and ends with the parameters
//                      of an uninterrupted one-process run (1e-5 relative).
//   stall DIR SIGNAL   writes DIR/dist.ckpt after step 2; at step 3 rank 1 raises SIGNAL (STOP or KILL); the
//                      other ranks must fail with an oar::Error naming rank 1 (printed as "FAILED-AS-EXPECTED").
//   load DIR           the checkpoint of `stall` still loads in one process.
//   mismatch           rank 1 gathers where rank 0 sums: both fail at once, saying the collectives differ.
//                      With OAR_DIST_DEVICE=cuda each rank trains on the GPU of its local rank (NCCL), and so
//                      does the reference (.ci/gpu runs it where a machine has two GPUs; conv then keeps
//                      per-rank batch norm, since sync_batch_norm has no CUDA kernels).
//   zero DIR           ZeRO stage 1 (sharded optimizer state) gives the parameters of plain data parallel, keeps
//                      about 1 / N of its optimizer state per rank, and checkpoints all of it.
#include <oar/oar.hpp>

#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

using namespace oar;
namespace fs = std::filesystem;

namespace {

constexpr int64_t kGlobalBatch = 12;  // divisible by 1, 2, 3 and 4 ranks
constexpr int64_t kSamples = 96;      // 8 global steps an epoch

enum class Kind { mlp, sparse, conv, lstm, deep };

Kind kind_of(const std::string& s) {
  if (s == "mlp") return Kind::mlp;
  if (s == "sparse") return Kind::sparse;
  if (s == "conv") return Kind::conv;
  if (s == "lstm") return Kind::lstm;
  if (s == "deep") return Kind::deep;
  throw Error("unknown model '" + s + "' (mlp, sparse, conv, lstm, deep)");
}

/// The dataset of each model: features and a label that depends on them (so training lowers the loss).
io::Reader dataset(Kind k) {
  std::mt19937_64 rng(11);
  std::normal_distribution<float> d;
  std::uniform_int_distribution<int64_t> id(0, 39), len(2, 6);
  const int64_t n = kSamples;
  std::vector<int64_t> y(static_cast<size_t>(n));
  if (k == Kind::lstm) {
    std::vector<int64_t> ids;
    std::vector<size_t> lengths;
    for (int64_t i = 0; i < n; ++i) {
      const int64_t l = len(rng);
      int64_t s = 0;
      for (int64_t j = 0; j < l; ++j) {
        ids.push_back(id(rng));
        s += ids.back();
      }
      lengths.push_back(size_t(l));
      y[size_t(i)] = (s / l) % 3;
    }
    auto words = LoDTensor::from_lengths(Tensor::from<int64_t>(ids, {int64_t(ids.size()), 1}), {lengths});
    return io::Reader::from_tensors({words, Tensor::from<int64_t>(y, {n, 1})});
  }
  const int64_t width = k == Kind::conv ? 1 * 10 * 10 : 8;
  std::vector<float> x(static_cast<size_t>(n * width));
  for (auto& v : x) v = d(rng);
  std::vector<int64_t> ids(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    float s[3] = {0, 0, 0};
    for (int64_t j = 0; j < width; ++j) s[j % 3] += x[size_t(i * width + j)] * (j % 3 == 2 ? 0.9f : 1.f);
    y[size_t(i)] = std::max_element(s, s + 3) - s;
    ids[size_t(i)] = (y[size_t(i)] * 7 + id(rng)) % 40;
  }
  Shape xs = k == Kind::conv ? Shape{n, 1, 10, 10} : Shape{n, width};
  std::vector<LoDTensor> fields{Tensor::from<float>(x, xs), Tensor::from<int64_t>(y, {n, 1})};
  if (k == Kind::sparse) fields.push_back(Tensor::from<int64_t>(ids, {n, 1}));
  return io::Reader::from_tensors(fields);
}

struct Net {
  std::vector<Var> feeds;
  Var cost, acc;
  explicit Net(Kind k) {
    Var label;
    Var h;
    if (k == Kind::lstm) {
      auto words = data("words", i64, {-1, 1}).lod_level(1);
      label = data("label", i64, {-1, 1});
      feeds = {words, label};
      auto emb = embedding(words, {40, 8});
      auto seq = dynamic_lstm(fc(emb, 4 * 8), 4 * 8);
      h = sequence_pool(seq, SequencePoolType::max);
    } else if (k == Kind::conv) {
      auto img = data("img", f32, {-1, 1, 10, 10});
      label = data("label", i64, {-1, 1});
      feeds = {img, label};
      auto c = batch_norm(pool2d(conv2d(img, 4, 3).act(relu), 2));  // sync_batch_norm under data parallel
      h = fc(c, 16).act(relu);
    } else {
      auto x = data("x", f32, {-1, 8});
      label = data("label", i64, {-1, 1});
      feeds = {x, label};
      if (k == Kind::deep) {  // six layers of one size: parameters that deal out evenly over the ranks
        h = x;
        for (int i = 0; i < 6; ++i) h = fc(h, 16).act(relu);
      } else if (k == Kind::sparse) {
        auto ids = data("ids", i64, {-1, 1});
        feeds.push_back(ids);
        auto emb = embedding(ids, {40, 6}).sparse();
        h = fc({x, emb}, 16).act(relu);
      } else {
        h = fc(x, 16).act(relu);
      }
    }
    auto pred = fc(h, 3).act(softmax);
    cost = mean(cross_entropy(pred, label));
    acc = accuracy(pred, label);
  }
};

optim::Rule rule() { return optim::adam(0.01); }

std::vector<std::pair<std::string, Tensor>> params_of(const Model& m) {
  std::vector<std::pair<std::string, Tensor>> out;
  for (auto& [n, t] : m.persistables()) out.push_back({n, t.clone()});
  return out;
}

/// FNV-1a of every persistable's bytes (only the parameters': ZeRO ranks hold different optimizer state).
uint64_t hash_of(const Model& m, bool params_only = false) {
  uint64_t h = 1469598103934665603ull;
  for (auto& [n, t] : m.persistables()) {
    const Variable* v = m.program().global_block().find_var(n);
    if (params_only && !(v && v->param())) continue;
    const auto* p = static_cast<const unsigned char*>(t.raw());
    for (size_t i = 0; i < t.bytes(); ++i) h = (h ^ p[i]) * 1099511628211ull;
  }
  return h;
}

/// max |a - b| / max |b| over each tensor, the worst tensor's.
double max_rel_diff(const std::vector<std::pair<std::string, Tensor>>& a, const std::vector<std::pair<std::string, Tensor>>& b) {
  if (a.size() != b.size()) throw Error(fmt::format("{} persistables against {}", a.size(), b.size()));
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].first != b[i].first) throw Error("persistables differ: " + a[i].first + " / " + b[i].first);
    const Tensor& x = a[i].second;
    const Tensor& y = b[i].second;
    if (x.dtype() != DType::f32) continue;  // counters (beta powers are f32 too; step counters are not)
    double diff = 0, scale = 0;
    for (int64_t j = 0; j < x.numel(); ++j) {
      diff = std::max(diff, std::abs(double(x.data<float>()[j]) - double(y.data<float>()[j])));
      scale = std::max(scale, std::abs(double(y.data<float>()[j])));
    }
    const double r = scale > 0 ? diff / scale : diff;
    if (r > worst) worst = r;
  }
  return worst;
}

/// Where `equal` trains: OAR_DIST_DEVICE=cuda puts each rank on the GPU of its local rank.
Place device_of(const dist::Context& ctx) {
  const char* d = std::getenv("OAR_DIST_DEVICE");
  return d && std::string(d) == "cuda" ? cuda(ctx.local_rank()) : cpu();
}

/// One process, batch B: the reference.
std::vector<std::pair<std::string, Tensor>> reference(Kind k, int epochs, Place place = cpu()) {
  Tape tape;
  Net n(k);
  Model model(tape.program({n.cost, n.acc}), place, 7);
  Optimizer opt(model, n.cost, rule());
  auto train = dataset(k).shuffle(32, 5).batch(kGlobalBatch);
  opt.train(train, n.feeds, epochs);
  return params_of(model);
}

/// Checks after every step that every rank holds the same bits.
struct SameBits {
  const dist::Context& ctx;
  bool params_only = false;
  int64_t steps = 0;
  void operator()(const Model& m) {
    const uint64_t h = hash_of(m, params_only);
    std::vector<int64_t> sizes;
    std::vector<char> all = ctx.communicator()->all_gather(&h, sizeof h, sizes, "the parameters' hashes");
    for (int r = 0; r < ctx.world_size(); ++r)
      if (std::memcmp(all.data() + r * sizeof h, &h, sizeof h) != 0)
        throw Error(fmt::format("after step {} rank {}'s parameters differ from rank {}'s", steps + 1, r, ctx.rank()));
    ++steps;
  }
};

int check(bool ok, const std::string& what, const dist::Context& ctx) {
  std::printf("%s rank %d of %d: %s\n", ok ? "PASS" : "FAIL", ctx.rank(), ctx.world_size(), what.c_str());
  std::fflush(stdout);
  return ok ? 0 : 1;
}

int equal(const dist::Context& ctx, Kind k) {
  const int epochs = 2;
  const Place place = device_of(ctx);
  auto want = reference(k, epochs, place);
  Tape tape;
  Net n(k);
  Model model(tape.program({n.cost, n.acc}), place, 7);
  // Small buckets: several per step.
  Optimizer opt(model, n.cost, rule(), dist::data_parallel(ctx).bucket_bytes(1024).sync_batch_norm(place.is_cpu()));
  auto train = dataset(k).shuffle(32, 5).shard(ctx.rank(), ctx.world_size()).batch(kGlobalBatch / ctx.world_size());
  SameBits same{ctx};
  double first = 0, last = 0;
  opt.train(train, n.feeds, epochs, [&](const Event& e) {
    if (e.kind != Event::Kind::end_iteration) return;
    same(model);
    if (e.step == 1) first = e.loss;
    last = e.loss;
  });
  const double d = max_rel_diff(params_of(model), want);
  const bool ok = d <= 1e-5 && same.steps == epochs * kSamples / kGlobalBatch && last < first;
  return check(ok, fmt::format("equal: {} steps, identical bits on every rank after each, max relative difference to one process {:.3g}, loss {:.4f} -> {:.4f}",
                               same.steps, d, first, last),
               ctx);
}

/// Optimizer state: the persistables that belong to one parameter (<param>.<slot>), not the parameters.
int64_t state_bytes(const Model& m) {
  std::vector<std::string> params;
  for (auto* v : m.program().global_block().vars())
    if (v->param()) params.push_back(v->name());
  int64_t n = 0;
  for (auto& [name, t] : m.persistables())
    for (auto& p : params)
      if (name.size() > p.size() && name.compare(0, p.size() + 1, p + ".") == 0) {
        n += int64_t(t.bytes());
        break;
      }
  return n;
}

/// ZeRO stage 1 against the same data parallel without it: the same parameters (1e-6), optimizer-state memory
/// per rank about 1 / N of it, every rank's share adding up to the whole; a checkpoint holds all of it.
int zero(const dist::Context& ctx, const fs::path& dir) {
  const int epochs = 2;
  auto want = reference(Kind::deep, epochs);
  auto train_one = [&](bool sharded, Model& model, const Net& n) {
    auto dp = dist::data_parallel(ctx).bucket_bytes(2048).shard_optimizer_state(sharded);
    auto opt = std::make_unique<Optimizer>(model, n.cost, rule(), dp);
    auto train = dataset(Kind::deep).shuffle(32, 5).shard(ctx.rank(), ctx.world_size()).batch(kGlobalBatch / ctx.world_size());
    SameBits same{ctx, sharded};
    opt->train(train, n.feeds, epochs, [&](const Event& e) {
      if (e.kind == Event::Kind::end_iteration) same(model);
    });
    return opt;
  };
  Tape ta;
  Net na(Kind::deep);
  Model plain(ta.program({na.cost, na.acc}), 7);
  auto plain_opt = train_one(false, plain, na);
  Tape tb;
  Net nb(Kind::deep);
  Model sharded(tb.program({nb.cost, nb.acc}), 7);
  auto sharded_opt = train_one(true, sharded, nb);
  auto weights = [&](std::vector<std::pair<std::string, Tensor>> v) {  // the parameters alone
    std::erase_if(v, [&](const auto& p) {
      const Variable* var = sharded.program().global_block().find_var(p.first);
      return !(var && var->param());
    });
    return v;
  };
  const double d_plain = max_rel_diff(weights(params_of(sharded)), weights(params_of(plain)));
  const double d_one = max_rel_diff(weights(params_of(sharded)), weights(want));
  const int64_t full = state_bytes(plain), mine = state_bytes(sharded);
  std::vector<int64_t> sizes;
  std::vector<char> all = ctx.communicator()->all_gather(&mine, sizeof mine, sizes, "state sizes");
  int64_t total = 0;
  for (int r = 0; r < ctx.world_size(); ++r) {
    int64_t x;
    std::memcpy(&x, all.data() + size_t(r) * sizeof x, sizeof x);
    total += x;
  }
  // The checkpoint of the sharded run holds every rank's state: one process resumes it to the plain run's.
  sharded_opt->checkpoint(dir / "zero.ckpt");
  Tape tc;
  Net nc(Kind::deep);
  Model back(tc.program({nc.cost, nc.acc}), 99);
  Optimizer back_opt(back, nc.cost, rule());
  back_opt.resume(dir / "zero.ckpt");
  // Its parameters are the sharded run's bit for bit, and all of its state (every rank's share) is the plain
  // run's state, up to the order in which the reduce to each owner summed the gradients.
  const double d_back_params = max_rel_diff(weights(params_of(back)), weights(params_of(sharded)));
  const double d_back = max_rel_diff(params_of(back), params_of(plain));
  // The gradients went to their owners only: no dense c_allreduce_sum is left in the sharded program.
  int reduces = 0, all_reduces = 0;
  for (const Operator* op : sharded_opt->machine().program().global_block().ops()) {
    if (op->type() == "c_reduce_sum") ++reduces;
    if (op->type() == "c_allreduce_sum") ++all_reduces;
  }
  const bool ok = d_plain <= 1e-6 && d_one <= 1e-5 && total == full && double(mine) <= 1.3 * double(full) / ctx.world_size() && d_back_params == 0 &&
                  d_back <= 1e-6 && reduces >= ctx.world_size() && all_reduces == 0;
  return check(ok, fmt::format("zero: against plain data parallel {:.3g}, against one process {:.3g}; optimizer state {} of {} bytes on this rank "
                               "({:.2f} of it; all ranks together {}); the checkpoint resumes to its parameters ({:.3g}) and the plain run's "
                               "state ({:.3g}); {} c_reduce_sum and {} c_allreduce_sum",
                               d_plain, d_one, mine, full, double(mine) / double(full), total, d_back_params, d_back, reduces, all_reduces),
               ctx);
}

constexpr int kEpochs = 3;
constexpr int64_t kSaveAt = 12;  // global steps: the middle of the second epoch

int save(const dist::Context& ctx, const fs::path& dir, Kind k) {
  Tape tape;
  Net n(k);
  Model model(tape.program({n.cost, n.acc}), 7);
  Optimizer opt(model, n.cost, rule(), dist::data_parallel(ctx));
  auto train = dataset(k).shuffle(32, 5).shard(ctx.rank(), ctx.world_size()).batch(kGlobalBatch / ctx.world_size());
  struct Stop {};
  try {
    opt.train(train, n.feeds, kEpochs, [&](const Event& e) {
      if (e.kind == Event::Kind::end_iteration && e.step == kSaveAt) {
        opt.checkpoint(dir / "dist.ckpt");
        throw Stop{};
      }
    });
  } catch (const Stop&) {
  }
  return check(fs::exists(dir / "dist.ckpt"), fmt::format("save: checkpoint after step {}", kSaveAt), ctx);
}

int resume(const dist::Context& ctx, const fs::path& dir, Kind k) {
  auto want = reference(k, kEpochs);
  Tape tape;
  Net n(k);
  Model model(tape.program({n.cost, n.acc}), 99);  // other initial values: resume overwrites them all
  Optimizer opt(model, n.cost, rule(), dist::data_parallel(ctx));
  auto train = dataset(k).shuffle(32, 5).shard(ctx.rank(), ctx.world_size()).batch(kGlobalBatch / ctx.world_size());
  opt.resume(dir / "dist.ckpt", &train);
  const int64_t from = opt.step_count();
  opt.train(train, n.feeds, kEpochs);
  const double d = max_rel_diff(params_of(model), want);
  return check(d <= 1e-5 && from == kSaveAt && opt.step_count() == kEpochs * kSamples / kGlobalBatch,
               fmt::format("resume: from step {} to {} on {} rank(s), max relative difference to an uninterrupted run {:.3g}", from, opt.step_count(),
                           ctx.world_size(), d),
               ctx);
}

/// Prints how a rank failed, for mpirun.sh to check: "FAILED-AS-EXPECTED" when the error contains `needle`.
int expected_failure(const dist::Context& ctx, const Error& e, const char* needle) {
  const bool as_expected = std::string(e.what()).find(needle) != std::string::npos;
  std::printf("%s rank %d: %s\n", as_expected ? "FAILED-AS-EXPECTED" : "FAILED-WRONGLY", ctx.rank(), e.what());
  std::fflush(stdout);
  return 3;
}

int stall(const dist::Context& ctx, const fs::path& dir, const std::string& sig) {
  Tape tape;
  Net n(Kind::mlp);
  Model model(tape.program({n.cost, n.acc}), 7);
  Optimizer opt(model, n.cost, rule(), dist::data_parallel(ctx));
  auto train = dataset(Kind::mlp).shuffle(32, 5).shard(ctx.rank(), ctx.world_size()).batch(kGlobalBatch / ctx.world_size());
  try {
    opt.train(train, n.feeds, kEpochs, [&](const Event& e) {
      if (e.kind == Event::Kind::end_iteration && e.step == 2) opt.checkpoint(dir / "dist.ckpt");
      if (e.kind == Event::Kind::begin_iteration && e.step == 2 && ctx.rank() == 1) std::raise(sig == "KILL" ? SIGKILL : SIGSTOP);
    });
  } catch (const Error& e) {
    return expected_failure(ctx, e, "rank 1 ");
  }
  return check(false, "stall: training went on past a stopped rank", ctx);
}

/// Rank 1 gathers where the others sum: every rank fails at once (well before the timeout), naming the other
/// kind of collective.
int mismatch(const dist::Context& ctx) {
  auto& comm = *ctx.communicator();
  try {
    double x = 1;
    if (ctx.rank() == 1) {
      std::vector<int64_t> sizes;
      (void)comm.all_gather(&x, sizeof x, sizes, "a gather on rank 1");
    } else {
      comm.all_reduce_sum(&x, 1, DType::f64, "a sum on rank 0");
    }
  } catch (const Error& e) {
    return expected_failure(ctx, e, "differs between the ranks");
  }
  return check(false, "mismatch: different collectives went through", ctx);
}

int load(const dist::Context& ctx, const fs::path& dir) {
  Tape tape;
  Net n(Kind::mlp);
  Model model(tape.program({n.cost, n.acc}), 99);
  Optimizer opt(model, n.cost, rule());
  opt.resume(dir / "dist.ckpt");
  return check(opt.step_count() == 2, fmt::format("load: the last checkpoint loads (step {})", opt.step_count()), ctx);
}

}  // namespace

int main(int argc, char** argv) {
  dist::Context ctx(argc, argv, {.timeout = std::chrono::seconds(3)});
  try {
    const std::string mode = argc > 1 ? argv[1] : "";
    if (mode == "equal" && argc == 3) return equal(ctx, kind_of(argv[2]));
    if (mode == "save" && argc == 3) return save(ctx, argv[2], Kind::mlp);
    if (mode == "resume" && argc == 3) return resume(ctx, argv[2], Kind::mlp);
    if (mode == "stall" && argc == 4) return stall(ctx, argv[2], argv[3]);
    if (mode == "load" && argc == 3) return load(ctx, argv[2]);
    if (mode == "zero" && argc == 3) return zero(ctx, argv[2]);
    if (mode == "mismatch" && argc == 2) return mismatch(ctx);
    std::fprintf(stderr, "usage: oar_dist_rank equal MODEL | save DIR | resume DIR | stall DIR STOP|KILL | load DIR | zero DIR | mismatch\n");
    return 2;
  } catch (const std::exception& e) {
    std::printf("FAIL rank %d: %s\n", ctx.rank(), e.what());
    return 1;
  }
}
