// tests/onnx/fixture.cpp: onnx_fixture OUT_DIR exports oar models to ONNX in the layout of ONNX's own node
// tests: OUT_DIR/<case>/model.onnx and test_data_set_0/{input,output}_<k>.pb, the outputs being what oar's
// Evaluator computes for those inputs. test_onnxruntime.py runs each case in ONNX Runtime and compares;
// onnx_node_tests runs them back through oar's importer (a round trip). Every export passes ONNX's checker and
// strict shape inference first (ExportOptions::check). The models are untrained: random weights, random
// inputs, each from its own seed.
#include <oar/oar.hpp>
#include <oar/onnx/onnx.hpp>
#include <oar/ops/concat.hpp>           // split by sections: its op, recorded directly
#include <oar/ops/squared_l2_norm.hpp>  // no layer function records it alone

#include <cstdio>
#include <filesystem>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

oar::Tensor random_tensor(oar::Shape shape, uint64_t seed, float lo = -1, float hi = 1) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(size_t(shape.numel()));
  for (auto& x : v) x = u(rng);
  return oar::Tensor::from<float>(v, shape);
}

oar::Tensor random_ids(oar::Shape shape, int64_t vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int64_t> u(0, vocab - 1);
  std::vector<int64_t> v(size_t(shape.numel()));
  for (auto& x : v) x = u(rng);
  return oar::Tensor::from<int64_t>(v, shape);
}

struct Case {
  std::string name;
  std::vector<oar::Var> feeds, fetches;
  std::vector<oar::Tensor> inputs;
};

// Exports `model` and writes its inputs and oar's outputs beside it.
void write_case(const fs::path& root, const oar::Model& model, const Case& c, int64_t opset = 17) {
  const fs::path dir = root / c.name;
  fs::remove_all(dir);
  fs::create_directories(dir / "test_data_set_0");
  oar::onnx::ExportOptions o;
  o.opset = opset;
  o.feeds = model.names_of(std::span<const oar::Var>(c.feeds));
  o.fetches = model.names_of(std::span<const oar::Var>(c.fetches));
  oar::onnx::export_model(model, dir / "model.onnx", o);
  oar::Evaluator ev(model, o.fetches);
  oar::FeedMap feeds;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    feeds[o.feeds[i]] = oar::LoDTensor(c.inputs[i]);
    oar::onnx::write_tensor_proto(dir / "test_data_set_0" / fmt::format("input_{}.pb", i), c.inputs[i], o.feeds[i]);
  }
  auto out = ev.forward(feeds);
  for (size_t i = 0; i < out.size(); ++i)
    oar::onnx::write_tensor_proto(dir / "test_data_set_0" / fmt::format("output_{}.pb", i), out[i], o.fetches[i]);
  std::printf("%s: %zu inputs, %zu outputs\n", c.name.c_str(), c.inputs.size(), out.size());
}

// A case whose first feeds are sequence batches (LoD level 1, rows [total, 1] of ids): oar runs the LoD tensors,
// the files hold what the exported graph takes, for each the ids padded with 0 to [batch, max_len, 1] and the
// lengths, then the `dense` feeds (one row per sequence, such as a position offset) as they are.
using SeqFeed = std::pair<oar::Var, std::vector<std::vector<int64_t>>>;
void write_sequence_case(const fs::path& root, const oar::Model& model, const std::string& name, const std::vector<SeqFeed>& seq_feeds,
                         const oar::Var& out, const std::vector<std::pair<oar::Var, oar::Tensor>>& dense = {}) {
  const fs::path dir = root / name;
  fs::remove_all(dir);
  fs::create_directories(dir / "test_data_set_0");
  oar::onnx::ExportOptions o;
  for (auto& [v, seqs] : seq_feeds) o.feeds.push_back(model.name_of(v));
  for (auto& [v, t] : dense) o.feeds.push_back(model.name_of(v));
  o.fetches = {model.name_of(out)};
  oar::onnx::export_model(model, dir / "model.onnx", o);
  oar::FeedMap feeds;
  int input = 0;  // the graph's inputs in order: each sequence's padded ids and lengths, then the dense feeds
  auto write = [&](const oar::Tensor& t, const std::string& n) {
    oar::onnx::write_tensor_proto(dir / "test_data_set_0" / fmt::format("input_{}.pb", input++), t, n);
  };
  std::string shape;
  for (size_t f = 0; f < seq_feeds.size(); ++f) {
    const auto& seqs = seq_feeds[f].second;
    std::vector<int64_t> rows, lengths, padded;
    size_t longest = 0;
    for (auto& q : seqs) longest = std::max(longest, q.size());
    oar::Lengths lod(1);
    for (auto& q : seqs) {
      rows.insert(rows.end(), q.begin(), q.end());
      lengths.push_back(int64_t(q.size()));
      lod[0].push_back(q.size());
      for (size_t t = 0; t < longest; ++t) padded.push_back(t < q.size() ? q[t] : 0);
    }
    feeds[o.feeds[f]] = oar::LoDTensor::from_lengths(oar::Tensor::from<int64_t>(rows, {int64_t(rows.size()), 1}), lod);
    write(oar::Tensor::from<int64_t>(padded, {int64_t(seqs.size()), int64_t(longest), 1}), o.feeds[f]);
    write(oar::Tensor::from<int64_t>(lengths, {int64_t(seqs.size())}), o.feeds[f] + "_lengths");
    shape += fmt::format("{}{} sequences padded to {}", f ? ", " : "", seqs.size(), longest);
  }
  for (size_t i = 0; i < dense.size(); ++i) {
    feeds[o.feeds[seq_feeds.size() + i]] = oar::LoDTensor(dense[i].second);
    write(dense[i].second, o.feeds[seq_feeds.size() + i]);
  }
  oar::Evaluator ev(model, o.fetches);
  auto res = ev.forward(feeds);
  oar::onnx::write_tensor_proto(dir / "test_data_set_0" / "output_0.pb", res[0], o.fetches[0]);
  std::printf("%s: %s, 1 output\n", name.c_str(), shape.c_str());
}

// embedding -> fc -> dynamic_lstm (with and without peepholes, forward and reversed, with initial states) or
// dynamic_gru (with and without an initial state), or add_position_encoding times cross_entropy (soft labels),
// or cross_entropy with hard labels -> sequence pools -> fc softmax:
// ONNX's LSTM / GRU over the padded batch with sequence_lens.
void sequences(const fs::path& root) {
  const std::vector<std::vector<int64_t>> seqs = {{3, 7, 1, 9, 4}, {2, 8}, {5, 5, 6, 1, 2, 3, 7}, {11}};
  for (int variant = 0; variant < 7; ++variant) {
    oar::Tape tape;
    auto ids = oar::data("ids", oar::i64, {-1, 1}).lod_level(1);
    auto emb = oar::embedding(ids, {12, 6});
    oar::Var h;
    std::string name;
    if (variant == 0) h = oar::dynamic_lstm(oar::fc(emb, 4 * 5), 4 * 5), name = "lstm_peepholes";
    if (variant == 1) h = oar::dynamic_lstm(oar::fc(emb, 4 * 5), 4 * 5).use_peepholes(false).is_reverse(), name = "lstm_reversed";
    if (variant == 2) h = oar::dynamic_gru(oar::fc(emb, 3 * 5), 5), name = "gru";
    // Initial states [batch, 5] computed from each whole sequence.
    auto initial = [&](oar::SequencePoolType t) { return oar::tanh(oar::fc(oar::sequence_pool(emb, t), 5)); };
    if (variant == 3)
      h = oar::dynamic_lstm(oar::fc(emb, 4 * 5), 4 * 5, initial(oar::SequencePoolType::average), initial(oar::SequencePoolType::max)).is_reverse(),
      name = "lstm_initial_states";
    if (variant == 4) h = oar::dynamic_gru(oar::fc(emb, 3 * 5), 5, initial(oar::SequencePoolType::sum)), name = "gru_initial_state";
    if (variant == 5) {  // positions: the padded steps; cross_entropy row by row
      auto ce = oar::cross_entropy(oar::softmax(oar::fc(emb, 12)), oar::softmax(oar::fc(emb, 12))).soft_label();
      h = oar::add_position_encoding(emb, 1.0, 2.0) * ce, name = "position_encoding_xent";
    }
    // Hard labels: each step's own id among 12 classes (GatherElements over [batch, max_len, 12] with both
    // leading dims symbolic), id 5 as ignore_index (a loss of 0 at 3 steps); the padding's label 0 is in range.
    if (variant == 6) h = oar::cross_entropy(oar::softmax(oar::fc(emb, 12)), ids).set("ignore_index", int32_t(5)), name = "hard_label_xent";
    using P = oar::SequencePoolType;
    auto pooled = oar::concat({oar::sequence_pool(h, P::last), oar::sequence_pool(h, P::max), oar::sequence_pool(h, P::average),
                               oar::sequence_pool(oar::tanh(h), P::sum), oar::sequence_pool(h, P::first), oar::sequence_pool(h, P::sqrt)}, 1);
    auto y = oar::fc(pooled, 3).act(oar::softmax);
    oar::Model model(tape.program(y), uint64_t(20 + variant));
    // The pooled states themselves are compared: a classifier's softmax on untrained weights hides too much.
    write_sequence_case(root, model, name, {{ids, seqs}}, pooled);
  }
}

// A small Transformer block over LoD sequences (no padding in oar; padded in the graph): embedding rows, fc
// projections to 2 heads ([N, 8] rows as [N, 2, 4]), rotary queries (offset 1) and keys (each sequence's first
// position fed), attention within each sequence (plain, and causal with a scale), the heads joined back to rows
// (both reshape forms), projected and added to the embedding; beside it the multi_head_attention layer over the
// same rows (causal, rotary); then pooled per sequence, the output.
void sequence_attention(const fs::path& root) {
  const std::vector<std::vector<int64_t>> seqs = {{3, 7, 1, 9, 4}, {2, 8}, {5, 5, 6, 1, 2, 3, 7}, {11}};
  oar::Tape tape;
  auto ids = oar::data("ids", oar::i64, {-1, 1}).lod_level(1);
  auto start = oar::data("start", oar::i64, {-1});
  auto x = oar::embedding(ids, {12, 8});
  auto heads = [](const oar::Var& v) { return oar::reshape(oar::fc(v, 8), {0, 2, 4}); };
  auto q = oar::rotary_position_embedding(heads(x), 1), k = oar::rotary_position_embedding(heads(x), start), v = heads(x);
  auto a1 = oar::scaled_dot_product_attention(q, k, v);
  auto a2 = oar::scaled_dot_product_attention(q, k, v).causal().scale(0.7);
  auto h = x + oar::fc(oar::reshape(a1, {-1, 8}), 8) + oar::fc(oar::reshape(a2, {0, 8}), 8);
  using P = oar::SequencePoolType;
  auto pooled = oar::concat({oar::sequence_pool(h, P::average), oar::sequence_pool(h, P::max), oar::sequence_pool(h, P::last),
                             oar::sequence_pool(oar::reshape(a2, {0, 8}), P::sum),
                             oar::sequence_pool(oar::multi_head_attention(x, 2, 8, {.causal = true, .rotary = true}), P::average)}, 1);
  oar::Model model(tape.program(pooled), 30);
  write_sequence_case(root, model, "attention_lod", {{ids, seqs}}, pooled, {{start, oar::Tensor::from<int64_t>({0, 3, 1, 2}, {4})}});
}

// Two sequence feeds of different lengths (a source and a target, as a translation model has): each is masked
// by its own lengths. The source through a GRU, the target's queries attending over the source's keys, each
// pooled; a mask taken from the wrong feed changes every pooled value.
void two_sequence_feeds(const fs::path& root) {
  const std::vector<std::vector<int64_t>> src = {{3, 7, 1}, {2, 8, 4, 4, 9}, {5}}, tgt = {{1, 2, 3, 4, 5, 6}, {7}, {8, 9}};
  oar::Tape tape;
  auto s = oar::data("src", oar::i64, {-1, 1}).lod_level(1);
  auto t = oar::data("tgt", oar::i64, {-1, 1}).lod_level(1);
  auto es = oar::embedding(s, {10, 8}), et = oar::embedding(t, {10, 8});
  auto hs = oar::dynamic_gru(oar::fc(es, 3 * 8), 8);
  auto heads = [](const oar::Var& v) { return oar::reshape(oar::fc(v, 8), {0, 2, 4}); };
  auto cross = oar::reshape(oar::scaled_dot_product_attention(heads(et), heads(hs), heads(hs)), {0, 8});
  using P = oar::SequencePoolType;
  auto pooled = oar::concat({oar::sequence_pool(hs, P::last), oar::sequence_pool(hs, P::average), oar::sequence_pool(et, P::max),
                             oar::sequence_pool(cross, P::average), oar::sequence_pool(cross, P::last)}, 1);
  oar::Model model(tape.program(pooled), 31);
  write_sequence_case(root, model, "two_sequence_feeds", {{s, src}, {t, tgt}}, pooled);
}

// The book MLP (examples/mnist_mlp.cpp's layers).
void mlp(const fs::path& root) {
  oar::Tape tape;
  auto img = oar::data("img", oar::f32, {-1, 784});
  auto h = oar::fc(oar::fc(img, 128).act(oar::relu), 64).act(oar::relu);
  auto pred = oar::fc(h, 10).act(oar::softmax);
  oar::Model model(tape.program(pred), 1);
  write_case(root, model, {"mlp", {img}, {pred}, {random_tensor({3, 784}, 11, 0, 1)}});
}

// The book conv net: conv-pool, batch norm, conv-pool, fc softmax.
void conv(const fs::path& root) {
  oar::Tape tape;
  auto img = oar::data("img", oar::f32, {-1, 1, 28, 28});
  auto conv_pool = [](const oar::Var& x, int filters) { return oar::pool2d(oar::conv2d(x, filters, 5).act(oar::relu), 2).type(oar::PoolType::max).stride(2); };
  auto h = oar::batch_norm(conv_pool(img, 20));
  auto pred = oar::fc(conv_pool(h, 50), 10).act(oar::softmax);
  oar::Model model(tape.program(pred), 2);
  // Batch norm's running statistics away from 0 and 1, so that the export's use of them shows.
  auto& mean = model.parameter(model.program().global_block().ops()[4]->input("Mean").at(0));
  auto& var = model.parameter(model.program().global_block().ops()[4]->input("Variance").at(0));
  for (int64_t i = 0; i < mean.numel(); ++i) mean.data<float>()[i] = 0.1f * float(i % 5), var.data<float>()[i] = 0.5f + 0.1f * float(i % 7);
  write_case(root, model, {"conv", {img}, {pred}, {random_tensor({2, 1, 28, 28}, 12, 0, 1)}});
}

// ResNet-18 (torchvision's layout, bench/main.cpp's OarResnet18) on 64 x 64 images, 10 classes.
void resnet18(const fs::path& root) {
  oar::Tape tape;
  auto conv_bn = [](const oar::Var& x, int64_t filters, int64_t k, int64_t stride, bool relu) {
    auto bn = oar::batch_norm(oar::conv2d(x, filters, k).stride(stride).padding(k / 2).bias(false));
    if (relu) bn.act(oar::relu);
    return oar::Var(bn);
  };
  auto block = [&](const oar::Var& x, int64_t in, int64_t out, int64_t stride) {
    oar::Var h = conv_bn(conv_bn(x, out, 3, stride, true), out, 3, 1, false);
    oar::Var shortcut = stride != 1 || in != out ? conv_bn(x, out, 1, stride, false) : x;
    return oar::relu(h + shortcut);
  };
  auto img = oar::data("img", oar::f32, {-1, 3, 64, 64});
  oar::Var h = oar::pool2d(conv_bn(img, 64, 7, 2, true), 3).stride(2).padding(1);
  int64_t in = 64;
  for (int64_t width : {64, 128, 256, 512}) {
    h = block(h, in, width, width == 64 ? 1 : 2);
    h = block(h, width, width, 1);
    in = width;
  }
  auto logits = oar::fc(oar::pool2d(h, 2).type(oar::PoolType::avg).global(), 10);
  auto pred = oar::softmax(logits);
  oar::Model model(tape.program(pred), 3);
  // The logits too: an untrained net's softmax is nearly one-hot and would hide differences.
  write_case(root, model, {"resnet18", {img}, {logits, pred}, {random_tensor({2, 3, 64, 64}, 13)}});
}

// A Transformer's feed-forward pieces: fc, layer_norm (over one and over two dims), gelu (exact and tanh).
void ln_gelu(const fs::path& root, int64_t opset) {
  oar::Tape tape;
  auto x = oar::data("x", oar::f32, {-1, 4, 16});
  auto h = oar::gelu(oar::layer_norm(oar::fc(x, 32).flatten_dims(2)));
  auto h2 = oar::gelu.approximate()(oar::fc(h, 16).flatten_dims(2));
  auto y = oar::layer_norm(h2).begin_norm_axis(1);
  oar::Model model(tape.program(y), 4);
  write_case(root, model, {fmt::format("ln_gelu_opset{}", opset), {x}, {y}, {random_tensor({3, 4, 16}, 14)}}, opset);
}

// Element-wise functions, their fused expressions, and the shape ops.
void zoo(const fs::path& root) {
  oar::Tape tape;
  auto x = oar::data("x", oar::f32, {-1, 6});
  auto z = oar::data("z", oar::f32, {-1, 6});
  auto a = oar::fc(x, 6);
  std::vector<oar::Var> parts = {
      oar::leaky_relu.with("alpha", 0.1f)(a), oar::elu(a),   oar::relu6(oar::scale(a, 4.0)), oar::hard_sigmoid(a), oar::swish(a),
      oar::softplus(a),                       oar::softsign(a), oar::tanh(a),                  oar::sigmoid(a),      oar::clip(a, -0.3, 0.4),
      oar::pow(oar::abs(a), 1.5),             oar::sqrt(oar::abs(a)), oar::exp(a),            oar::log(oar::abs(a) + 1.0), oar::square(a),
      oar::relu(a * z + 0.5) - oar::tanh(z) / (oar::abs(a) + 2.0),
      oar::elementwise_max(a, z), oar::elementwise_min(a, z), oar::scale(a, 2.0, 0.5), oar::log_softmax(a)};
  auto cat = oar::concat(parts, 1);                                              // [N, 120]
  auto r = oar::transpose(oar::reshape(cat, {-1, 12, 10}), {0, 2, 1});         // [N, 10, 12]
  auto m = oar::matmul(r, r, false, true, 0.5);                                  // [N, 10, 10]
  auto s = oar::reduce_mean(oar::slice(m, {1, 2}, {1, 0}, {9, 8}), {2});         // [N, 8]
  auto q = oar::reduce_sum(m, {1}, true);                                        // [N, 1, 10]
  auto u = oar::squeeze(oar::unsqueeze(oar::flatten(q, 1), {1}), {1});           // [N, 10]
  auto y = oar::concat({s, u, oar::reduce_max(r, {1}), oar::flatten(oar::stack({s, s}, 1) * 1.0, 1)}, 1);
  auto out = oar::softmax(oar::dropout(oar::fc(oar::flatten(y, 1), 5), 0.25));
  oar::Model model(tape.program(out), 5);
  write_case(root, model, {"zoo", {x, z}, {out}, {random_tensor({3, 6}, 15), random_tensor({3, 6}, 16)}});
}

// Transposed convolution, comparisons and logic, the logistic loss, one-hot rows, a constant.
void zoo2(const fs::path& root) {
  oar::Tape tape;
  auto x = oar::data("x", oar::f32, {-1, 2, 5, 5});
  auto a = oar::data("a", oar::f32, {-1, 4});
  auto b = oar::data("b", oar::f32, {-1, 4});
  auto lab = oar::data("lab", oar::i64, {-1, 1});
  auto ct = oar::flatten(oar::conv2d_transpose(x, 3, 3).stride(2).padding(1), 1);  // [N, 3 * 9 * 9]
  auto lt = oar::less_than(a, b);
  auto logic = oar::logical_or(oar::logical_and(lt, oar::logical_not(oar::equal(a, b))), oar::greater_equal(a, b));
  auto rows = oar::concat({oar::cast(lt, oar::f32), oar::cast(logic, oar::f32), oar::cast(oar::not_equal(a, b), oar::f32),
                           oar::sigmoid_cross_entropy_with_logits(a, oar::sigmoid(b)), oar::one_hot(lab, 4),
                           a + oar::fill_constant({4}, oar::f32, 0.25)},
                          1);
  oar::Model model(tape.program({ct, rows}), 8);
  oar::Tensor ids = random_ids({3, 1}, 4, 19);
  oar::Tensor av = random_tensor({3, 4}, 20), bv = av.clone();
  bv.data<float>()[1] = 0.5f, bv.data<float>()[6] = -0.5f;  // some equal, some not
  write_case(root, model, {"zoo2", {x, a, b, lab}, {ct, rows}, {random_tensor({3, 2, 5, 5}, 18), av, bv, ids}});
}

// An embedding bag: ids -> embedding (with a padding row) -> mean over the ids -> fc.
void embed(const fs::path& root) {
  oar::Tape tape;
  auto ids = oar::data("ids", oar::i64, {-1, 1});
  auto e = oar::embedding(ids, {50, 8}).padding_idx(0);
  auto y = oar::fc(e, 4).act(oar::tanh);
  oar::Model model(tape.program(y), 6);
  oar::Tensor in = random_ids({7, 1}, 50, 17);
  in.data<int64_t>()[2] = 0;  // the padding row
  write_case(root, model, {"embedding", {ids}, {y}, {in}});
}

// split by sections (a -1 taking the rest): the layer function splits into equal pieces only.
std::vector<oar::Var> split_sections(const oar::Var& x, std::vector<int32_t> sections, int axis) {
  const int n = int(sections.size());
  auto replay = [sections = std::move(sections), axis](oar::LayerHelper& h) {
    using S = oar::ops::Split;
    std::vector<std::string> outs;
    for (size_t i = 0; i < sections.size(); ++i) outs.push_back(h.create_tmp(h.input_var().dtype()).name());
    oar::Operator op{std::string(S::type)};
    op.set_input(S::x, {h.input()}).set_output(S::out, outs).set_attr(S::sections, sections).set_attr(S::axis, int32_t(axis));
    h.append_op(std::move(op));
    return outs;
  };
  return oar::record_layer("split", {x}, std::move(replay), std::source_location::current(), n);
}

// split (equal pieces and sections), top_k, squared_l2_norm, cross_entropy: hard labels with one at ignore_index,
// soft labels, and probabilities with zeros (-log 0 is clamped to 1e20). Every dim known: the importer's
// GatherElements needs them.
void zoo3(const fs::path& root) {
  oar::Tape tape;
  auto x = oar::data("x", oar::f32, {4, 6});
  auto lab = oar::data("lab", oar::i64, {4, 1});
  auto a = oar::fc(x, 6);
  auto thirds = oar::split(a, 3, 1);                   // 3 x [4, 2]
  auto parts = split_sections(a, {1, -1, 2}, 1);       // [4, 1], [4, 3], [4, 2]
  auto top = oar::topk(oar::fc(x, 7), 3);              // [4, 3] values and indices
  auto sq = oar::record_unary_layer<oar::ops::SquaredL2Norm>(a, {}, std::source_location::current());  // [1]
  auto p = oar::softmax(oar::fc(x, 5)), q = oar::softmax(oar::fc(x, 5));
  auto hard = oar::cross_entropy(p, lab);
  auto soft = oar::cross_entropy(p, q).soft_label();
  auto clamped = oar::cross_entropy(oar::relu(oar::fc(x, 5)), q).soft_label();
  auto rows = oar::concat({thirds[0] * thirds[2] - thirds[1], parts[1], parts[0] + parts[2], top[0], hard, soft}, 1);
  oar::Model model(tape.program({rows, top[1], sq, clamped}), 9);
  oar::Tensor labels = random_ids({4, 1}, 5, 22);
  labels.data<int64_t>()[2] = -100;  // cross_entropy's default ignore_index: a loss of 0
  write_case(root, model, {"zoo3", {x, lab}, {rows, top[1], sq, clamped}, {random_tensor({4, 6}, 21), labels}});
}

// A small encoder block: sinusoid positions, projections to 2 heads, rotary queries (offset 1) and keys (each
// batch row's first position fed), attention causal, with a bool mask (one query row sees no key: zeros), with
// an additive mask and a scale, and 3 queries attending causally to 5 keys; the heads joined and projected.
// `dynamic`: batch and T unknown until the model runs (written beside the sequence exports, which have them too).
void attention(const fs::path& root, bool dynamic) {
  constexpr int64_t B = 2, T = 5, D = 8, H = 2, d = 4;
  const int64_t b = dynamic ? -1 : B, t = dynamic ? -1 : T;
  oar::Tape tape;
  auto x = oar::data("x", oar::f32, {b, t, D});
  auto keep = oar::data("keep", oar::boolean, {1, H, t, t});
  auto bias = oar::data("bias", oar::f32, {t, t});
  auto start = oar::data("start", oar::i64, {b});
  auto h = oar::add_position_encoding(x, 1.5, 0.5);
  auto heads = [&](const oar::Var& v) { return oar::transpose(oar::reshape(oar::fc(v, D).flatten_dims(2), {0, 0, H, d}), {0, 2, 1, 3}); };
  auto q = oar::rotary_position_embedding(heads(h), 1), k = oar::rotary_position_embedding(heads(h), start), v = heads(h);
  auto a1 = oar::scaled_dot_product_attention(q, k, v).causal();
  auto a2 = oar::scaled_dot_product_attention(q, k, v, keep);
  auto a3 = oar::scaled_dot_product_attention(q, k, v, bias).scale(0.3);
  auto a4 = oar::scaled_dot_product_attention(oar::slice(q, {2}, {2}, {5}), k, v).causal();  // [B, H, 3, d]
  auto join = [&](const oar::Var& a) { return oar::reshape(oar::transpose(a, {0, 2, 1, 3}), {0, 0, D}); };
  auto y = oar::fc(oar::concat({join(a1), join(a2), join(a3)}, 2), D).flatten_dims(2);
  oar::Model model(tape.program({y, a4}), 10);
  oar::Tensor keep_v(oar::Shape{1, H, T, T}, oar::boolean);
  std::mt19937_64 rng(23);
  for (int64_t i = 0; i < keep_v.numel(); ++i) keep_v.data<bool>()[i] = rng() % 3 != 0;
  for (int64_t j = 0; j < T; ++j) keep_v.data<bool>()[T + j] = false;  // head 0, query 1
  write_case(root, model,
             {dynamic ? "attention_dynamic" : "attention", {x, keep, bias, start}, {y, a4},
              {random_tensor({B, T, D}, 24), keep_v, random_tensor({T, T}, 25), oar::Tensor::from<int64_t>({0, 3}, {B})}});
}

// Ops with no ONNX form: export refuses them with an oar::Error naming the op, what is wrong and the line
// that made it. Returns whether every refusal came as expected.
bool refusals() {
  bool ok = true;
  auto expect = [&](const oar::Model& model, const std::vector<oar::Var>& feeds, const oar::Var& out, const std::string& op, const std::string& why) {
    oar::onnx::ExportOptions o;
    o.feeds = model.names_of(std::span<const oar::Var>(feeds));
    o.fetches = {model.name_of(out)};
    try {
      oar::onnx::export_model(model, fs::temp_directory_path() / "oar_refused.onnx", o);
      std::fprintf(stderr, "FAIL %s: exported, but it has no ONNX form\n", op.c_str());
      ok = false;
    } catch (const oar::Error& e) {
      const std::string w = e.what();
      const bool clear = w.find("'" + op + "'") != std::string::npos && w.find(why) != std::string::npos && w.find("fixture.cpp:") != std::string::npos;
      std::printf("%s %s: %s\n", clear ? "refused" : "FAIL", op.c_str(), w.c_str());
      ok = ok && clear;
    }
  };
  {
    oar::Tape tape;
    auto x = oar::data("x", oar::f32, {-1, 2, 3, 4});
    auto c = oar::kv_cache(x);
    oar::Model model(tape.program(c.rows), 11);
    expect(model, {x}, c.rows, "kv_cache", "between runs");
  }
  {  // over LoD sequences, where attention itself is exported
    oar::Tape tape;
    auto x = oar::data("x", oar::f32, {-1, 8}).lod_level(1);
    auto y = oar::multi_head_attention(x, 2, 8, {.rotary = true, .kv_cache = true});
    oar::Model model(tape.program(y), 12);
    expect(model, {x}, y, "kv_cache", "between runs");
  }
  {
    oar::Tape tape;
    auto q = oar::data("q", oar::f32, {-1, 2, 4}).lod_level(1);
    auto k = oar::data("k", oar::f32, {-1, 2, 4});
    auto a = oar::scaled_dot_product_attention(q, k, k);
    oar::Model model(tape.program(a), 13);
    expect(model, {q, k}, a, "scaled_dot_product_attention", "its K 'k' is not a sequence");
  }
  return ok;
}

}  // namespace

int main(int argc, char** argv) try {
  if (argc != 2 && argc != 3) {
    std::fprintf(stderr, "usage: onnx_fixture OUT_DIR [SEQUENCE_OUT_DIR]\n");
    return 2;
  }
  const fs::path root = argv[1];
  fs::create_directories(root);
  if (argc == 3) fs::create_directories(argv[2]);
  mlp(root);
  conv(root);
  resnet18(root);
  ln_gelu(root, 17);
  ln_gelu(root, 13);
  zoo(root);
  zoo2(root);
  embed(root);
  zoo3(root);
  attention(root, false);
  if (argc == 3) {  // dims known only when the model runs: Shape and Range sized at run time
    sequences(argv[2]);
    two_sequence_feeds(argv[2]);
    sequence_attention(argv[2]);
    attention(argv[2], true);
  }
  return refusals() ? 0 : 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "error: %s\n", e.what());
  return 1;
}
