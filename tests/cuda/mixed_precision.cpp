// tests/cuda/mixed_precision.cpp: the 16-bit floats on the GPU: cast to and from f16 / bf16 gives the CPU's bits;
// mul, matmul and conv2d (cuBLAS, cuDNN on tensor cores, f32 accumulation) against the CPU's f32 kernels on
// the same 16-bit-rounded inputs; the loss-scaling ops against their CPU kernels; and a model trained with
// `.with_mixed_precision()` on cuda:0. Each comparison skips, saying so, without a device.
#include <doctest/doctest.h>

#include <oar/oar.hpp>

#include <random>

#include "cuda/compare.hpp"
#include "support/toy.hpp"

using namespace oar;
using namespace oar::test;
using namespace oar::test::cuda_check;

namespace {

/// `x` (f32) rounded to `t`, as a tensor of dtype t.
Tensor to_16(const Tensor& x, DType t) {
  Tensor out(x.shape(), t, cpu());
  auto* o = static_cast<uint16_t*>(out.raw());
  for (int64_t i = 0; i < x.numel(); ++i) o[i] = t == f16 ? to_half(x.data<float>()[i]).bits : to_bfloat16(x.data<float>()[i]).bits;
  return out;
}
/// `x` (16-bit) widened to f32.
Tensor widen(const Tensor& x) {
  std::vector<float> v(size_t(x.numel()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = float(x.get(int64_t(i)));
  return Tensor::from<float>(v, x.shape());
}

}  // namespace

TEST_CASE("cuda: cast to and from f16 and bf16 gives the CPU's bits") {
  Tensor x = random_tensor<float>({9, 31}, -70000, 70000, 5);
  x.data<float>()[0] = NAN;
  x.data<float>()[1] = 1e-7f;  // an f16 subnormal
  for (DType t : {f16, bf16}) {
    OpTest down("cast");
    down.input("X", x).attr("in_dtype", int32_t(f32)).attr("out_dtype", int32_t(t));
    compare_on_cuda(down, std::string("cast f32 -> ") + std::string(name(t)), 0, 0);
    OpTest up("cast");
    up.input("X", to_16(x, t)).attr("in_dtype", int32_t(t)).attr("out_dtype", int32_t(f32));
    compare_on_cuda(up, std::string("cast ") + std::string(name(t)) + " -> f32", 0, 0);
  }
}

TEST_CASE("cuda: mul, matmul and conv2d in f16 and bf16 (tensor cores, f32 accumulation) and their gradients match the CPU's f32 on the same inputs") {
  for (DType t : {f16, bf16}) {
    const double rtol = t == f16 ? 2e-3 : 1.6e-2;  // 11 and 8 significant bits of the output
    const std::string tn(name(t));
    Tensor x = to_16(random_tensor<float>({48, 40}, -1, 1, 1), t), y = to_16(random_tensor<float>({40, 24}, -1, 1, 2), t);
    Tensor dout = to_16(random_tensor<float>({48, 24}, -1, 1, 3), t);
    OpTest h("mul"), f("mul");
    h.input("X", x).input("Y", y);
    f.input("X", widen(x)).input("Y", widen(y));
    compare_on_cuda_scaled(h, f, "mul " + tn, rtol);
    OpTest hg("mul_grad"), fg("mul_grad");
    hg.input("X", x).input("Y", y).input("Out@GRAD", dout);
    fg.input("X", widen(x)).input("Y", widen(y)).input("Out@GRAD", widen(dout));
    compare_on_cuda_scaled(hg, fg, "mul_grad " + tn, rtol);

    Tensor a = to_16(random_tensor<float>({3, 17, 32}, -1, 1, 4), t), b = to_16(random_tensor<float>({3, 24, 32}, -1, 1, 5), t);
    OpTest hm("matmul"), fm("matmul");
    hm.input("X", a).input("Y", b).attr("transpose_Y", true).attr("alpha", 0.5f);
    fm.input("X", widen(a)).input("Y", widen(b)).attr("transpose_Y", true).attr("alpha", 0.5f);
    compare_on_cuda_scaled(hm, fm, "matmul " + tn, rtol);
    Tensor dm = to_16(random_tensor<float>({3, 17, 24}, -1, 1, 6), t);
    OpTest hmg("matmul_grad"), fmg("matmul_grad");
    hmg.input("X", a).input("Y", b).input("Out@GRAD", dm).attr("transpose_Y", true).attr("alpha", 0.5f);
    fmg.input("X", widen(a)).input("Y", widen(b)).input("Out@GRAD", widen(dm)).attr("transpose_Y", true).attr("alpha", 0.5f);
    compare_on_cuda_scaled(hmg, fmg, "matmul_grad " + tn, rtol);
    Tensor shared = to_16(random_tensor<float>({32, 24}, -1, 1, 10), t);  // Y shared by the batch: its gradient sums over it
    OpTest hs("matmul_grad"), fs("matmul_grad");
    hs.input("X", a).input("Y", shared).input("Out@GRAD", dm);
    fs.input("X", widen(a)).input("Y", widen(shared)).input("Out@GRAD", widen(dm));
    compare_on_cuda_scaled(hs, fs, "matmul_grad, shared Y, " + tn, rtol);

    Tensor in = to_16(random_tensor<float>({4, 8, 12, 12}, -1, 1, 7), t), w = to_16(random_tensor<float>({16, 8, 3, 3}, -1, 1, 8), t);
    OpTest hc("conv2d"), fc2("conv2d");
    for (OpTest* o : {&hc, &fc2}) o->attr("strides", std::vector<int32_t>{1, 1}).attr("paddings", std::vector<int32_t>{1, 1});
    hc.input("Input", in).input("Filter", w);
    fc2.input("Input", widen(in)).input("Filter", widen(w));
    compare_on_cuda_scaled(hc, fc2, "conv2d " + tn, rtol);
    Tensor dc = to_16(random_tensor<float>({4, 16, 12, 12}, -1, 1, 9), t);
    OpTest hcg("conv2d_grad"), fcg("conv2d_grad");
    for (OpTest* o : {&hcg, &fcg}) o->attr("strides", std::vector<int32_t>{1, 1}).attr("paddings", std::vector<int32_t>{1, 1});
    hcg.input("Input", in).input("Filter", w).input("Output@GRAD", dc);
    fcg.input("Input", widen(in)).input("Filter", widen(w)).input("Output@GRAD", widen(dc));
    compare_on_cuda_scaled(hcg, fcg, "conv2d_grad " + tn, rtol);
  }
}

TEST_CASE("cuda: check_finite_and_unscale, update_loss_scaling and logical_not match the CPU") {
  Tensor scale = Tensor::from<float>({512.f}, Shape{1});
  Tensor a = random_tensor<float>({33, 7}, -100, 100, 3), b = random_tensor<float>({1000}, -100, 100, 4);
  OpTest ok("check_finite_and_unscale");
  ok.inputs("X", {a, b}).input("Scale", scale).outputs("Out", 2);
  compare_on_cuda(ok, "check_finite_and_unscale (finite)", 0, 0);
  b.data<float>()[999] = INFINITY;
  OpTest inf("check_finite_and_unscale");
  inf.inputs("X", {a, b}).input("Scale", scale).outputs("Out", 2);
  compare_on_cuda(inf, "check_finite_and_unscale (inf)", 0, 0);
  for (bool found : {false, true}) {
    OpTest u("update_loss_scaling");
    u.input("FoundInfinite", Tensor::from<bool>({found}, Shape{1}))
        .input("PrevLossScaling", Tensor::from<float>({1024.f}, Shape{1}))
        .input("InGoodSteps", Tensor::from<int32_t>({2}, Shape{1}))
        .input("InBadSteps", Tensor::from<int32_t>({1}, Shape{1}))
        .attr("incr_every_n_steps", int32_t(3)).attr("decr_every_n_nan_or_inf", int32_t(2));
    compare_on_cuda(u, found ? "update_loss_scaling (overflow)" : "update_loss_scaling (clean)", 0, 0);
  }
  OpTest n("logical_not");
  n.input("X", Tensor::from<bool>({true, false, false, true, true}, Shape{5}));
  compare_on_cuda(n, "logical_not", 0, 0);
}

TEST_CASE("cuda: a model trained with .with_mixed_precision() (f16 and bf16) on cuda:0 reaches the f32 model's accuracy") {
  if (!have_device()) {
    MESSAGE("no CUDA device: skipped");
    return;
  }
  double acc[3] = {0, 0, 0};
  for (int k = 0; k < 3; ++k) {
    Tape tape;
    auto x = data("x", f32, {-1, 8});
    auto label = data("label", i64, {-1, 1});
    Var pred = fc(fc(x, 64).act(relu), 3).act(softmax);
    Var cost = mean(cross_entropy(pred, label));
    Var a = accuracy(pred, label);
    Model model(tape.program({cost, a}), cuda(0), 7);
    optim::Rule rule = optim::adam(0.01);
    if (k > 0) {
      optim::MixedPrecision m;
      m.dtype = k == 1 ? f16 : bf16;
      rule.with_mixed_precision(m);
    }
    Optimizer opt(model, cost, rule);
    auto r = toy_classes(2048, 1).shuffle(512, 5).batch(64);
    opt.train(r, {x, label}, 4);
    if (k > 0) CHECK(opt.loss_scale() >= 1.f);
    Evaluator ev(model);
    acc[k] = ev.test(toy_classes(512, 99).batch(128)).at(model.name_of(a));
    if (k > 0) {  // the products ran in 16 bits
      int half_muls = 0;
      for (auto* op : opt.machine().program().global_block().ops())
        if (op->type() == "mul" && opt.machine().program().global_block().var(op->input("X")[0]).dtype() == (k == 1 ? f16 : bf16)) ++half_muls;
      CHECK(half_muls == 2);
    }
  }
  MESSAGE("accuracy f32 " << acc[0] << ", f16 " << acc[1] << ", bf16 " << acc[2]);
  CHECK(acc[0] > 0.85);
  CHECK(acc[1] > acc[0] - 0.02);
  CHECK(acc[2] > acc[0] - 0.03);
}
