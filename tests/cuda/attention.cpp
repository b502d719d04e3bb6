// tests/cuda/attention.cpp: scaled_dot_product_attention (forward and gradient), add_position_encoding and
// rotary_position_embedding on a GPU against the CPU kernels (tests/ops/attention.cpp and position.cpp check
// the CPU against plain references): dense and ragged input, causal, masks, dropout at a fixed seed (both places
// draw the same counter stream). The GPU's sums run in another order (and dK, dV through atomics): f64 to 1e-10.
#include <doctest/doctest.h>

#include <oar/oar.hpp>

#include "cuda/compare.hpp"

using namespace oar;
using namespace oar::test;
using namespace oar::test::cuda_check;

namespace {

/// The forward case `f` and its gradient op fed with the CPU forward's outputs and a random Out@GRAD.
void compare_attention(const OpTest& f, const std::map<std::string, LoDTensor>& in, const std::map<std::string, Attribute>& attrs, const std::string& what) {
  compare_on_cuda(f, what, 1e-10, 1e-10);
  const auto fwd = f.run(cpu());
  OpTest g("scaled_dot_product_attention_grad");
  g.skip_inferred_check();
  for (auto& [slot, t] : in) g.input(slot, t);
  g.input("Out", fwd.at("Out")).input("LSE", fwd.at("LSE")).input("Seed", fwd.at("Seed"));
  g.input("Out@GRAD", LoDTensor(random_tensor<double>(fwd.at("Out").shape(), -1, 1, 77), fwd.at("Out").lod()));
  for (auto& [k, v] : attrs) g.attr(k, v);
  compare_on_cuda(g, what + " (gradient)", 1e-10, 1e-10);
}

}  // namespace

TEST_CASE("cuda: scaled_dot_product_attention and its gradient match the CPU: dense, causal, masked, ragged, dropout") {
  auto q = random_tensor<double>({2, 3, 70, 16}, -1, 1, 1), k = random_tensor<double>({2, 3, 150, 16}, -1, 1, 2),
       v = random_tensor<double>({2, 3, 150, 8}, -1, 1, 3);
  auto bmask = random_tensor<double>({2, 1, 70, 150}, -1, 1, 4);
  Tensor keep(Shape{70, 150}, DType::boolean, cpu());
  for (int64_t i = 0; i < keep.numel(); ++i) keep.data<bool>()[i] = bmask.get(i) > -0.5;
  for (bool causal : {false, true})
    for (int mask_kind : {0, 1, 2}) {
      std::map<std::string, LoDTensor> in{{"Q", q}, {"K", k}, {"V", v}};
      if (mask_kind == 1) in["Mask"] = bmask;
      if (mask_kind == 2) in["Mask"] = keep;
      std::map<std::string, Attribute> attrs{{"causal", to_attribute(causal)}, {"dropout_prob", to_attribute(0.2f)}, {"fix_seed", to_attribute(true)},
                                             {"seed", to_attribute(int32_t(5))}};
      OpTest f("scaled_dot_product_attention");
      for (auto& [slot, t] : in) f.input(slot, t);
      for (auto& [kk, vv] : attrs) f.attr(kk, vv);
      compare_attention(f, in, attrs, fmt::format("dense causal {} mask {}", causal, mask_kind));
    }
  // Ragged: query sequences of 3, 1, 130 rows against keys of 5, 2, 140.
  LoDTensor lq(random_tensor<double>({134, 2, 8}, -1, 1, 5), {{0, 3, 4, 134}});
  LoDTensor lk(random_tensor<double>({147, 2, 8}, -1, 1, 6), {{0, 5, 7, 147}});
  LoDTensor lv(random_tensor<double>({147, 2, 4}, -1, 1, 7), {{0, 5, 7, 147}});
  std::map<std::string, LoDTensor> in{{"Q", lq}, {"K", lk}, {"V", lv}};
  std::map<std::string, Attribute> attrs{{"causal", to_attribute(true)}};
  OpTest f("scaled_dot_product_attention");
  for (auto& [slot, t] : in) f.input(slot, t);
  f.attr("causal", true);
  compare_attention(f, in, attrs, "ragged causal");
}

TEST_CASE("cuda: add_position_encoding and rotary_position_embedding match the CPU, dense and LoD") {
  OpTest a("add_position_encoding");
  a.input("X", random_tensor<double>({2, 9, 6}, -1, 1, 8)).attr("alpha", 0.5f).attr("beta", 2.f);
  compare_on_cuda(a, "add_position_encoding dense", 1e-12, 1e-12);
  OpTest al("add_position_encoding");
  al.input("X", LoDTensor(random_tensor<double>({7, 4}, -1, 1, 9), {{0, 3, 7}}));
  compare_on_cuda(al, "add_position_encoding LoD", 1e-12, 1e-12);
  OpTest r("rotary_position_embedding");
  r.input("X", random_tensor<double>({2, 3, 5, 8}, -1, 1, 10)).attr("offset", 3);
  compare_on_cuda(r, "rotary dense", 1e-12, 1e-12);
  LoDTensor x(random_tensor<double>({7, 2, 4}, -1, 1, 11), {{0, 2, 7}});
  OpTest rl("rotary_position_embedding");
  rl.input("X", x);
  compare_on_cuda(rl, "rotary LoD", 1e-12, 1e-12);
  OpTest rg("rotary_position_embedding_grad");
  rg.skip_inferred_check();
  rg.input("X", x).input("Out@GRAD", LoDTensor(random_tensor<double>({7, 2, 4}, -1, 1, 12), x.lod()));
  compare_on_cuda(rg, "rotary gradient LoD", 1e-12, 1e-12);
}

TEST_CASE("cuda: the position ops' Offset, and a decoding Evaluator's key-value cache, match the CPU") {
  OpTest a("add_position_encoding");
  a.input("X", LoDTensor(random_tensor<double>({7, 4}, -1, 1, 13), {{0, 3, 7}})).input("Offset", Tensor::from<int64_t>({5, 2}));
  compare_on_cuda(a, "add_position_encoding LoD with Offset", 1e-12, 1e-12);
  OpTest r("rotary_position_embedding");
  r.input("X", random_tensor<double>({2, 3, 5, 8}, -1, 1, 14)).input("Offset", Tensor::from<int64_t>({4, 1}));
  compare_on_cuda(r, "rotary dense with Offset", 1e-12, 1e-12);
  if (!have_device()) {
    ++g_skipped;
    return;
  }
  // A two-layer decoder fed 3, then 1, then 2 tokens of two sequences on each place: the same rows.
  std::vector<LoDTensor> rows[2];
  const Place places[2] = {cpu(), cuda(0)};
  for (int i = 0; i < 2; ++i) {
    Tape tape;
    auto ids = data("ids", i64, {-1, 1}).lod_level(1);
    Var h = add_position_encoding(embedding(ids, {9, 16}), 4.0, 1.0, cached_length(ids));
    for (int l = 0; l < 2; ++l) h = transformer_decoder_layer(h, 2, {.d_ff = 24, .rotary = l == 1, .kv_cache = true});
    Model model(tape.program({h}), places[i], 5);
    Evaluator dec(model, {}, {.kv_cache = true});
    int64_t next = 1;
    for (size_t n : {3u, 1u, 2u}) {
      std::vector<int64_t> v;
      for (size_t k = 0; k < 2 * n; ++k) v.push_back(next++ % 9);
      rows[i].push_back(dec.forward({{"ids", LoDTensor(Tensor::from<int64_t>(v, Shape{int64_t(v.size()), 1}), {{0, n, 2 * n}})}})[0]);
    }
  }
  for (size_t s = 0; s < rows[0].size(); ++s) check_close(rows[1][s].to(cpu()), rows[0][s], 1e-4, 1e-4, "decoding step " + std::to_string(s));
}
