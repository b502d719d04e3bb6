// tests/cuda/rnn.cpp: the CUDA kernels of kernels/cuda/rnn.cu against the CPU kernels of lstm, gru, lstm_unit and
// gru_unit and their gradients, f32 and f64: a ragged LoD (unsorted, an empty and a length-1 sequence, one of 35
// steps: longer than a warp), is_reverse, with and without H0 / C0 / Bias, peepholes, each activation in each
// place, every gradient output (and some left unwanted). Every output is compared, the intermediates (BatchGate,
// BatchCellPreAct, ...) too, since the grad kernels read them. The grad ops run on the CPU forward's outputs, so
// both places differentiate the same values.
// Tolerances: f64 1e-11 (the device's exp / tanh and the column sums' order differ from the CPU's by ulps, which
// 35 recurrent steps compound); f32 1e-4 for the forward and 1e-3 for the gradients: the CPU's f32 activations use
// a polynomial exp (kernels/cpu/rnn_batch.hpp, ~1e-7 relative) against CUDA's expf / tanhf, compounded through the
// recurrence, and the gradients add sums over every row.
#include <doctest/doctest.h>

#include "cuda/compare.hpp"

using namespace oar;
using namespace oar::test;
using namespace oar::test::cuda_check;

namespace {

// 6 sequences, unsorted by length: 3, 1, empty, 35 (longer than a warp), 5, 2 steps.
const LoD kLong{{0, 3, 4, 4, 39, 44, 46}};
constexpr int64_t kLongRows = 46, kLongSeqs = 6;
// For the activations under which values can grow step by step (identity or relu gates, gru's tanh gates with a
// relu candidate): 2, 1, 4 steps, so that they stay small and f32's relative error with them.
const LoD kShort{{0, 2, 3, 7}};
constexpr int64_t kShortRows = 7, kShortSeqs = 3;
constexpr int64_t kD = 5;  // not a multiple of anything the kernels use

template <class T> constexpr double fwd_tol() { return std::is_same_v<T, double> ? 1e-11 : 1e-4; }
template <class T> constexpr double grad_tol() { return std::is_same_v<T, double> ? 1e-11 : 1e-3; }

struct RnnCase {
  bool long_lod = true, peep = false, reverse = false, bias = true, h0 = false, c0 = false;
  bool cell_grad = true;  ///< false: Cell@GRAD all zeros
  bool all_grads = true;  ///< false: only Weight@GRAD and Hidden-side gradients wanted (Input@GRAD left out)
  std::string gate = "sigmoid", cell = "tanh", cand = "tanh";
};

std::string describe(const RnnCase& k) {
  return fmt::format("lod={} peep={} reverse={} bias={} h0={} c0={} cell_grad={} all_grads={} gate={} cell={} cand={}", k.long_lod ? "long" : "short",
                     k.peep, k.reverse, k.bias, k.h0, k.c0, k.cell_grad, k.all_grads, k.gate, k.cell, k.cand);
}

/// Declares each grad output slot the case does not want (or that has no input) with no variable.
void leave_out(OpTest& g, bool want, const char* slot) {
  if (!want) g.outputs(slot, 0);
}

}  // namespace

TEST_CASE_TEMPLATE("cuda: lstm and lstm_grad match the CPU (peepholes, is_reverse, H0 / C0, every activation)", T, float, double) {
  const RnnCase cases[] = {
      {.peep = true},
      {.peep = false, .reverse = true, .h0 = true, .c0 = true},
      {.peep = true, .reverse = true, .h0 = true, .cell_grad = false},
      {.peep = false, .bias = false, .c0 = true, .all_grads = false},
      {.peep = true, .h0 = true, .c0 = true, .gate = "sigmoid", .cell = "relu", .cand = "identity"},
      {.peep = true, .reverse = true, .c0 = true, .gate = "tanh", .cell = "identity", .cand = "relu"},
      {.long_lod = false, .peep = true, .h0 = true, .c0 = true, .gate = "identity", .cell = "sigmoid", .cand = "sigmoid"},
      {.long_lod = false, .peep = false, .reverse = true, .gate = "relu", .cell = "tanh", .cand = "tanh"},
  };
  uint64_t seed = 500;
  for (const RnnCase& k : cases) {
    const std::string what = "lstm " + describe(k);
    const LoD& lod = k.long_lod ? kLong : kShort;
    const int64_t rows = k.long_lod ? kLongRows : kShortRows, seqs = k.long_lod ? kLongSeqs : kShortSeqs;
    const double scale = k.long_lod ? 1.0 : 0.5;
    const Tensor x = random_tensor<T>({rows, 4 * kD}, -scale, scale, ++seed);
    const Tensor w = random_tensor<T>({kD, 4 * kD}, -0.5, 0.5, ++seed);
    const Tensor b = random_tensor<T>({1, (k.peep ? 7 : 4) * kD}, -0.5, 0.5, ++seed);
    const Tensor h0 = random_tensor<T>({seqs, kD}, -1, 1, ++seed);
    const Tensor c0 = random_tensor<T>({seqs, kD}, -1, 1, ++seed);
    auto attrs = [&](OpTest& t) {
      t.attr("use_peepholes", k.peep).attr("is_reverse", k.reverse);
      t.attr("gate_activation", k.gate).attr("cell_activation", k.cell).attr("candidate_activation", k.cand);
    };
    OpTest f("lstm");
    f.input("Input", LoDTensor(x, lod)).input("Weight", LoDTensor(w));
    if (k.bias) f.input("Bias", LoDTensor(b));
    if (k.h0) f.input("H0", LoDTensor(h0));
    if (k.c0) f.input("C0", LoDTensor(c0));
    attrs(f);
    compare_on_cuda(f, what, fwd_tol<T>(), fwd_tol<T>());

    const auto fwd = f.run();
    OpTest g("lstm_grad");
    g.skip_inferred_check();
    g.input("Weight", LoDTensor(w));
    if (k.bias) g.input("Bias", LoDTensor(b));
    if (k.h0) g.input("H0", LoDTensor(h0));
    if (k.c0) g.input("C0", LoDTensor(c0));
    g.input("Hidden", fwd.at("Hidden")).input("BatchGate", fwd.at("BatchGate")).input("BatchCellPreAct", fwd.at("BatchCellPreAct"));
    g.input("Hidden@GRAD", random_tensor<T>({rows, kD}, -1, 1, ++seed));
    // The grad op requires Cell@GRAD: zeros stand for a loss on Hidden alone.
    g.input("Cell@GRAD", k.cell_grad ? random_tensor<T>({rows, kD}, -1, 1, ++seed) : Tensor::from<T>(std::vector<T>(size_t(rows * kD)), {rows, kD}));
    leave_out(g, k.all_grads, "Input@GRAD");
    leave_out(g, k.bias, "Bias@GRAD");
    leave_out(g, k.h0, "H0@GRAD");
    leave_out(g, k.c0, "C0@GRAD");
    attrs(g);
    compare_on_cuda(g, what + " grad", grad_tol<T>(), grad_tol<T>());
  }
}

TEST_CASE_TEMPLATE("cuda: gru and gru_grad match the CPU (is_reverse, H0, Bias, every activation)", T, float, double) {
  const RnnCase cases[] = {
      {},
      {.reverse = true, .bias = false, .h0 = true},
      {.long_lod = false, .h0 = true, .all_grads = false, .gate = "tanh", .cand = "relu"},
      {.reverse = true, .gate = "sigmoid", .cand = "identity"},
      {.long_lod = false, .h0 = true, .gate = "identity", .cand = "sigmoid"},
      {.long_lod = false, .reverse = true, .gate = "relu", .cand = "tanh"},
  };
  uint64_t seed = 700;
  for (const RnnCase& k : cases) {
    const std::string what = "gru " + describe(k);
    const LoD& lod = k.long_lod ? kLong : kShort;
    const int64_t rows = k.long_lod ? kLongRows : kShortRows, seqs = k.long_lod ? kLongSeqs : kShortSeqs;
    const double scale = k.long_lod ? 1.0 : 0.5;
    const Tensor x = random_tensor<T>({rows, 3 * kD}, -scale, scale, ++seed);
    const Tensor w = random_tensor<T>({kD, 3 * kD}, -0.5, 0.5, ++seed);
    const Tensor b = random_tensor<T>({1, 3 * kD}, -0.5, 0.5, ++seed);
    const Tensor h0 = random_tensor<T>({seqs, kD}, -1, 1, ++seed);
    auto attrs = [&](OpTest& t) { t.attr("is_reverse", k.reverse).attr("gate_activation", k.gate).attr("activation", k.cand); };
    OpTest f("gru");
    f.input("Input", LoDTensor(x, lod)).input("Weight", LoDTensor(w));
    if (k.bias) f.input("Bias", LoDTensor(b));
    if (k.h0) f.input("H0", LoDTensor(h0));
    attrs(f);
    compare_on_cuda(f, what, fwd_tol<T>(), fwd_tol<T>());

    const auto fwd = f.run();
    OpTest g("gru_grad");
    g.skip_inferred_check();
    g.input("Weight", LoDTensor(w));
    if (k.h0) g.input("H0", LoDTensor(h0));
    g.input("Hidden", fwd.at("Hidden")).input("BatchGate", fwd.at("BatchGate")).input("BatchResetHiddenPrev", fwd.at("BatchResetHiddenPrev"));
    g.input("BatchHidden", fwd.at("BatchHidden")).input("Hidden@GRAD", random_tensor<T>({rows, kD}, -1, 1, ++seed));
    leave_out(g, k.all_grads, "Input@GRAD");
    leave_out(g, k.bias, "Bias@GRAD");
    leave_out(g, k.h0, "H0@GRAD");
    attrs(g);
    compare_on_cuda(g, what + " grad", grad_tol<T>(), grad_tol<T>());
  }
}

TEST_CASE("cuda: lstm and gru with every sequence empty, and their gradients") {
  const LoD empty{{0, 0, 0}};
  const Tensor w4 = random_tensor<double>({kD, 4 * kD}, -0.5, 0.5, 1), w3 = random_tensor<double>({kD, 3 * kD}, -0.5, 0.5, 2);
  const Tensor b4 = random_tensor<double>({1, 7 * kD}, -0.5, 0.5, 3), b3 = random_tensor<double>({1, 3 * kD}, -0.5, 0.5, 4);
  const Tensor h0 = random_tensor<double>({2, kD}, -1, 1, 5), none = random_tensor<double>({0, kD});
  OpTest f("lstm");
  f.input("Input", LoDTensor(random_tensor<double>({0, 4 * kD}), empty)).input("Weight", LoDTensor(w4)).input("Bias", LoDTensor(b4));
  f.input("H0", LoDTensor(h0)).input("C0", LoDTensor(h0));
  compare_on_cuda(f, "lstm, empty", 0, 0);
  const auto fl = f.run();
  OpTest gl("lstm_grad");
  gl.skip_inferred_check();
  gl.input("Weight", LoDTensor(w4)).input("Bias", LoDTensor(b4)).input("H0", LoDTensor(h0)).input("C0", LoDTensor(h0));
  gl.input("Hidden", fl.at("Hidden")).input("BatchGate", fl.at("BatchGate")).input("BatchCellPreAct", fl.at("BatchCellPreAct"));
  gl.input("Hidden@GRAD", LoDTensor(none)).input("Cell@GRAD", LoDTensor(none));
  compare_on_cuda(gl, "lstm_grad, empty: zero Weight, Bias, H0 and C0 gradients", 0, 0);

  OpTest fg("gru");
  fg.input("Input", LoDTensor(random_tensor<double>({0, 3 * kD}), empty)).input("Weight", LoDTensor(w3)).input("Bias", LoDTensor(b3)).input("H0", LoDTensor(h0));
  compare_on_cuda(fg, "gru, empty", 0, 0);
  const auto fgo = fg.run();
  OpTest gg("gru_grad");
  gg.skip_inferred_check();
  gg.input("Weight", LoDTensor(w3)).input("H0", LoDTensor(h0)).input("Hidden", fgo.at("Hidden")).input("BatchGate", fgo.at("BatchGate"));
  gg.input("BatchResetHiddenPrev", fgo.at("BatchResetHiddenPrev")).input("BatchHidden", fgo.at("BatchHidden")).input("Hidden@GRAD", LoDTensor(none));
  compare_on_cuda(gg, "gru_grad, empty: zero Weight, Bias and H0 gradients", 0, 0);
}

TEST_CASE_TEMPLATE("cuda: lstm_unit and lstm_unit_grad match the CPU", T, float, double) {
  const int64_t n = 37;
  const Tensor x = random_tensor<T>({n, 4 * kD}, -2, 2, 81), cp = random_tensor<T>({n, kD}, -1, 1, 82);
  for (const float fb : {0.0f, 0.75f}) {
    const std::string what = fmt::format("lstm_unit forget_bias={}", fb);
    OpTest f("lstm_unit");
    f.input("X", LoDTensor(x)).input("C_prev", LoDTensor(cp)).attr("forget_bias", fb);
    compare_on_cuda(f, what, fwd_tol<T>(), fwd_tol<T>());
    const auto fwd = f.run();
    for (const bool dx : {true, false}) {
      OpTest g("lstm_unit_grad");
      g.skip_inferred_check();
      g.input("X", LoDTensor(x)).input("C_prev", LoDTensor(cp)).input("C", fwd.at("C")).attr("forget_bias", fb);
      g.input("C@GRAD", random_tensor<T>({n, kD}, -1, 1, 83)).input("H@GRAD", random_tensor<T>({n, kD}, -1, 1, 84));
      leave_out(g, dx, "X@GRAD");
      compare_on_cuda(g, what + (dx ? " grad" : " grad without X@GRAD"), grad_tol<T>(), grad_tol<T>());
    }
  }
}

TEST_CASE_TEMPLATE("cuda: gru_unit and gru_unit_grad match the CPU (with and without Bias, every activation)", T, float, double) {
  const int64_t n = 37;
  struct Case {
    bool bias, input_grad;
    int32_t gate, cand;
  };
  const Case cases[] = {{true, true, 1, 2}, {false, false, 2, 3}, {true, true, 3, 0}, {false, true, 0, 1}};
  uint64_t seed = 900;
  for (const Case& k : cases) {
    const std::string what = fmt::format("gru_unit bias={} input_grad={} gate={} activation={}", k.bias, k.input_grad, k.gate, k.cand);
    const Tensor x = random_tensor<T>({n, 3 * kD}, -1, 1, ++seed), hp = random_tensor<T>({n, kD}, -1, 1, ++seed);
    const Tensor w = random_tensor<T>({kD, 3 * kD}, -0.5, 0.5, ++seed), b = random_tensor<T>({1, 3 * kD}, -0.5, 0.5, ++seed);
    OpTest f("gru_unit");
    f.input("Input", LoDTensor(x)).input("HiddenPrev", LoDTensor(hp)).input("Weight", LoDTensor(w));
    if (k.bias) f.input("Bias", LoDTensor(b));
    f.attr("gate_activation", k.gate).attr("activation", k.cand);
    compare_on_cuda(f, what, fwd_tol<T>(), fwd_tol<T>());
    const auto fwd = f.run();
    OpTest g("gru_unit_grad");
    g.skip_inferred_check();
    g.input("HiddenPrev", LoDTensor(hp)).input("Weight", LoDTensor(w)).input("Gate", fwd.at("Gate")).input("ResetHiddenPrev", fwd.at("ResetHiddenPrev"));
    g.input("Hidden@GRAD", random_tensor<T>({n, kD}, -1, 1, ++seed)).attr("gate_activation", k.gate).attr("activation", k.cand);
    leave_out(g, k.input_grad, "Input@GRAD");
    leave_out(g, k.bias, "Bias@GRAD");
    compare_on_cuda(g, what + " grad", grad_tol<T>(), grad_tol<T>());
  }
}

TEST_CASE("cuda: lstm's and gru's CUDA kernels refuse what the CPU kernels refuse, with the same message") {
  if (!have_device()) {
    ++g_skipped;
    return;
  }
  const Tensor w4 = random_tensor<double>({kD, 4 * kD}), w3 = random_tensor<double>({kD, 3 * kD});
  const Tensor bad_h0 = random_tensor<double>({kLongSeqs + 1, kD});
  OpTest f("lstm");
  f.input("Input", LoDTensor(random_tensor<double>({kLongRows, 4 * kD}), kLong)).input("Weight", LoDTensor(w4)).input("H0", LoDTensor(bad_h0));
  f.attr("use_peepholes", false);
  const std::string on_cpu = error_of([&] { f.run(cpu()); }), on_cuda = error_of([&] { f.run(cuda(0)); });
  CHECK(on_cpu.find("H0 / C0 must be [S, D]") != std::string::npos);
  CHECK(on_cuda == on_cpu);
  OpTest g("gru");
  g.input("Input", LoDTensor(random_tensor<double>({kLongRows, 3 * kD}), kLong)).input("Weight", LoDTensor(w3)).input("H0", LoDTensor(bad_h0));
  const std::string g_cpu = error_of([&] { g.run(cpu()); }), g_cuda = error_of([&] { g.run(cuda(0)); });
  CHECK(g_cpu.find("H0 must be [S, D]") != std::string::npos);
  CHECK(g_cuda == g_cpu);
}
