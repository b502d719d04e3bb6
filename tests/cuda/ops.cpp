// tests/cuda/ops.cpp: every CUDA kernel against the CPU kernel of the same op on the same inputs (forward and
// gradient ops, f32 and f64, tolerances stated per op), through the op harness on both places. Without a
// device the comparisons skip, saying so; the registry check below runs everywhere: a CUDA build registers a
// CUDA kernel for each op listed.
#include <doctest/doctest.h>

#include <cstring>

#include <oar/ops/fused_elementwise.hpp>
#include <oar/ops/optimizers.hpp>

#include "cuda/compare.hpp"
#include "kernels/cuda/conv_pick.hpp"  // the algorithm choice, plain host code

using namespace oar;
using namespace oar::test;
using namespace oar::test::cuda_check;


TEST_CASE("cuda: a CUDA build registers a CUDA kernel for each op it lists") {
  const KernelRegistry& r = KernelRegistry::instance();
  const char* ops[] = {"relu", "relu_grad", "sigmoid", "tanh_grad", "gelu", "clip_grad", "elementwise_add", "elementwise_add_grad",
                       "elementwise_mul_grad", "elementwise_pow", "scale", "scale_grad", "fill_constant", "fill_constant_batch_size_like", "sum",
                       "sum_grad", "mean", "mean_grad", "mul", "mul_grad", "softmax", "softmax_grad", "log_softmax_grad", "cross_entropy",
                       "cross_entropy_grad", "top_k", "accuracy", "sgd", "momentum", "adam", "adamw", "adagrad", "decayed_adagrad", "adamax", "rmsprop", "adadelta", "lamb", "uniform_random", "gaussian_random",
                       "truncated_gaussian_random", "lr_schedule", "increment", "conv2d", "conv2d_grad", "conv2d_fusion", "conv2d_transpose", "conv2d_transpose_grad", "pool2d", "pool2d_grad", "batch_norm", "batch_norm_grad", "fill_zeros_like", "cast", "transpose", "transpose_grad", "reshape", "reshape_grad",
                       "flatten", "squeeze_grad", "unsqueeze", "assign", "concat", "concat_grad", "split", "stack", "stack_grad", "matmul", "matmul_grad", "softmax_with_cross_entropy", "softmax_with_cross_entropy_grad", "dropout", "dropout_grad", "reduce_sum", "reduce_mean_grad", "reduce_max", "reduce_min_grad", "arg_max", "arg_min", "lookup_table", "lookup_table_grad", "slice", "slice_grad", "gather", "gather_grad", "fused_elementwise", "fused_elementwise_grad",
                       "squared_l2_norm", "squared_l2_norm_grad", "clip_by_norm", "sign", "layer_norm", "layer_norm_grad",
                       "less_than", "less_equal", "greater_than", "greater_equal", "equal", "not_equal", "logical_and", "logical_or", "logical_xor",
                       "one_hot", "sigmoid_cross_entropy_with_logits", "sigmoid_cross_entropy_with_logits_grad",
                       "sequence_pool", "sequence_pool_grad", "sequence_softmax", "sequence_softmax_grad", "sequence_expand", "sequence_expand_grad"};
  for (const char* op : ops) {
    CAPTURE(op);
    const KernelEntry* e = r.find(op);
    REQUIRE(e != nullptr);
    CHECK(bool(e->cpu));
    CHECK(bool(e->cuda));
    CHECK(e->places() == "cpu, cuda");
  }
  for (const char* op : {"sgd", "momentum", "adam", "adamw", "adagrad", "decayed_adagrad", "adamax", "rmsprop", "adadelta", "lamb"})
    CHECK(bool(r.find(op)->cuda_group));  // one launch for many parameters
}

TEST_CASE("cuda: without a device, a CUDA model or executor is an oar::Error saying so") {
  if (have_device()) return;
  CHECK_THROWS_WITH_AS(Executor(cuda(0)), doctest::Contains("no CUDA device 0"), Error);
}

TEST_CASE_TEMPLATE("cuda: unary ops and their gradients match the CPU", T, float, double) {
#define OAR_CUDA_UNARY_CASE(kind, op_type, Functor, a0, d0, a1, d1)                                                 \
  {                                                                                                                 \
    const std::string type = #op_type;                                                                              \
    const bool positive = type == "log" || type == "sqrt" || type == "pow" || type == "reciprocal";                 \
    Tensor x = random_tensor<T>({7, 33}, positive ? 0.1 : -3, 3, 11);                                               \
    OpTest f(type);                                                                                                 \
    f.input("X", x);                                                                                                \
    compare_on_cuda(f, type, tol<T>(), tol<T>());                                                                   \
    OpTest g(type + "_grad");                                                                                       \
    g.skip_inferred_check();                                                                                        \
    OpTest fwd(type);                                                                                               \
    fwd.input("X", x);                                                                                              \
    const LoDTensor y = fwd.run().at("Out");                                                                        \
    if (ops::ReluOp::grad_reads_x(type)) g.input("X", x); /* the others' grads read Out alone */                   \
    g.input("Out", y).input("Out@GRAD", random_tensor<T>({7, 33}, -1, 1, 12));                                      \
    compare_on_cuda(g, type + "_grad", tol<T>(), tol<T>());                                                         \
  }
  OAR_UNARY_OPS(OAR_CUDA_UNARY_CASE)
#undef OAR_CUDA_UNARY_CASE
}

TEST_CASE_TEMPLATE("cuda: binary ops with and without broadcast, and their gradients, match the CPU", T, float, double) {
  struct Case { Shape x, y; int axis; };
  for (const Case& k : {Case{{6, 5}, {6, 5}, -1}, Case{{64, 10}, {10}, -1}, Case{{4, 3, 5}, {3}, 1}, Case{{2, 3, 4, 5}, {3, 4}, 1}}) {
    for (const char* op : {"elementwise_add", "elementwise_sub", "elementwise_mul", "elementwise_div", "elementwise_max", "elementwise_min",
                           "elementwise_pow"}) {
      const std::string type = op;
      const double lo = type == "elementwise_pow" || type == "elementwise_div" ? 0.5 : -2;
      Tensor x = random_tensor<T>(k.x, lo, 2, 21), y = random_tensor<T>(k.y, lo, 2, 22);
      OpTest f(type);
      f.input("X", x).input("Y", y).attr("axis", int32_t(k.axis));
      compare_on_cuda(f, type + " " + k.x.str() + " " + k.y.str(), tol<T>(), tol<T>());
      OpTest g(type + "_grad");
      g.skip_inferred_check();
      g.input("X", x).input("Y", y).input("Out@GRAD", random_tensor<T>(k.x, -1, 1, 23)).attr("axis", int32_t(k.axis));
      // Y@GRAD sums over the broadcast rows: its tolerance grows with their count.
      compare_on_cuda(g, type + "_grad " + k.x.str() + " " + k.y.str(), 10 * tol<T>(), 10 * tol<T>());
    }
  }
}

TEST_CASE("cuda: integer elementwise_add and scale match the CPU") {
  OpTest f("elementwise_add");
  f.input("X", random_tensor<int64_t>({5, 4}, -100, 100, 31)).input("Y", random_tensor<int64_t>({4}, -100, 100, 32)).attr("axis", int32_t(-1));
  compare_on_cuda(f, "elementwise_add i64", 0, 0);
  OpTest s("scale");
  s.input("X", random_tensor<int32_t>({9}, -50, 50, 33)).attr("scale", 3.0f).attr("bias", 2.0f).attr("bias_after_scale", false);
  compare_on_cuda(s, "scale i32", 0, 0);
}

TEST_CASE_TEMPLATE("cuda: scale, fill_constant, sum and mean match the CPU", T, float, double) {
  Tensor x = random_tensor<T>({13, 17}, -1, 1, 41);
  OpTest s("scale");
  s.input("X", x).attr("scale", 2.5f).attr("bias", -0.5f).attr("bias_after_scale", true);
  compare_on_cuda(s, "scale", tol<T>(), tol<T>());
  OpTest sg("scale_grad");
  sg.skip_inferred_check();
  sg.input("Out@GRAD", x).attr("scale", 2.5f);
  compare_on_cuda(sg, "scale_grad", tol<T>(), tol<T>());
  OpTest f("fill_constant");
  f.attr("shape", std::vector<int64_t>{3, 4}).attr("dtype", int32_t(dtype_of<T>)).attr("value", 1.25f);
  compare_on_cuda(f, "fill_constant", 0, 0);
  OpTest sum("sum");
  sum.inputs("X", {x, random_tensor<T>({13, 17}, -1, 1, 42), random_tensor<T>({13, 17}, -1, 1, 43)});
  compare_on_cuda(sum, "sum of 3", tol<T>(), tol<T>());
  OpTest m("mean");
  m.input("X", random_tensor<T>({100, 1000}, 0, 1, 44));
  compare_on_cuda(m, "mean of 100000", tol<T>(), tol<T>());
  OpTest mg("mean_grad");
  mg.skip_inferred_check();
  mg.input("X", x).input("Out@GRAD", Tensor::from<T>({T(3)}, {1}));
  compare_on_cuda(mg, "mean_grad", tol<T>(), tol<T>());
}

TEST_CASE_TEMPLATE("cuda: mul (cuBLAS) and its gradients match the CPU", T, float, double) {
  struct Case { Shape x, y; int xd, yd; };
  for (const Case& k : {Case{{64, 784}, {784, 200}, 1, 1}, Case{{3, 4, 5}, {20, 7}, 1, 1}, Case{{2, 3, 8}, {8, 6}, 2, 1}, Case{{1, 1}, {1, 9}, 1, 1}}) {
    Tensor x = random_tensor<T>(k.x, -1, 1, 51), y = random_tensor<T>(k.y, -1, 1, 52);
    OpTest f("mul");
    f.input("X", x).input("Y", y).attr("x_num_col_dims", int32_t(k.xd)).attr("y_num_col_dims", int32_t(k.yd));
    // Sums of up to 784 products: the tolerance of an f32 dot product that long.
    const double t = std::is_same_v<T, double> ? 1e-12 : 1e-4;
    compare_on_cuda(f, "mul " + k.x.str() + " x " + k.y.str(), t, t);
    const LoDTensor out = f.run().at("Out");
    OpTest g("mul_grad");
    g.skip_inferred_check();
    g.input("X", x).input("Y", y).input("Out@GRAD", random_tensor<T>(out.shape(), -1, 1, 53));
    g.attr("x_num_col_dims", int32_t(k.xd)).attr("y_num_col_dims", int32_t(k.yd));
    compare_on_cuda(g, "mul_grad " + k.x.str() + " x " + k.y.str(), t, t);
  }
}

TEST_CASE_TEMPLATE("cuda: softmax and log_softmax (cuDNN) along any axis, and their gradients, match the CPU", T, float, double) {
  for (const char* op : {"softmax", "log_softmax"})
    for (int axis : {-1, 0, 1}) {
      const std::string type = op;
      Tensor x = random_tensor<T>({4, 10, 3}, -5, 5, 61);
      OpTest f(type);
      f.input("X", x).attr("axis", int32_t(axis));
      compare_on_cuda(f, type + " axis " + std::to_string(axis), tol<T>(), tol<T>());
      const LoDTensor y = f.run().at("Out");
      OpTest g(type + "_grad");
      g.skip_inferred_check();
      g.input("Out", y).input("Out@GRAD", random_tensor<T>({4, 10, 3}, -1, 1, 62)).attr("axis", int32_t(axis));
      compare_on_cuda(g, type + "_grad axis " + std::to_string(axis), tol<T>(), tol<T>());
    }
}

TEST_CASE_TEMPLATE("cuda: cross_entropy (hard, soft, ignore_index), top_k and accuracy match the CPU", T, float, double) {
  const int64_t n = 37, d = 10;
  Tensor prob = random_tensor<T>({n, d}, 0.01, 1, 71);
  Tensor label = random_tensor<int64_t>({n, 1}, 0, d, 72);
  label.data<int64_t>()[3] = -100;  // ignored
  OpTest h("cross_entropy");
  h.input("X", prob).input("Label", label).attr("ignore_index", int32_t(-100));
  compare_on_cuda(h, "cross_entropy hard", tol<T>(), tol<T>());
  OpTest hg("cross_entropy_grad");
  hg.skip_inferred_check();
  hg.input("X", prob).input("Label", label).input("Y@GRAD", random_tensor<T>({n, 1}, -1, 1, 73)).attr("ignore_index", int32_t(-100));
  compare_on_cuda(hg, "cross_entropy_grad hard", tol<T>(), tol<T>());
  Tensor soft = random_tensor<T>({n, d}, 0, 0.2, 74);
  OpTest s("cross_entropy");
  s.input("X", prob).input("Label", soft).attr("soft_label", true);
  compare_on_cuda(s, "cross_entropy soft", 10 * tol<T>(), 10 * tol<T>());
  OpTest sg("cross_entropy_grad");
  sg.skip_inferred_check();
  sg.input("X", prob).input("Label", soft).input("Y@GRAD", random_tensor<T>({n, 1}, -1, 1, 75)).attr("soft_label", true);
  compare_on_cuda(sg, "cross_entropy_grad soft", tol<T>(), tol<T>());
  Tensor scores = random_tensor<T>({n, d}, -1, 1, 76);
  scores.data<T>()[5] = scores.data<T>()[6];  // a tie: the lower index first
  for (int k : {1, 3}) {
    OpTest t("top_k");
    t.input("X", scores).attr("k", int32_t(k));
    compare_on_cuda(t, "top_k " + std::to_string(k), 0, 0);
    OpTest a("accuracy");
    Tensor lab = random_tensor<int64_t>({n, 1}, 0, d, 77);
    a.input("Out", t.run().at("Out")).input("Indices", t.run().at("Indices")).input("Label", lab);
    compare_on_cuda(a, "accuracy top " + std::to_string(k), 0, 0);
  }
}

TEST_CASE_TEMPLATE("cuda: sgd, momentum, adam and adamw updates match the CPU", T, float, double) {
  const Shape s{50, 20};
  Tensor p = random_tensor<T>(s, -1, 1, 81), g = random_tensor<T>(s, -1, 1, 82), v = random_tensor<T>(s, -1, 1, 83);
  Tensor m2 = random_tensor<T>(s, 0, 1, 84), lr = Tensor::from<T>({T(0.05)}, {1});
  OpTest sgd("sgd");
  sgd.input("Param", p).input("Grad", g).input("LearningRate", lr);
  compare_on_cuda(sgd, "sgd", tol<T>(), tol<T>());
  for (bool nesterov : {false, true}) {
    OpTest mo("momentum");
    mo.input("Param", p).input("Grad", g).input("Velocity", v).input("LearningRate", lr).attr("mu", 0.9f).attr("use_nesterov", nesterov);
    compare_on_cuda(mo, nesterov ? "momentum nesterov" : "momentum", tol<T>(), tol<T>());
  }
  for (const char* op : {"adam", "adamw"}) {
    OpTest a(op);
    a.input("Param", p).input("Grad", g).input("LearningRate", lr).input("Moment1", v).input("Moment2", m2);
    a.input("Beta1Pow", Tensor::from<T>({T(0.9 * 0.9)}, {1})).input("Beta2Pow", Tensor::from<T>({T(0.999 * 0.999)}, {1}));
    a.attr("beta1", 0.9f).attr("beta2", 0.999f).attr("epsilon", 1e-8f);
    if (std::string(op) == "adamw") a.attr("coeff", 0.01f).attr("with_decay", true);
    compare_on_cuda(a, op, 10 * tol<T>(), 10 * tol<T>());
  }
}

TEST_CASE_TEMPLATE("cuda: consecutive update ops run as one group (one launch for many parameters), each with its own SkipUpdate, and match the CPU", T,
                   float, double) {
  // 40 parameters: two launches of max_update_tensors; the first spans several chunks of a block.
  const int count = 40;
  auto size_of_param = [](int k) { return int64_t(k == 0 ? 9000 : 1 + 37 * k); };
  for (const char* rule : {"sgd", "momentum", "adam", "adamw", "adagrad", "decayed_adagrad", "adamax", "rmsprop", "rmsprop_centered", "adadelta", "lamb"}) {
    CAPTURE(rule);
    const std::string r = rule, type = r == "rmsprop_centered" ? "rmsprop" : r;
    const bool adam = r == "adam" || r == "adamw" || r == "lamb";  // lamb's slots are adam's
    Program prog;
    Block& b = prog.global_block();
    std::vector<std::pair<std::string, Tensor>> init;  // every persistable and its first value
    auto var = [&](const std::string& n, Tensor t) {
      b.create_var(n, {.dtype = t.dtype(), .shape = t.shape(), .persistable = true});
      init.emplace_back(n, std::move(t));
    };
    var("lr", Tensor::from<T>({T(0.05)}, {1}));
    // SkipUpdate per member: every third skipped, every third stepping with a false flag, the rest without one.
    var("skip_yes", Tensor::from<bool>({true}, {1}));
    var("skip_no", Tensor::from<bool>({false}, {1}));
    auto skip_of = [](int k) { return k % 3 == 0 ? "skip_yes" : k % 3 == 1 ? "skip_no" : ""; };
    for (int k = 0; k < count; ++k) {
      const std::string i = std::to_string(k);
      const Shape s{size_of_param(k)};
      var("p" + i, random_tensor<T>(s, -1, 1, 300 + k));
      var("g" + i, random_tensor<T>(s, -1, 1, 400 + k));
      Operator op{type};
      op.set_input(ops::Sgd::param, {"p" + i}).set_input(ops::Sgd::grad, {"g" + i});
      if (type != "adadelta") op.set_input(ops::Sgd::learning_rate, {"lr"});
      op.set_output(ops::Sgd::param_out, {"p" + i});
      if (*skip_of(k)) op.set_input(ops::param_update::skip_update, {skip_of(k)});
      // A state variable updated in place, drawn from [lo, hi) (the squares' averages positive).
      auto state = [&](Slot in, Slot out, double lo, double hi, uint64_t seed) {
        const std::string n = std::string(in.name) + i;
        var(n, random_tensor<T>(s, lo, hi, seed + k));
        op.set_input(in, {n}).set_output(out, {n});
      };
      if (r == "adagrad" || r == "decayed_adagrad") {
        state(ops::Adagrad::moment, ops::Adagrad::moment_out, 0, 1, 500);
        if (r == "decayed_adagrad") op.set_attr(ops::DecayedAdagrad::decay, 0.9f);
      }
      if (r == "adamax") {
        using A = ops::Adamax;
        state(A::moment, A::moment_out, -1, 1, 500);
        state(A::inf_norm, A::inf_norm_out, 0.1, 1, 600);
        var("b1p" + i, Tensor::from<T>({T(0.9 * 0.9)}, {1}));
        op.set_input(A::beta1_pow, {"b1p" + i}).set_output(A::beta1_pow_out, {"b1p" + i});
      }
      if (type == "rmsprop") {
        using R = ops::Rmsprop;
        state(R::mean_square, R::mean_square_out, 0.5, 1, 500);
        state(R::moment, R::moment_out, -1, 1, 600);
        op.set_attr(R::momentum, 0.9f);
        if (r == "rmsprop_centered") {
          state(R::mean_grad, R::mean_grad_out, -0.1, 0.1, 700);
          op.set_attr(R::centered, true);
        }
      }
      if (r == "adadelta") {
        state(ops::Adadelta::avg_squared_grad, ops::Adadelta::avg_squared_grad_out, 0, 1, 500);
        state(ops::Adadelta::avg_squared_update, ops::Adadelta::avg_squared_update_out, 0, 1, 600);
      }
      if (r == "momentum") {
        var("v" + i, random_tensor<T>(s, -1, 1, 500 + k));
        op.set_input(ops::Momentum::velocity, {"v" + i}).set_output(ops::Momentum::velocity_out, {"v" + i}).set_attr(ops::Momentum::mu, 0.9f);
      }
      if (adam) {
        using A = ops::Adam;
        var("m" + i, random_tensor<T>(s, -1, 1, 500 + k));
        var("u" + i, random_tensor<T>(s, 0, 1, 600 + k));
        var("b1p" + i, Tensor::from<T>({T(0.9 * 0.9)}, {1}));
        var("b2p" + i, Tensor::from<T>({T(0.999 * 0.999)}, {1}));
        op.set_input(A::moment1, {"m" + i}).set_input(A::moment2, {"u" + i}).set_input(A::beta1_pow, {"b1p" + i}).set_input(A::beta2_pow, {"b2p" + i});
        op.set_output(A::moment1_out, {"m" + i}).set_output(A::moment2_out, {"u" + i}).set_output(A::beta1_pow_out, {"b1p" + i});
        op.set_output(A::beta2_pow_out, {"b2p" + i});
        if (r == "adamw") op.set_attr(ops::AdamW::coeff, 0.01f).set_attr(ops::AdamW::with_decay, true);
        if (r == "lamb") op.set_attr(ops::Lamb::weight_decay, 0.01f);
      }
      add_op(b, std::move(op));
    }
    auto run = [&](Place place, int64_t* calls) {
      Scope scope;
      for (auto& [n, t] : init) scope.var(n).tensor() = LoDTensor(t.to(place, true));
      Executor exe(place);
      auto prepared = exe.prepare(prog, scope);
      Profiler prof;
      for (int step = 0; step < 2; ++step) exe.run(*prepared, scope, {}, {});
      for (const OpTime& o : prof.times())
        if (o.op == type) *calls = o.calls;
      std::map<std::string, Tensor> out;
      for (auto& [n, t] : init) out[n] = scope.find(n)->tensor().to(cpu());
      return out;
    };
    int64_t cpu_calls = 0, gpu_calls = 0;
    const auto want = run(cpu(), &cpu_calls);
    CHECK(cpu_calls == 2 * count);  // the CPU runs each op
    for (auto& [n, t] : init) {  // a skipped member's variables (its powers too) are as they were; the others moved
      if (n == "lr" || n.rfind("skip", 0) == 0 || n[0] == 'g') continue;
      const size_t digits = n.find_last_not_of("0123456789") + 1;  // the member's number ends the name
      const bool skipped = std::stoi(n.substr(digits)) % 3 == 0;
      bool same = true;
      for (int64_t e = 0; e < t.numel(); ++e) same = same && want.at(n).get(e) == t.get(e);
      CHECK_MESSAGE(same == skipped, r << " " << n << (skipped ? " changed though skipped" : " did not change"));
    }
    if (!have_device()) {
      ++g_skipped;
      continue;
    }
    const auto got = run(cuda(0), &gpu_calls);
    CHECK(gpu_calls == 2);  // one group per run
    for (auto& [n, t] : want)
      if (t.dtype() != DType::boolean) check_close(LoDTensor(got.at(n)), LoDTensor(t), 10 * tol<T>(), 10 * tol<T>(), r + " " + n);
  }
}

TEST_CASE_TEMPLATE("cuda: fused_elementwise (every unary token, the binary operators, broadcasts, constants) and its gradient match the CPU", T,
                   float, double) {
  const double t = std::is_same_v<T, double> ? 1e-12 : 1e-5;
  // The op and its gradient (every input's, a broadcast one summed over its broadcast dims) on the same inputs.
  auto both = [&](const std::vector<LoDTensor>& xs, const std::string& e, uint64_t seed) {
    OpTest f("fused_elementwise");
    f.inputs("X", xs).attr("expression", e);
    compare_on_cuda(f, e, t, t);
    const LoDTensor y = f.run().at("Out");
    OpTest g("fused_elementwise_grad");
    g.skip_inferred_check();
    g.inputs("X", xs).input("Out", y).input("Out@GRAD", random_tensor<T>(y.shape(), -1, 1, seed)).attr("expression", e).outputs("X@GRAD", xs.size());
    compare_on_cuda(g, e + " (grad)", 10 * t, 10 * t);
  };
  for (const auto& tok : ops::fused::unary_tokens)  // inputs in [0.5, 2]: every token is defined there
    both({LoDTensor(random_tensor<T>({37, 5}, 0.5, 2, 700))}, "x0 " + std::string(tok.name), 701);
  struct Case { std::vector<Shape> shapes; const char* expr; };
  const std::vector<Case> cases = {
      {{{300, 7}, {7}}, "x0 x1 add"},
      {{{300, 7}, {300, 1}}, "x0 x1 mul c:0.5 sub"},
      {{{1}, {300, 5}}, "x0 x1 div"},
      {{{64, 1}, {1, 9}}, "x0 x1 mul x0 add"},
      {{{8, 3, 4}, {3, 1}, {4}}, "x0 x1 mul x2 add relu"},
      {{{2, 50, 3}, {2, 1, 3}, {50, 1}}, "x0 x1 max x2 min"},
      {{{7}, {40, 7}, {40, 1}, {1}}, "x0 x1 mul x2 add x3 mul tanh"},
      {{{100}, {100}}, "x0 x1 pow neg c:2 x0 mul add"},
      {{{5, 4, 3, 2, 2}, {4, 1, 2, 1}}, "x0 x1 sub softplus:beta=2,threshold=10 x0 mul"},
      {{{0, 4}, {4}}, "x0 x1 mul exp"},
  };
  uint64_t seed = 710;
  for (const Case& k : cases) {
    std::vector<LoDTensor> xs;
    for (const Shape& sh : k.shapes) xs.emplace_back(random_tensor<T>(sh, 0.5, 2, seed++));
    both(xs, k.expr, seed++);
  }
}

TEST_CASE_TEMPLATE("cuda: a seeded random op fills a tensor with the CPU's values", T, float, double) {
  for (const char* op : {"uniform_random", "gaussian_random", "truncated_gaussian_random"}) {
    OpTest r(op);
    r.attr("shape", std::vector<int64_t>{1000, 3}).attr("dtype", int32_t(dtype_of<T>)).attr("seed", int32_t(1234));
    compare_on_cuda(r, op, 1e-6, 1e-6);
  }
}

TEST_CASE("cuda: lr_schedule (every kind) and increment match the CPU") {
  for (const char* kind : {"constant", "exponential", "natural_exp", "inverse_time", "polynomial", "piecewise", "cosine", "noam", "linear_warmup"})
    for (double step : {0.0, 7.0, 250.0}) {
      OpTest t("lr_schedule");
      t.input("Step", Tensor::from<int64_t>({int64_t(step)}, {1})).attr("kind", std::string(kind)).attr("learning_rate", 0.1f);
      t.attr("decay_steps", 100.0f).attr("total_steps", 300.0f).attr("warmup_steps", 10.0f);
      if (std::string(kind) == "piecewise") t.attr("boundaries", std::vector<float>{5, 100}).attr("values", std::vector<float>{0.1f, 0.01f, 0.001f});
      compare_on_cuda(t, std::string(kind) + " at " + std::to_string(step), 1e-7, 1e-6);
    }
  OpTest f("lr_schedule");
  f.input("Step", Tensor::from<float>({3.f}, {1})).attr("kind", std::string("exponential"));
  compare_on_cuda(f, "exponential at an f32 step", 1e-7, 1e-6);
  OpTest i64("increment");
  i64.input("X", Tensor::from<int64_t>({41}, {1})).attr("step", 1.0f);
  compare_on_cuda(i64, "increment i64", 0, 0);
  OpTest f32("increment");
  f32.input("X", Tensor::from<float>({2.5f}, {1})).attr("step", 0.25f);
  compare_on_cuda(f32, "increment f32", 0, 0);
}

TEST_CASE_TEMPLATE("cuda: conv2d (cuDNN) with strides, padding, dilation and groups, and its gradients, match the CPU", T, float, double) {
  struct Case { Shape x, f; std::vector<int32_t> s, p, d; int g; };
  for (const Case& k : {Case{{8, 1, 28, 28}, {20, 1, 5, 5}, {1, 1}, {0, 0}, {1, 1}, 1}, Case{{4, 20, 12, 12}, {50, 20, 5, 5}, {1, 1}, {0, 0}, {1, 1}, 1},
                        Case{{2, 6, 9, 11}, {8, 3, 3, 3}, {2, 1}, {1, 2}, {1, 2}, 2}, Case{{3, 4, 7, 7}, {4, 1, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 4}}) {
    const std::string what = k.x.str() + " * " + k.f.str();
    Tensor x = random_tensor<T>(k.x, -1, 1, 91), f = random_tensor<T>(k.f, -1, 1, 92);
    OpTest fwd("conv2d");
    fwd.input("Input", x).input("Filter", f).attr("strides", k.s).attr("paddings", k.p).attr("dilations", k.d).attr("groups", int32_t(k.g));
    // Sums of up to 500 products; f32: the CPU runs 5x5 filters as Winograd 8x8 tiles, whose rounding reaches
    // 5e-5 here; the tolerance leaves at least as much again to the device's own rounding.
    const double t = std::is_same_v<T, double> ? 1e-11 : 2e-4;
    compare_on_cuda(fwd, "conv2d " + what, t, t);
    const LoDTensor y = fwd.run().at("Output");
    OpTest g("conv2d_grad");
    g.skip_inferred_check();
    g.input("Input", x).input("Filter", f).input("Output@GRAD", random_tensor<T>(y.shape(), -1, 1, 93));
    g.attr("strides", k.s).attr("paddings", k.p).attr("dilations", k.d).attr("groups", int32_t(k.g));
    compare_on_cuda(g, "conv2d_grad " + what, 10 * t, 10 * t);
    for (const char* act : {"identity", "relu"}) {  // conv2d_fusion: the same convolution, then the bias and the activation
      OpTest fused("conv2d_fusion");
      fused.input("Input", x).input("Filter", f).input("Bias", random_tensor<T>({k.f[0]}, -1, 1, 94));
      fused.attr("strides", k.s).attr("paddings", k.p).attr("dilations", k.d).attr("groups", int32_t(k.g)).attr("activation", std::string(act));
      compare_on_cuda(fused, std::string("conv2d_fusion (") + act + ") " + what, t, t);
    }
  }
}

TEST_CASE("cuda: conv2d_grad and conv2d_transpose_grad with no output channels give zero gradients, as on the CPU") {
  // Output@GRAD is empty, Input@GRAD is not: zeros, without asking cuDNN about a 0-channel tensor.
  const Tensor x = random_tensor<float>({2, 3, 6, 6}, -1, 1, 181);
  OpTest g("conv2d_grad");
  g.skip_inferred_check();
  g.input("Input", x).input("Filter", Tensor(Shape{0, 3, 3, 3}, f32)).input("Output@GRAD", Tensor(Shape{2, 0, 4, 4}, f32));
  g.attr("strides", std::vector<int32_t>{1, 1}).attr("paddings", std::vector<int32_t>{0, 0});
  OpTest t("conv2d_transpose_grad");
  t.skip_inferred_check();
  t.input("Input", x).input("Filter", Tensor(Shape{3, 0, 3, 3}, f32)).input("Output@GRAD", Tensor(Shape{2, 0, 8, 8}, f32));
  t.attr("strides", std::vector<int32_t>{1, 1}).attr("paddings", std::vector<int32_t>{0, 0});
  for (const OpTest* op : {&g, &t}) {
    const LoDTensor dx = op->run().at("Input@GRAD");
    REQUIRE(dx.shape() == x.shape());
    for (int64_t i = 0; i < dx.numel(); ++i) CHECK(dx.get(i) == 0);
  }
  compare_on_cuda(g, "conv2d_grad, M = 0", 0, 0);
  compare_on_cuda(t, "conv2d_transpose_grad, 0 output channels", 0, 0);
}

TEST_CASE("cuda: the convolution algorithm kept leaves out WINOGRAD_NONFUSED past 3x3 filters in full f32 math") {
  using namespace oar::cuda_kernels;
  CHECK(coarse_winograd_excluded(true, false, 5, 5));
  CHECK(coarse_winograd_excluded(true, false, 1, 7));
  CHECK_FALSE(coarse_winograd_excluded(true, false, 3, 3));
  CHECK_FALSE(coarse_winograd_excluded(true, true, 5, 5));    // TF32 allowed: the user took reduced precision
  CHECK_FALSE(coarse_winograd_excluded(false, false, 5, 5));  // f64 (cuDNN has no Winograd for it), 16-bit data
  auto perf = [](int algo, cudnnMathType_t math, cudnnDeterminism_t det, size_t memory) {
    cudnnConvolutionBwdDataAlgoPerf_t p{};
    p.algo = cudnnConvolutionBwdDataAlgo_t(algo), p.status = CUDNN_STATUS_SUCCESS, p.mathType = math, p.determinism = det, p.memory = memory;
    return p;
  };
  // What a search on an H100 returned for the data gradient of [16, 20, 12, 12] * [50, 20, 5, 5], fastest first.
  const cudnnConvolutionBwdDataAlgoPerf_t found[] = {perf(CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED, CUDNN_FMA_MATH, CUDNN_DETERMINISTIC, 1 << 20),
                                                     perf(CUDNN_CONVOLUTION_BWD_DATA_ALGO_0, CUDNN_FMA_MATH, CUDNN_NON_DETERMINISTIC, 0),
                                                     perf(CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT, CUDNN_FMA_MATH, CUDNN_DETERMINISTIC, 3 << 20),
                                                     perf(CUDNN_CONVOLUTION_BWD_DATA_ALGO_1, CUDNN_FMA_MATH, CUDNN_DETERMINISTIC, 0)};
  const int coarse = winograd_nonfused(found);
  CHECK(coarse == CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED);
  CHECK(conv_pick(found, 4, CUDNN_FMA_MATH, true, size_t(8) << 20, false, -1) == CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED);
  CHECK(conv_pick(found, 4, CUDNN_FMA_MATH, true, size_t(8) << 20, false, coarse) == CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT);
  CHECK(conv_pick(found, 4, CUDNN_FMA_MATH, true, size_t(1) << 20, false, coarse) == CUDNN_CONVOLUTION_BWD_DATA_ALGO_1);  // FFT's scratch too large
  CHECK(conv_pick(found, 4, CUDNN_FMA_MATH, false, 0, false, coarse) == CUDNN_CONVOLUTION_BWD_DATA_ALGO_0);  // heuristics: first in the math type
  CHECK(conv_pick(found, 4, CUDNN_FMA_MATH, false, 0, true, coarse) == CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT);
  // No algorithm in the math type asked for: the fallbacks skip it too.
  CHECK(conv_pick(found, 1, CUDNN_DEFAULT_MATH, false, 0, false, coarse) == -1);
  CHECK(conv_pick(found, 2, CUDNN_DEFAULT_MATH, false, 0, false, coarse) == CUDNN_CONVOLUTION_BWD_DATA_ALGO_0);
  const cudnnConvolutionFwdAlgoPerf_t* fwd = nullptr;
  const cudnnConvolutionBwdFilterAlgoPerf_t* filter = nullptr;
  CHECK(winograd_nonfused(fwd) == CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED);
  CHECK(winograd_nonfused(filter) == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED);
}

TEST_CASE("cuda: with set_cuda_conv_search(true) conv2d and its gradients run timed algorithms, match the CPU and repeat bit for bit") {
  struct SearchOn {
    SearchOn() { set_cuda_conv_search(true); }
    ~SearchOn() { set_cuda_conv_search(false); }
  } on;
  CHECK(cuda_conv_search());
  struct Case { Shape x, f; std::vector<int32_t> s, p; int g; };
  for (const Case& k : {Case{{16, 20, 12, 12}, {50, 20, 5, 5}, {1, 1}, {0, 0}, 1}, Case{{8, 32, 14, 14}, {32, 8, 3, 3}, {1, 1}, {1, 1}, 4}}) {
    const std::string what = k.x.str() + " * " + k.f.str();
    const Tensor x = random_tensor<float>(k.x, -1, 1, 191), f = random_tensor<float>(k.f, -1, 1, 192);
    OpTest fwd("conv2d");
    fwd.input("Input", x).input("Filter", f).attr("strides", k.s).attr("paddings", k.p).attr("groups", int32_t(k.g));
    // A search may keep FFT or (3x3) Winograd, whose error follows the output's scale rather than each element's.
    compare_on_cuda_scaled(fwd, fwd, "searched conv2d " + what, 2e-4);
    const LoDTensor y = fwd.run().at("Output");
    OpTest g("conv2d_grad");
    g.skip_inferred_check();
    g.input("Input", x).input("Filter", f).input("Output@GRAD", random_tensor<float>(y.shape(), -1, 1, 193));
    g.attr("strides", k.s).attr("paddings", k.p).attr("groups", int32_t(k.g));
    compare_on_cuda_scaled(g, g, "searched conv2d_grad " + what, 2e-4);
    if (!have_device()) continue;
    for (const OpTest* t : {&fwd, &g}) {  // the kept algorithms are deterministic: a second run gives the same bits
      const auto a = t->run(cuda(0)), b = t->run(cuda(0));
      for (auto& [slot, v] : a) {
        CAPTURE(slot);
        REQUIRE(v.bytes() == b.at(slot).bytes());
        CHECK(std::memcmp(v.raw(), b.at(slot).raw(), v.bytes()) == 0);
      }
    }
  }
}

TEST_CASE_TEMPLATE("cuda: conv2d_transpose (cuDNN) with strides, padding, dilation, groups and output_size, and its gradients, match the CPU", T,
                   float, double) {
  struct Case { Shape x, f; std::vector<int32_t> s, p, d, os; int g; };
  for (const Case& k : {Case{{4, 8, 7, 7}, {8, 3, 4, 4}, {2, 2}, {1, 1}, {1, 1}, {}, 1}, Case{{2, 6, 5, 6}, {6, 2, 3, 3}, {2, 1}, {1, 0}, {1, 2}, {}, 3},
                        Case{{3, 4, 4, 4}, {4, 5, 3, 3}, {2, 2}, {0, 0}, {1, 1}, {10, 9}, 1}, Case{{2, 3, 6, 6}, {3, 4, 1, 1}, {1, 1}, {0, 0}, {1, 1}, {}, 1}}) {
    const std::string what = k.x.str() + " *T " + k.f.str();
    Tensor x = random_tensor<T>(k.x, -1, 1, 191), f = random_tensor<T>(k.f, -1, 1, 192);
    OpTest fwd("conv2d_transpose");
    fwd.input("Input", x).input("Filter", f).attr("strides", k.s).attr("paddings", k.p).attr("dilations", k.d).attr("groups", int32_t(k.g));
    fwd.attr("output_size", k.os);
    const double t = std::is_same_v<T, double> ? 1e-11 : 1e-4;
    compare_on_cuda(fwd, "conv2d_transpose " + what, t, t);
    const LoDTensor y = fwd.run().at("Output");
    OpTest g("conv2d_transpose_grad");
    g.skip_inferred_check();
    g.input("Input", x).input("Filter", f).input("Output@GRAD", random_tensor<T>(y.shape(), -1, 1, 193));
    g.attr("strides", k.s).attr("paddings", k.p).attr("dilations", k.d).attr("groups", int32_t(k.g)).attr("output_size", k.os);
    compare_on_cuda(g, "conv2d_transpose_grad " + what, 10 * t, 10 * t);
  }
}

TEST_CASE_TEMPLATE("cuda: pool2d (cuDNN) max and avg, exclusive or not, global, and its gradient, match the CPU", T, float, double) {
  Tensor x = random_tensor<T>({2, 3, 9, 8}, -1, 1, 95);
  struct Case { std::string type; std::vector<int32_t> k, s, p; bool exclusive, global; };
  for (const Case& k : {Case{"max", {2, 2}, {2, 2}, {0, 0}, true, false}, Case{"max", {3, 3}, {2, 2}, {1, 1}, true, false},
                        Case{"avg", {3, 3}, {2, 2}, {1, 1}, true, false}, Case{"avg", {3, 3}, {2, 2}, {1, 1}, false, false},
                        Case{"avg", {1, 1}, {1, 1}, {0, 0}, true, true}, Case{"max", {1, 1}, {1, 1}, {0, 0}, true, true}}) {
    const std::string what = k.type + (k.global ? " global" : "") + (k.exclusive ? "" : " inclusive") + " k" + std::to_string(k.k[0]);
    OpTest f("pool2d");
    f.input("X", x).attr("pooling_type", k.type).attr("ksize", k.k).attr("strides", k.s).attr("paddings", k.p).attr("exclusive", k.exclusive);
    f.attr("global_pooling", k.global);
    compare_on_cuda(f, "pool2d " + what, tol<T>(), tol<T>());
    const LoDTensor y = f.run().at("Out");
    OpTest g("pool2d_grad");
    g.skip_inferred_check();
    g.input("X", x).input("Out", y).input("Out@GRAD", random_tensor<T>(y.shape(), -1, 1, 96));
    g.attr("pooling_type", k.type).attr("ksize", k.k).attr("strides", k.s).attr("paddings", k.p).attr("exclusive", k.exclusive);
    g.attr("global_pooling", k.global);
    compare_on_cuda(g, "pool2d_grad " + what, tol<T>(), tol<T>());
  }
}

TEST_CASE_TEMPLATE("cuda: batch_norm in training and with global statistics, and its gradient, match the CPU", T, float, double) {
  for (const Shape& xs : {Shape{8, 5, 6, 7}, Shape{16, 10}}) {
    const int64_t ch = xs[1];
    Tensor x = random_tensor<T>(xs, 2, 5, 97);  // a large mean: the two-pass variance
    Tensor scale = random_tensor<T>({ch}, 0.5, 1.5, 98), bias = random_tensor<T>({ch}, -1, 1, 99);
    Tensor mean = random_tensor<T>({ch}, -1, 1, 100), var = random_tensor<T>({ch}, 0.5, 2, 101);
    for (bool global : {false, true}) {
      const std::string what = xs.str() + (global ? " global" : " batch");
      OpTest f("batch_norm");
      f.input("X", x).input("Scale", scale).input("Bias", bias).input("Mean", mean).input("Variance", var);
      f.attr("momentum", 0.9f).attr("epsilon", 1e-5f).attr("use_global_stats", global);
      compare_on_cuda(f, "batch_norm " + what, 10 * tol<T>(), 10 * tol<T>());
      const auto out = f.run();
      OpTest g("batch_norm_grad");
      g.skip_inferred_check();
      g.input("X", x).input("Scale", scale).input("SavedMean", out.at("SavedMean")).input("SavedVariance", out.at("SavedVariance"));
      g.input("Y@GRAD", random_tensor<T>(xs, -1, 1, 102)).attr("epsilon", 1e-5f).attr("use_global_stats", global);
      compare_on_cuda(g, "batch_norm_grad " + what, 10 * tol<T>(), 10 * tol<T>());
    }
  }
}

TEST_CASE("cuda: fill_zeros_like, cast, transpose, the shape ops, assign, concat, split and stack match the CPU") {
  Tensor x = random_tensor<float>({3, 4, 5}, -2, 2, 111);
  OpTest z("fill_zeros_like");
  z.input("X", x);
  compare_on_cuda(z, "fill_zeros_like", 0, 0);
  for (auto [from, to] : {std::pair{f32, i64}, std::pair{f32, boolean}, std::pair{f32, f64}, std::pair{i64, f32}, std::pair{f32, f32}}) {
    OpTest t("cast");
    t.input("X", from == i64 ? random_tensor<int64_t>({7, 3}, -9, 9, 112) : random_tensor<float>({7, 3}, -3, 3, 113));
    t.attr("in_dtype", int32_t(from)).attr("out_dtype", int32_t(to));
    compare_on_cuda(t, std::string("cast ") + std::string(name(from)) + " -> " + std::string(name(to)), 0, 0);
  }
  for (const std::vector<int32_t>& perm : {std::vector<int32_t>{2, 0, 1}, std::vector<int32_t>{1, 0, 2}, std::vector<int32_t>{0, 1, 2}}) {
    OpTest t("transpose");
    t.input("X", x).attr("axis", perm);
    compare_on_cuda(t, "transpose", 0, 0);
    OpTest g("transpose_grad");
    g.skip_inferred_check();
    g.input("X", x).input("Out@GRAD", t.run().at("Out")).attr("axis", perm);
    compare_on_cuda(g, "transpose_grad", 0, 0);
  }
  OpTest r("reshape");
  r.input("X", x).attr("shape", std::vector<int32_t>{-1, 10});
  compare_on_cuda(r, "reshape", 0, 0);
  OpTest a("assign");
  a.input("X", x);
  compare_on_cuda(a, "assign", 0, 0);
  Tensor y = random_tensor<float>({3, 2, 5}, -2, 2, 114);
  for (int axis : {0, 1, 2}) {
    OpTest cc("concat");
    cc.inputs("X", {x, axis == 1 ? y : x}).attr("axis", int32_t(axis));
    compare_on_cuda(cc, "concat axis " + std::to_string(axis), 0, 0);
    OpTest sp("split");
    sp.input("X", x).attr("axis", int32_t(axis)).attr("num", int32_t(axis == 1 ? 2 : 1)).outputs("Out", axis == 1 ? 2 : 1);
    compare_on_cuda(sp, "split axis " + std::to_string(axis), 0, 0);
  }
  OpTest st("stack");
  st.inputs("X", {x, x, x}).attr("axis", int32_t(1));
  compare_on_cuda(st, "stack", 0, 0);
}

TEST_CASE_TEMPLATE("cuda: matmul (cuBLAS, batched, transposed, broadcast) and its gradients match the CPU", T, float, double) {
  struct Case { Shape x, y; bool tx, ty; };
  for (const Case& k : {Case{{5, 7}, {7, 3}, false, false}, Case{{4, 5, 7}, {4, 7, 3}, false, false}, Case{{4, 7, 5}, {3, 7}, true, true},
                        Case{{4, 5, 7}, {7, 3}, false, false}, Case{{7}, {2, 7, 3}, false, false}, Case{{6, 7}, {7}, false, false}}) {
    const std::string what = k.x.str() + (k.tx ? "^T" : "") + " x " + k.y.str() + (k.ty ? "^T" : "");
    Tensor x = random_tensor<T>(k.x, -1, 1, 121), y = random_tensor<T>(k.y, -1, 1, 122);
    OpTest f("matmul");
    f.input("X", x).input("Y", y).attr("transpose_X", k.tx).attr("transpose_Y", k.ty).attr("alpha", 1.5f);
    compare_on_cuda(f, "matmul " + what, 10 * tol<T>(), 10 * tol<T>());
    const LoDTensor out = f.run().at("Out");
    OpTest g("matmul_grad");
    g.skip_inferred_check();
    g.input("X", x).input("Y", y).input("Out@GRAD", random_tensor<T>(out.shape(), -1, 1, 123));
    g.attr("transpose_X", k.tx).attr("transpose_Y", k.ty).attr("alpha", 1.5f);
    compare_on_cuda(g, "matmul_grad " + what, 10 * tol<T>(), 10 * tol<T>());
  }
}

TEST_CASE_TEMPLATE("cuda: softmax_with_cross_entropy (hard, soft, ignore_index) and its gradient match the CPU", T, float, double) {
  for (int64_t d : {10, 1000}) {
    const int64_t n = 33;
    Tensor logits = random_tensor<T>({n, d}, -4, 4, 131);
    Tensor label = random_tensor<int64_t>({n, 1}, 0, d, 132);
    label.data<int64_t>()[2] = -100;
    Tensor soft = random_tensor<T>({n, d}, 0, 1, 133);
    for (bool is_soft : {false, true}) {
      const std::string what = std::string(is_soft ? "soft" : "hard") + " d " + std::to_string(d);
      OpTest f("softmax_with_cross_entropy");
      f.input("Logits", logits).input("Label", is_soft ? soft : label).attr("soft_label", is_soft).attr("ignore_index", int32_t(-100));
      compare_on_cuda(f, "softmax_with_cross_entropy " + what, 10 * tol<T>(), 10 * tol<T>());
      OpTest g("softmax_with_cross_entropy_grad");
      g.skip_inferred_check();
      g.input("Softmax", f.run().at("Softmax")).input("Label", is_soft ? soft : label).input("Loss@GRAD", random_tensor<T>({n, 1}, -1, 1, 134));
      g.attr("soft_label", is_soft).attr("ignore_index", int32_t(-100));
      compare_on_cuda(g, "softmax_with_cross_entropy_grad " + what, 10 * tol<T>(), 10 * tol<T>());
    }
  }
}

TEST_CASE_TEMPLATE("cuda: dropout draws the CPU's mask for a seed; test mode and the gradient match the CPU", T, float, double) {
  Tensor x = random_tensor<T>({50, 40}, -1, 1, 141);
  for (const char* impl : {"downgrade_in_infer", "upscale_in_train"})
    for (bool test : {false, true}) {
      const std::string what = std::string(impl) + (test ? " test" : " train");
      OpTest f("dropout");
      f.input("X", x).attr("dropout_prob", 0.3f).attr("fix_seed", true).attr("seed", int32_t(17)).attr("is_test", test);
      f.attr("dropout_implementation", std::string(impl));
      compare_on_cuda(f, "dropout " + what, tol<T>(), tol<T>());
      OpTest g("dropout_grad");
      g.skip_inferred_check();
      g.input("Mask", f.run().at("Mask")).input("Out@GRAD", random_tensor<T>({50, 40}, -1, 1, 142)).attr("dropout_prob", 0.3f).attr("is_test", test);
      g.attr("dropout_implementation", std::string(impl));
      compare_on_cuda(g, "dropout_grad " + what, tol<T>(), tol<T>());
    }
}

TEST_CASE_TEMPLATE("cuda: reduce_sum / mean / max / min over any dims, and their gradients, match the CPU", T, float, double) {
  Tensor x = random_tensor<T>({4, 1, 6, 5}, -3, 3, 151);
  struct Case { std::vector<int32_t> dim; bool all, keep; };
  for (const Case& k : {Case{{-1}, false, false}, Case{{0}, false, true}, Case{{0, 2}, false, false}, Case{{1, 3}, false, false}, Case{{}, true, false}})
    for (const char* op : {"reduce_sum", "reduce_mean", "reduce_max", "reduce_min"}) {
      std::string what = std::string(op) + (k.all ? " all" : " dims");
      for (int d : k.dim) what += " " + std::to_string(d);
      OpTest f(op);
      f.input("X", x).attr("dim", k.dim).attr("reduce_all", k.all).attr("keep_dim", k.keep);
      compare_on_cuda(f, what, 10 * tol<T>(), 10 * tol<T>());
      const LoDTensor out = f.run().at("Out");
      OpTest g(std::string(op) + "_grad");
      g.skip_inferred_check();
      g.input("X", x).input("Out@GRAD", random_tensor<T>(out.shape(), -1, 1, 152));
      if (std::string(op) == "reduce_max" || std::string(op) == "reduce_min") g.input("Out", out);  // only their grads read Out
      g.attr("dim", k.dim).attr("reduce_all", k.all).attr("keep_dim", k.keep);
      compare_on_cuda(g, what + " grad", tol<T>(), tol<T>());
    }
  OpTest i("reduce_sum");
  i.input("X", random_tensor<int64_t>({7, 9}, -50, 50, 153)).attr("dim", std::vector<int32_t>{1});
  compare_on_cuda(i, "reduce_sum i64", 0, 0);
}

TEST_CASE("cuda: arg_max and arg_min along any axis (ties, NaN) match the CPU") {
  Tensor x = random_tensor<float>({4, 6, 5}, -2, 2, 161);
  x.data<float>()[3] = x.data<float>()[8];               // a tie along axis 1
  x.data<float>()[17] = std::numeric_limits<float>::quiet_NaN();
  for (const char* op : {"arg_max", "arg_min"})
    for (int64_t axis : {0, 1, -1})
      for (bool keep : {false, true}) {
        OpTest t(op);
        t.input("X", x).attr("axis", axis).attr("keepdims", keep);
        compare_on_cuda(t, std::string(op) + " axis " + std::to_string(axis), 0, 0);
      }
  OpTest i("arg_max");
  i.input("X", random_tensor<int32_t>({9, 4}, -5, 5, 162)).attr("axis", int64_t(1));
  compare_on_cuda(i, "arg_max i32", 0, 0);
}

TEST_CASE_TEMPLATE("cuda: lookup_table (padding_idx, repeated ids) and its dense gradient match the CPU exactly", T, float, double) {
  Tensor w = random_tensor<T>({20, 7}, -1, 1, 171);
  Tensor ids = Tensor::from<int64_t>({3, 0, 19, 3, 5, 3, 12, 5}, {8, 1});
  for (int64_t pad : {int64_t(-1), int64_t(5)}) {
    OpTest f("lookup_table");
    f.input("W", w).input("Ids", ids).attr("padding_idx", pad);
    compare_on_cuda(f, "lookup_table pad " + std::to_string(pad), 0, 0);
    OpTest g("lookup_table_grad");
    g.skip_inferred_check();
    g.input("W", w).input("Ids", ids).input("Out@GRAD", random_tensor<T>({8, 7}, -1, 1, 172)).attr("padding_idx", pad);
    compare_on_cuda(g, "lookup_table_grad pad " + std::to_string(pad), 0, 0);  // the CPU's summation order
  }
}

TEST_CASE("cuda: slice on one or several axes (negative bounds, ranks 1 to 4) and its gradient match the CPU") {
  struct Case { Shape x; std::vector<int32_t> axes, starts, ends; };
  for (const Case& k : {Case{{10}, {0}, {2}, {7}}, Case{{6, 8}, {1}, {3}, {-1}}, Case{{5, 6, 7}, {0, 2}, {1, 2}, {4, 6}},
                        Case{{3, 4, 5, 6}, {1, 3}, {1, 0}, {3, 4}}, Case{{4, 5}, {0}, {0}, {4}}}) {
    Tensor x = random_tensor<float>(k.x, -1, 1, 181);
    OpTest f("slice");
    f.input("Input", x).attr("axes", k.axes).attr("starts", k.starts).attr("ends", k.ends);
    compare_on_cuda(f, "slice " + k.x.str(), 0, 0);
    OpTest g("slice_grad");
    g.skip_inferred_check();
    g.input("Input", x).input("Out@GRAD", f.run().at("Out")).attr("axes", k.axes).attr("starts", k.starts).attr("ends", k.ends);
    compare_on_cuda(g, "slice_grad " + k.x.str(), 0, 0);
  }
}

TEST_CASE_TEMPLATE("cuda: gather (i32 and i64 indices, repeated rows) and its gradient match the CPU exactly", T, float, double) {
  Tensor x = random_tensor<T>({9, 3, 4}, -1, 1, 191);
  for (bool i32 : {false, true}) {
    Tensor idx = i32 ? Tensor::from<int32_t>({8, 0, 3, 3, 5}, {5}) : Tensor::from<int64_t>({8, 0, 3, 3, 5}, {5});
    OpTest f("gather");
    f.input("X", x).input("Index", idx);
    compare_on_cuda(f, i32 ? "gather i32" : "gather i64", 0, 0);
    OpTest g("gather_grad");
    g.skip_inferred_check();
    g.input("X", x).input("Index", idx).input("Out@GRAD", random_tensor<T>({5, 3, 4}, -1, 1, 192));
    compare_on_cuda(g, i32 ? "gather_grad i32" : "gather_grad i64", 0, 0);
  }
}
