// tests/serve/fixture.cpp: `serve_fixture OUTDIR` writes what test_serve.py serves and checks against.
//   OUTDIR/repo/mlp/1       the book MLP (784 -> fc 200 relu -> fc 10 softmax), untrained, seed 1
//   OUTDIR/repo/conv/1      the book conv net on [-1, 1, 28, 28], untrained, seed 3, with a config.json: dynamic
//                           batching (at most 8 rows, 500 us window), 2 evaluators, its input and output renamed
//   OUTDIR/stage/mlp/2      the same MLP, seed 2 (copied into the repo by the test, then loaded)
//   OUTDIR/ref.json         per model: served input/output names and shapes, and per batch (1 and 4) the files of
//                           a deterministic pseudo-random input and of the output oar::Evaluator computes on the
//                           reloaded inference model; raw little-endian float32, row-major
// The convolutions run im2col (the server must too: OAR_CONV=im2col, ref.json's "conv_algorithm").
// It also records as "batch_invariant" whether each model's rows stay the same bit for bit whatever rows are
// batched with them (a batch of 8 holding the batches of 1 and 4 gives their rows): oar's CPU GEMM does not
// promise it (its kernels treat the last rows of a product differently), so requests that the server's dynamic
// batching may put together are compared within a tolerance when it is false, and requests sent one at a time
// (a batch of their own) bit for bit.
#include <oar/oar.hpp>

#include <bit>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

static_assert(std::endian::native == std::endian::little, "the reference files are raw little-endian float32");

// The book nets of examples/mnist_mlp.cpp and examples/mnist_conv.cpp (topology only), each on its own tape so
// that its seed alone decides its weights.
void save_mlp(const fs::path& dir, uint64_t seed) {
  oar::Tape tape;
  auto img = oar::data("img", oar::f32, {-1, 784});
  auto hidden = oar::fc(img, 200).act(oar::relu);
  auto prediction = oar::fc(hidden, 10).act(oar::softmax).name("prediction");
  oar::Model model(tape.program(prediction), seed);
  model.save_inference(dir, {img}, {prediction});
}

void save_conv(const fs::path& dir, uint64_t seed) {
  oar::Tape tape;
  auto img = oar::data("img", oar::f32, {-1, 1, 28, 28});
  auto conv_pool = [](const oar::Var& x, int filters) {
    return oar::pool2d(oar::conv2d(x, filters, 5).act(oar::relu), 2).type(oar::PoolType::max).stride(2);
  };
  auto h = oar::batch_norm(conv_pool(img, 20));
  auto prediction = oar::fc(conv_pool(h, 50), 10).act(oar::softmax).name("prediction");
  oar::Model model(tape.program(prediction), seed);
  model.save_inference(dir, {img}, {prediction});
}

void write_text(const fs::path& file, const std::string& text) {
  std::ofstream f(file, std::ios::binary);
  f << text;
  if (!f) throw oar::Error("cannot write " + file.string());
}

void write_floats(const fs::path& file, std::span<const float> v) {
  std::ofstream f(file, std::ios::binary);
  f.write(reinterpret_cast<const char*>(v.data()), std::streamsize(v.size() * sizeof(float)));
  if (!f) throw oar::Error("cannot write " + file.string());
}

std::string json_shape(const oar::Shape& s) {
  std::string out = "[";
  for (int i = 0; i < s.rank(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

/// `rows` pseudo-random rows of `row_shape` in [0, 1) (pixel-like), the same for the same seed.
oar::LoDTensor random_input(int64_t rows, const std::vector<int64_t>& row_shape, uint32_t seed) {
  std::vector<int64_t> dims{rows};
  dims.insert(dims.end(), row_shape.begin(), row_shape.end());
  oar::Tensor t(oar::Shape(dims), oar::f32);
  std::mt19937 gen(seed);
  for (float& v : t.span<float>()) v = float(gen() >> 8) / float(1 << 24);  // exact in float32, no distribution's rounding
  return oar::LoDTensor(t);
}

struct Batch {
  oar::LoDTensor input, output;
};

/// The reference outputs of the inference model in `dir` for batches of 1 and 4 rows, and whether a batch of
/// 8 (the 1, the 4 and 3 more rows) gives the same rows.
struct Reference {
  std::string feed, fetch;
  oar::Shape input_shape, output_shape;  // as the program declares them (-1: the batch)
  std::vector<Batch> batches;
  bool batch_invariant = true;
};

Reference reference(const fs::path& dir, const std::vector<int64_t>& row_shape, uint32_t seed) {
  oar::Model model = oar::Model::load_inference(dir);
  if (model.feeds().size() != 1 || model.outputs().size() != 1) throw oar::Error("expected one feed and one fetch in " + dir.string());
  Reference r;
  r.feed = model.feeds()[0];
  r.fetch = model.outputs()[0];
  const oar::Block& b = model.program().block(0);
  r.input_shape = b.var(r.feed).shape();
  r.output_shape = b.var(r.fetch).shape();
  oar::Evaluator ev(model);
  for (int64_t rows : {1, 4}) {
    Batch batch{random_input(rows, row_shape, seed + uint32_t(rows)), {}};
    batch.output = ev.forward({{r.feed, batch.input}})[0];
    r.batches.push_back(std::move(batch));
  }
  // Rows 0 = the batch of 1, 1..4 = the batch of 4, 5..7 = others: each output row as in its own batch.
  auto extra = random_input(3, row_shape, seed + 100);
  const size_t in_row = r.batches[0].input.span<float>().size(), out_row = r.batches[0].output.span<float>().size();
  std::vector<float> all;
  for (const oar::LoDTensor* t : {&r.batches[0].input, &r.batches[1].input, &extra})
    all.insert(all.end(), t->span<float>().begin(), t->span<float>().end());
  std::vector<int64_t> dims{8};
  dims.insert(dims.end(), row_shape.begin(), row_shape.end());
  auto out8 = ev.forward({{r.feed, oar::LoDTensor(oar::Tensor::from(all, oar::Shape(dims)))}})[0].to_vector<float>();
  auto want = r.batches[0].output.to_vector<float>();
  auto four = r.batches[1].output.to_vector<float>();
  want.insert(want.end(), four.begin(), four.end());
  if (in_row * 8 != all.size() || out_row * 8 != out8.size()) throw oar::Error("unexpected row sizes in " + dir.string());
  r.batch_invariant = std::memcmp(out8.data(), want.data(), want.size() * sizeof(float)) == 0;
  return r;
}

/// Writes the batches' files as `<tag>_b<rows>_{input,output}.f32` and returns the model's ref.json entry.
std::string write_reference(const fs::path& out, const std::string& tag, const Reference& r, const std::string& input_name,
                            const std::string& output_name) {
  std::string batches;
  for (const Batch& b : r.batches) {
    const std::string stem = tag + "_b" + std::to_string(b.input.dim(0));
    write_floats(out / (stem + "_input.f32"), b.input.span<float>());
    write_floats(out / (stem + "_output.f32"), b.output.span<float>());
    batches += std::string(batches.empty() ? "" : ",\n") + "      {\"rows\": " + std::to_string(b.input.dim(0)) +
               ", \"input_shape\": " + json_shape(b.input.shape()) + ", \"input_file\": \"" + stem + "_input.f32\"" +
               ", \"output_shape\": " + json_shape(b.output.shape()) + ", \"output_file\": \"" + stem + "_output.f32\"}";
  }
  return "    \"" + tag + "\": {\n      \"program_input\": \"" + r.feed + "\", \"program_output\": \"" + r.fetch + "\",\n" +
         "      \"input\": {\"name\": \"" + input_name + "\", \"datatype\": \"FP32\", \"shape\": " + json_shape(r.input_shape) + "},\n" +
         "      \"output\": {\"name\": \"" + output_name + "\", \"datatype\": \"FP32\", \"shape\": " + json_shape(r.output_shape) + "},\n" +
         "      \"batch_invariant\": " + (r.batch_invariant ? "true" : "false") + ",\n      \"batches\": [\n" + batches + "\n    ]}";
}

}  // namespace

int main(int argc, char** argv) try {
  if (argc != 2) {
    std::fprintf(stderr, "usage: serve_fixture OUTDIR\n");
    return 2;
  }
  const fs::path out = argv[1];
  // Under the default (automatic) setting each process times the convolution kernels and keeps the fastest,
  // which round differently: the fixture and the server (test_serve.py starts it with OAR_CONV=im2col) pin one.
  oar::set_conv_algorithm(oar::ConvAlgorithm::im2col);
  fs::remove_all(out);
  fs::create_directories(out / "repo" / "mlp");
  fs::create_directories(out / "repo" / "conv");
  fs::create_directories(out / "stage" / "mlp");
  save_mlp(out / "repo" / "mlp" / "1", 1);
  save_mlp(out / "stage" / "mlp" / "2", 2);
  save_conv(out / "repo" / "conv" / "1", 3);

  Reference mlp1 = reference(out / "repo" / "mlp" / "1", {784}, 1000);
  Reference mlp2 = reference(out / "stage" / "mlp" / "2", {784}, 1000);  // the same inputs as v1: only the weights differ
  Reference conv = reference(out / "repo" / "conv" / "1", {1, 28, 28}, 3000);
  if (mlp1.batches[0].output.to_vector<float>() == mlp2.batches[0].output.to_vector<float>())
    throw oar::Error("mlp versions 1 and 2 predict the same: the seed does not change the weights");
  // conv's served names differ from its program's: config.json renames them.
  write_text(out / "repo" / "conv" / "config.json",
             "{\"evaluators\": 2, \"dynamic_batching\": {\"max_batch_size\": 8, \"window_us\": 500}, \"inputs\": [\"image\"], \"outputs\": [\"probabilities\"]}\n");

  write_text(out / "ref.json", "{\n  \"conv_algorithm\": \"im2col\",\n  \"models\": {\n" + write_reference(out, "mlp_v1", mlp1, mlp1.feed, mlp1.fetch) + ",\n" +
                                   write_reference(out, "mlp_v2", mlp2, mlp2.feed, mlp2.fetch) + ",\n" +
                                   write_reference(out, "conv", conv, "image", "probabilities") + "\n  }\n}\n");
  for (auto [tag, r] : {std::pair{"mlp_v1", &mlp1}, {"mlp_v2", &mlp2}, {"conv", &conv}})
    std::printf("%s: %s %s -> %s %s; rows the same bit for bit in a batch of 8: %s\n", tag, r->feed.c_str(), json_shape(r->input_shape).c_str(),
                r->fetch.c_str(), json_shape(r->output_shape).c_str(), r->batch_invariant ? "yes" : "no");
  std::printf("serve fixture written to %s\n", out.c_str());
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "error: %s\n", e.what());
  return 1;
}
