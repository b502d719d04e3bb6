// tests/dist/collective.cpp: data-parallel training in one process (the mpirun cases are tests/mpi/): the
// collective pass writes Fluid's ops where the gradients become final, in buckets; the broadcast program;
// a world of one trains exactly as a plain Optimizer; Reader::shard splits an epoch; and clear errors.
#include "pch.hpp"
#include "support/op_check.hpp"

#include <set>

#include "oar/ops/collective.hpp"
#include "oar/ops/scale.hpp"
#include "oar/optim/collective.hpp"

using namespace oar;
using oar::test::contains;
using oar::test::error_of;

namespace {

/// An MLP with a dense input and an is_sparse embedding.
struct SparseNet {
  Var x, ids, label, cost, acc;
  SparseNet() {
    x = data("x", f32, {-1, 8});
    ids = data("ids", i64, {-1, 1});
    label = data("label", i64, {-1, 1});
    auto emb = embedding(ids, {40, 6}).sparse();
    auto h = fc({x, emb}, 16).act(relu);
    auto h2 = fc(h, 16).act(relu);
    auto pred = fc(h2, 3).act(softmax);
    cost = mean(cross_entropy(pred, label));
    acc = accuracy(pred, label);
  }
};

struct Pass {
  Program p;
  std::vector<ParamGrad> pg;
  std::string loss;
};

Pass backward_of(const Model& m, const std::string& loss) {
  Pass r{m.program(), {}, loss};
  r.pg = append_backward(r.p, loss);
  return r;
}

/// Where each op's outputs are last written.
std::map<std::string, size_t> last_writes(const Block& b, size_t end) {
  std::map<std::string, size_t> w;
  for (size_t i = 0; i < end; ++i)
    for (auto& n : b.op(i).output_names()) w[n] = i;
  return w;
}

}  // namespace

TEST_CASE("dist: the collective pass scales the loss gradient and sums each bucket after its last gradient is written") {
  Tape tape;
  SparseNet n;
  Model model(tape.program({n.cost, n.acc}));
  Pass a = backward_of(model, model.name_of(n.cost));
  const size_t before = a.p.global_block().num_ops();
  optim::append_collective(a.p, a.loss, a.pg, {.nranks = 4, .ring_id = 3, .bucket_bytes = 600});
  const Block& b = a.p.global_block();
  // The seed of the backward pass, then scale 1/4 of it.
  size_t seed = b.num_ops();
  for (size_t i = 0; i < b.num_ops(); ++i)
    if (b.op(i).output_names() == std::vector<std::string>{grad_var_name(a.loss)}) {
      seed = i;
      break;
    }
  REQUIRE(seed + 1 < b.num_ops());
  REQUIRE(b.op(seed + 1).type() == ops::Scale::type);
  CHECK(b.op(seed + 1).attr(ops::Scale::scale) == doctest::Approx(0.25));
  // Every gradient is summed exactly once, after its last writer and before anything else writes it; the
  // sparse table's alone; the sync op last, naming them all.
  std::set<std::string> summed;
  int buckets = 0;
  bool sparse_alone = false;
  for (size_t i = 0; i < b.num_ops(); ++i) {
    const Operator& op = b.op(i);
    if (op.type() != ops::CAllreduceSum::type) continue;
    ++buckets;
    CHECK(op.attr(ops::CollectiveOp::ring_id) == 3);
    CHECK(op.input(ops::CAllreduceSum::x) == op.output(ops::CAllreduceSum::out));
    auto w = last_writes(b, b.num_ops() - 1);  // all but the sync op
    for (auto& g : op.input(ops::CAllreduceSum::x)) {
      CHECK(summed.insert(g).second);
      CHECK(w[g] == i);  // nothing after this op writes it again
      auto before_op = last_writes(b, i);
      CHECK(before_op.count(g));  // and its gradient op came first
      if (b.op(before_op[g]).type() == "lookup_table_grad") sparse_alone = op.input(ops::CAllreduceSum::x).size() == 1;
    }
  }
  CHECK(summed.size() == a.pg.size());
  CHECK(sparse_alone);
  CHECK(buckets >= 3);  // 600-byte buckets: several
  CHECK(b.num_ops() == before + size_t(buckets) + 2);
  const Operator& sync = b.op(b.num_ops() - 1);
  CHECK(sync.type() == ops::CSyncCommStream::type);
  CHECK(sync.input(ops::CSyncCommStream::x).size() == a.pg.size());
  CHECK(contains(oar::to_string(a.p), "c_allreduce_sum"));

  // One large bucket: the dense gradients travel together, after the last of them.
  Pass one = backward_of(model, model.name_of(n.cost));
  optim::append_collective(one.p, one.loss, one.pg, {.nranks = 2});
  int dense = 0;
  for (auto* op : one.p.global_block().ops())
    if (op->type() == ops::CAllreduceSum::type && op->input(ops::CAllreduceSum::x).size() > 1) ++dense;
  CHECK(dense == 1);

  // overlap off: every bucket after the whole backward pass.
  Pass late = backward_of(model, model.name_of(n.cost));
  const size_t grads_end = late.p.global_block().num_ops();
  optim::append_collective(late.p, late.loss, late.pg, {.nranks = 2, .bucket_bytes = 600, .overlap = false});
  for (size_t i = 0; i < late.p.global_block().num_ops(); ++i)
    if (late.p.global_block().op(i).type() == ops::CAllreduceSum::type) CHECK(i > grads_end);

  // A program without the backward pass of that loss.
  Program plain = model.program();
  CHECK(contains(error_of([&] { optim::append_collective(plain, a.loss, {}, {.nranks = 2}); }), "no backward pass"));
}

TEST_CASE("dist: with reduce_to_owner (ZeRO) each dense gradient is summed into its parameter's owner, in buckets per owner") {
  Tape tape;
  SparseNet n;
  Model model(tape.program({n.cost, n.acc}));
  Pass a = backward_of(model, model.name_of(n.cost));
  const auto owner = optim::deal_out(a.p.global_block(), a.pg, 3);
  optim::append_collective(a.p, a.loss, a.pg, {.nranks = 3, .ring_id = 2, .bucket_bytes = 300, .reduce_to_owner = true});
  const Block& b = a.p.global_block();
  std::map<std::string, std::string> param_of;
  for (auto& pg : a.pg) param_of[pg.grad] = pg.param;
  std::set<std::string> summed;
  std::set<int> roots;
  int gathered = 0;
  for (size_t i = 0; i < b.num_ops(); ++i) {
    const Operator& op = b.op(i);
    if (op.type() == ops::CAllreduceSum::type) {  // only the sparse embedding's rows, gathered on every rank
      ++gathered;
      REQUIRE(op.input(ops::CAllreduceSum::x).size() == 1);
      CHECK(b.op(last_writes(b, i).at(op.input(ops::CAllreduceSum::x)[0])).type() == "lookup_table_grad");
      summed.insert(op.input(ops::CAllreduceSum::x)[0]);
      continue;
    }
    if (op.type() != ops::CReduceSum::type) continue;
    const int root = op.attr(ops::CReduceSum::root_id);
    roots.insert(root);
    CHECK(op.attr(ops::CollectiveOp::ring_id) == 2);
    CHECK(op.input(ops::CReduceSum::x) == op.output(ops::CReduceSum::out));
    auto w = last_writes(b, b.num_ops() - 1);
    for (auto& g : op.input(ops::CReduceSum::x)) {
      CHECK(summed.insert(g).second);
      CHECK(owner.at(param_of.at(g)) == root);  // one owner per bucket: the owner of each of its gradients
      CHECK(w[g] == i);
    }
  }
  CHECK(gathered == 1);
  CHECK(summed.size() == a.pg.size());
  CHECK(roots == std::set<int>{0, 1, 2});  // eight parameters over three ranks: every rank owns dense ones
  // deal_out: largest first, each to the rank with the fewest bytes so far; every rank's share within the
  // largest parameter of the others'.
  std::vector<int64_t> load(3, 0);
  int64_t largest = 0;
  for (auto& [p, r] : owner) {
    const int64_t bytes = b.var(p).shape().numel() * 4;
    load[size_t(r)] += bytes;
    largest = std::max(largest, bytes);
  }
  CHECK(*std::max_element(load.begin(), load.end()) - *std::min_element(load.begin(), load.end()) <= largest);
}

TEST_CASE("dist: the broadcast program checks the ring and copies each variable from the root") {
  Program p = optim::broadcast_program({{"w", DType::f32, Shape{3, 2}}, {"b", DType::f32, Shape{2}}}, {.nranks = 2, .ring_id = 1}, 0);
  auto types = oar::test::op_types(p);
  CHECK(types == std::vector<std::string>{"c_comm_init", "c_broadcast", "c_broadcast"});
  CHECK(p.global_block().op(0).attr(ops::CCommInit::nranks) == 2);
  CHECK(p.global_block().op(2).input(ops::CBroadcast::x) == std::vector<std::string>{"b"});
  // No communicator on ring 9: the error says what to make.
  Program q = optim::broadcast_program({}, {.nranks = 2, .ring_id = 9}, 0);
  Scope scope;
  Executor exe;
  CHECK(contains(error_of([&] { exe.run(q, scope); }), "ring 9 has no communicator: make an oar::dist::Context"));
}

TEST_CASE("dist: without mpirun a Context is a world of one, and data parallel trains exactly as one process") {
  dist::Context ctx;
  CHECK(ctx.rank() == 0);
  CHECK(ctx.world_size() == 1);
  CHECK(ctx.local_rank() == 0);
  CHECK(!ctx.uses_mpi());
  CHECK(ctx.is_root());
  ctx.barrier();
  CHECK(contains(error_of([] { dist::Context again; }), "one per process"));
  auto losses = [&](bool dp) {
    Tape tape;
    SparseNet n;
    Model model(tape.program({n.cost, n.acc}), 5);
    auto opt = dp ? std::make_unique<Optimizer>(model, n.cost, optim::adam(0.01), dist::data_parallel(ctx)) : std::make_unique<Optimizer>(model, n.cost, optim::adam(0.01));
    std::vector<float> x(96 * 8);
    std::vector<int64_t> ids(96), y(96);
    for (size_t i = 0; i < x.size(); ++i) x[i] = float(int(i * 37 % 11) - 5) / 5.f;
    for (size_t i = 0; i < 96; ++i) ids[i] = int64_t(i * 7 % 40), y[i] = int64_t(i % 3);
    auto r = io::Reader::from_tensors({Tensor::from<float>(x, {96, 8}), Tensor::from<int64_t>(ids, {96, 1}), Tensor::from<int64_t>(y, {96, 1})})
                 .shard(ctx.rank(), ctx.world_size())
                 .batch(16);
    std::vector<double> out;
    opt->train(r, {n.x, n.ids, n.label}, 2, [&](const Event& e) {
      if (e.kind == Event::Kind::end_iteration) out.push_back(e.loss);
    });
    CHECK(!opt->data_parallel().has_value());
    return out;
  };
  CHECK(losses(true) == losses(false));
}

TEST_CASE("dist: Reader::shard gives each rank every world-th item, the same count to each, and resumes exactly") {
  std::vector<io::Sample> items;
  for (int i = 0; i < 11; ++i) items.push_back({Tensor::from<int64_t>({int64_t(i)}, Shape{1})});
  auto all = io::Reader::from_samples(items);
  std::set<int64_t> seen;
  for (int r = 0; r < 3; ++r) {
    auto part = all.shard(r, 3);
    std::vector<int64_t> got;
    for (auto& s : part) got.push_back(s[0].get(0) < 0 ? -1 : int64_t(s[0].get(0)));
    CHECK(got == std::vector<int64_t>{r, r + 3, r + 6});  // items 9 and 10 make a short last group: nobody's
    seen.insert(got.begin(), got.end());
    // Batches of 2, resumed at batch 1: the same as going on.
    auto batched = all.shard(r, 3).batch(2);
    auto resumed = batched;
    resumed.restore({0, 1});
    auto b = resumed.next();
    REQUIRE(b);
    CHECK((*b)[0].to_vector<int64_t>() == std::vector<int64_t>{r + 6});
  }
  CHECK(seen.size() == 9);
  CHECK(contains(error_of([&] { (void)all.shard(3, 3); }), "need 0 <= rank < world"));
}

TEST_CASE("dist: sync_batch_norm in a world of one is batch_norm, bit for bit, forward and backward") {
  dist::Context ctx;
  Tape tape;
  auto x = data("x", f32, {-1, 3, 4, 4});
  auto y = batch_norm(x).name("y");
  auto cost = mean(fc(y, 2));
  Model model(tape.program({cost}), 3);
  const std::string loss = model.name_of(cost);
  Program plain = model.program();
  auto pg = append_backward(plain, loss, {}, {"x"});
  Program synced = plain;
  optim::append_collective(synced, loss, pg, {.nranks = 1, .sync_batch_norm = true});
  auto types = oar::test::op_types(synced);
  CHECK(std::count(types.begin(), types.end(), "sync_batch_norm") == 1);
  CHECK(std::count(types.begin(), types.end(), "sync_batch_norm_grad") == 1);
  CHECK(std::count(types.begin(), types.end(), "batch_norm") == 0);
  std::vector<float> xs(5 * 3 * 4 * 4);
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = float(int(i * 29 % 17) - 8) * 0.3f + float(i % 3);
  FeedMap feeds{{"x", LoDTensor(Tensor::from<float>(xs, {5, 3, 4, 4}))}};
  std::vector<std::string> fetch{"y", "x@GRAD"};
  for (auto& p : pg) fetch.push_back(p.grad);
  Executor exe;
  auto run = [&](const Program& p) {
    Scope& s = model.scope().new_scope();
    auto out = exe.run(p, s, feeds, fetch);
    model.scope().drop(&s);
    return out;
  };
  auto a = run(plain), b = run(synced);
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    INFO(fetch[i]);
    CHECK(a[i].to_vector<float>() == b[i].to_vector<float>());
  }
}
