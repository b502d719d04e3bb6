// tests/cuda/dist.cpp: NCCL's communicator (kernels/cuda/nccl.cpp) and the collective ops' CUDA kernels in a
// world of one on cuda(0), the one configuration a machine with a single GPU can run (NCCL refuses two ranks on
// one device): the bucket is packed, padded, reduce-scattered, all-gathered and unpacked by NCCL itself, so a
// sum over one rank must give back every value bit for bit. Ranks on several GPUs: .ci/gpu runs
// tests/mpi/rank.cpp's `equal` on two of them when the machine has two.
#include <doctest/doctest.h>

#include <random>

#include "cuda/compare.hpp"
#include "oar/ops/collective.hpp"

using namespace oar;
using namespace oar::test::cuda_check;
using oar::test::error_of;

namespace {

Tensor random_host(Shape s, DType t, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> d;
  Tensor x(s, t, cpu());
  for (int64_t i = 0; i < x.numel(); ++i) {
    if (t == DType::f32) x.data<float>()[i] = float(d(rng));
    else x.data<double>()[i] = d(rng);
  }
  return x;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  const Tensor x = a.to(cpu()), y = b.to(cpu());
  return x.dtype() == y.dtype() && x.numel() == y.numel() && std::memcmp(x.raw(), y.raw(), x.bytes()) == 0;
}

}  // namespace

TEST_CASE("NCCL: a world of one on cuda(0) sums a packed bucket and broadcasts, every value unchanged") {
  if (!have_device()) {
    ++g_skipped;
    MESSAGE("skipped: no CUDA device (NCCL's communicator has never run on this machine)");
    return;
  }
  dist::Context ctx;
  std::shared_ptr<Communicator> nccl = ctx.communicator(cuda(0));
  REQUIRE(nccl != nullptr);
  CHECK(nccl->place() == cuda(0));
  CHECK(nccl->size() == 1);
  CHECK(find_communicator(0, cuda(0)) == nccl);
  CHECK(ctx.communicator(cuda(0)) == nccl);  // one per device
  CHECK(find_communicator(0) == ctx.communicator());

  for (DType t : {DType::f32, DType::f64}) {
    // Sizes that do not fill a chunk evenly, and an empty part.
    std::vector<Tensor> host{random_host(Shape{7}, t, 1), random_host(Shape{1000}, t, 2), Tensor(Shape{0}, t, cpu()), random_host(Shape{3, 3}, t, 3)};
    std::vector<Tensor> dev;
    std::vector<void*> parts;
    std::vector<int64_t> counts;
    for (auto& h : host) {
      dev.push_back(h.to(cuda(0), true));
      parts.push_back(dev.back().raw());
      counts.push_back(h.numel());
    }
    nccl->all_reduce_sum(parts, counts, t, "a test bucket");
    for (size_t i = 0; i < host.size(); ++i) CHECK_MESSAGE(same_bits(dev[i], host[i]), "part " << i << " of " << name(t));
    Tensor one = random_host(Shape{5}, t, 4), d1 = one.to(cuda(0), true);
    nccl->broadcast(d1.raw(), int64_t(d1.bytes()), 0, "a test broadcast");
    CHECK(same_bits(d1, one));
  }
  CHECK_FALSE(nccl->failed());
}

TEST_CASE("NCCL: a GPU program's c_allreduce_sum waits for the kernels before it and c_sync_comm_stream for the sum, graphs or not") {
  if (!have_device()) {
    ++g_skipped;
    return;
  }
  dist::Context ctx;
  ctx.communicator(cuda(0));
  // ga = 2a and gc = 3c, summed over the ranks as one bucket, then ga halved: a read of the sum.
  Program good;
  {
    Block& g = good.global_block();
    for (const char* n : {"a", "c", "ga", "gc"}) g.create_var(n, {.dtype = f32, .shape = Shape{-1, 33}});
    Operator s1("scale"), s2("scale"), ar(std::string(ops::CAllreduceSum::type)), sync(std::string(ops::CSyncCommStream::type)), s3("scale");
    s1.set_input("X", {"a"}).set_output("Out", {"ga"}).set_attr("scale", 2.f);
    s2.set_input("X", {"c"}).set_output("Out", {"gc"}).set_attr("scale", 3.f);
    ar.set_input("X", {"ga", "gc"}).set_output("Out", {"ga", "gc"}).set_attr("ring_id", 0).set_attr("use_calc_stream", false);
    sync.set_input("X", {"ga", "gc"}).set_output("Out", {"ga", "gc"}).set_attr("ring_id", 0);
    s3.set_input("X", {"ga"}).set_output("Out", {"ga"}).set_attr("scale", 0.5f);
    for (Operator* op : {&s1, &s2, &ar, &sync, &s3}) add_op(g, *op);
  }
  Scope scope;
  Executor exe(cuda(0));
  Tensor a = random_host(Shape{64, 33}, DType::f32, 5), c = random_host(Shape{64, 33}, DType::f32, 6);
  const auto captures_before = cuda_graph_stats().captures;
  set_cuda_graphs(true);
  for (int run = 0; run < 4; ++run) {
    auto out = exe.run(good, scope, {{"a", LoDTensor(a)}, {"c", LoDTensor(c)}}, {"ga", "gc"});
    for (int64_t i = 0; i < a.numel(); ++i) {
      CHECK(out[0].get(i) == doctest::Approx(a.get(i)).epsilon(1e-6));
      CHECK(out[1].get(i) == doctest::Approx(3 * c.get(i)).epsilon(1e-6));
    }
  }
  set_cuda_graphs(false);
  CHECK(cuda_graph_stats().captures == captures_before);  // collectives keep a block out of graphs
  // Another ring has no communicator on the GPU: the error says who makes one.
  Program r;
  {
    Block& g = r.global_block();
    g.create_var("x", {.dtype = f32, .shape = Shape{3}});
    Operator ar(std::string(ops::CAllreduceSum::type));
    ar.set_input("X", {"x"}).set_output("Out", {"x"}).set_attr("ring_id", 5);
    add_op(g, ar);
  }
  CHECK(error_of([&] { exe.run(r, scope, {{"x", LoDTensor(random_host(Shape{3}, DType::f32, 7))}}, {}); }).find("ring 5 has no communicator on cuda:0") !=
        std::string::npos);
}
