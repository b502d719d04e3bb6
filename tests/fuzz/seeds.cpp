// tests/fuzz/seeds.cpp: writes each fuzz target's seed corpus from real files oar writes (small models, so that
// the seeds stay small), and the dictionaries of the protobuf-based targets (oar's op, slot and attribute
// names; the ONNX op types the importer reads).
//   fuzz_seeds OUT_DIR   -> OUT_DIR/{program,tensor_file,checkpoint,idx,lod,onnx,serve}/..., OUT_DIR/*.dict
#include <oar/oar.hpp>
#include <oar/onnx/onnx.hpp>

#include <cstdio>
#include <fstream>
#include <set>

namespace fs = std::filesystem;

namespace {

void put(const fs::path& p, std::string_view bytes) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary | std::ios::trunc).write(bytes.data(), std::streamsize(bytes.size()));
}
std::string get(const fs::path& p) { return oar::detail::read_file(p); }

/// A libFuzzer dictionary line: the token quoted, bytes outside printable ASCII as \xNN.
std::string dict_entry(std::string_view s) {
  std::string o = "\"";
  for (unsigned char c : s) o += c >= 0x20 && c < 0x7f && c != '"' && c != '\\' ? std::string(1, char(c)) : fmt::format("\\x{:02x}", c);
  return o + "\"\n";
}

void models(const fs::path& out, const fs::path& work) {
  {  // an MLP with its loss: the program, its combined parameters, an inference model, a checkpoint
    oar::Tape tape;
    auto x = oar::data("x", oar::f32, {-1, 4});
    auto label = oar::data("label", oar::i64, {-1, 1});
    auto y = oar::fc(oar::fc(x, 6).act(oar::relu), 3).act(oar::softmax).name("y");
    auto cost = oar::mean(oar::cross_entropy(y, label));
    oar::Model m(tape.program({cost, y}), 7);
    put(out / "program" / "mlp_train", oar::serialize(m.program()));
    m.save_inference(work / "mlp", {x}, {y});
    put(out / "program" / "mlp_inference", get(work / "mlp" / "__model__"));
    put(out / "tensor_file" / "mlp_params", get(work / "mlp" / "__params__"));
    oar::onnx::export_model(m, work / "mlp.onnx", {.feeds = m.names_of({x}), .fetches = m.names_of({y})});
    put(out / "onnx" / "mlp", get(work / "mlp.onnx"));
    oar::Optimizer opt(m, cost, oar::optim::adam(1e-3));
    opt.checkpoint(work / "mlp.ckpt");
    put(out / "checkpoint" / "mlp_adam", get(work / "mlp.ckpt"));
  }
  {  // a small conv net (conv, batch norm, pooling): program and ONNX
    oar::Tape tape;
    auto img = oar::data("img", oar::f32, {-1, 1, 6, 6});
    auto h = oar::pool2d(oar::batch_norm(oar::conv2d(img, 2, 3).act(oar::relu)), 2).type(oar::PoolType::max).stride(2);
    auto y = oar::fc(h, 2).act(oar::softmax);
    oar::Model m(tape.program(y), 3);
    m.save_inference(work / "conv", {img}, {y});
    put(out / "program" / "conv_inference", get(work / "conv" / "__model__"));
    oar::onnx::export_model(m, work / "conv.onnx", {.feeds = m.names_of({img}), .fetches = m.names_of({y})});
    put(out / "onnx" / "conv", get(work / "conv.onnx"));
  }
  {  // sequences: embedding, LSTM, pooling (LoD feeds; ONNX LSTM with sequence_lens and masks)
    oar::Tape tape;
    auto ids = oar::data("ids", oar::i64, {-1, 1}).lod_level(1);
    auto h = oar::dynamic_lstm(oar::fc(oar::embedding(ids, {5, 3}), 8), 8);
    auto y = oar::sequence_pool(h, oar::SequencePoolType::max);
    oar::Model m(tape.program(y), 5);
    m.save_inference(work / "lstm", {ids}, {y});
    put(out / "program" / "lstm_inference", get(work / "lstm" / "__model__"));
    oar::onnx::export_model(m, work / "lstm.onnx", {.feeds = m.names_of({ids}), .fetches = m.names_of({y})});
    put(out / "onnx" / "lstm", get(work / "lstm.onnx"));
  }
  {  // control flow: a while loop (sub-blocks)
    oar::Tape tape;
    auto x = oar::data("x", oar::f32, {-1, 2});
    auto n = oar::fill_constant({1}, oar::i64, 3);
    auto i = oar::fill_constant({1}, oar::i64, 0);
    auto outs = oar::while_loop({i, x}, [&](std::vector<oar::Var> v) { return oar::less_than(v[0], n); },
                                [&](std::vector<oar::Var> v) { return std::vector<oar::Var>{oar::increment(v[0]), oar::fc(v[1], 2).act(oar::tanh)}; });
    oar::Model m(tape.program(outs[1]), 2);
    put(out / "program" / "while_loop", oar::serialize(m.program()));
  }
}

void tensors(const fs::path& out, const fs::path& work) {
  oar::io::save_tensor(work / "t_f32", oar::LoDTensor(oar::Tensor::from<float>({1, -2, 3.5f, 0, 1e-3f, 7}, {2, 3})));
  put(out / "tensor_file" / "f32_2x3", get(work / "t_f32"));
  oar::io::save_tensor(work / "t_lod", oar::LoDTensor(oar::Tensor::from<int64_t>({4, 1, 2, 2, 0}, {5, 1}), {{0, 2, 5}}));
  put(out / "tensor_file" / "i64_lod", get(work / "t_lod"));
  oar::io::save_tensor(work / "t_lod2", oar::LoDTensor(oar::Tensor::from<double>({1, 2, 3}, {3}), {{0, 1, 2}, {0, 2, 3}}));
  put(out / "tensor_file" / "f64_two_levels", get(work / "t_lod2"));
  oar::io::save_tensor(work / "t_scalar", oar::LoDTensor(oar::Tensor::from<float>({2.5f}, oar::Shape{})));
  put(out / "tensor_file" / "f32_scalar", get(work / "t_scalar"));

  oar::io::IdxData images{{2, 3, 3}, std::vector<uint8_t>(18)}, labels{{2}, {7, 1}};
  for (size_t k = 0; k < images.data.size(); ++k) images.data[k] = uint8_t(k * 13);
  oar::io::write_idx(work / "images", images);
  put(out / "idx" / "images", get(work / "images"));
  oar::io::write_idx(work / "images.gz", images, true);
  put(out / "idx" / "images_gz", get(work / "images.gz"));
  oar::io::write_idx(work / "labels", labels);
  put(out / "idx" / "labels", get(work / "labels"));

  // lod: rows, levels - 1, then each level's offsets ended by 0xff (the target's encoding)
  put(out / "lod" / "three_sequences", std::string("\x06\x00\x00\x02\x03\x06\xff", 7));
  put(out / "lod" / "empty_sequence", std::string("\x04\x00\x00\x00\x04\xff", 6));
  put(out / "lod" / "two_levels", std::string("\x05\x01\x00\x02\x03\xff\x00\x01\x04\x05\xff", 11));
}

void requests(const fs::path& out) {
  // serve: flags (bit 0: an Inference-Header-Content-Length), its value (2 bytes), the body; the model takes x [-1, 4] FP32
  auto plain = [&](const std::string& name, const std::string& json) { put(out / "serve" / name, std::string("\0\0\0", 3) + json); };
  plain("json_one_row", R"({"inputs":[{"name":"x","shape":[1,4],"datatype":"FP32","data":[1,2,3,4]}]})");
  plain("json_two_rows_id", R"({"id":"r1","inputs":[{"name":"x","shape":[2,4],"datatype":"FP32","data":[[1,2,3,4],[5,6,7,8]]}],"outputs":[{"name":"y"}]})");
  plain("json_binary_output", R"({"inputs":[{"name":"x","shape":[1,4],"datatype":"FP32","data":[0,0,0,1]}],"outputs":[{"name":"y","parameters":{"binary_data":true}}]})");
  const std::string json = R"({"inputs":[{"name":"x","shape":[1,4],"datatype":"FP32","parameters":{"binary_data_size":16}}]})";
  std::string bin(16, '\0');
  const float v[4] = {0.5f, -1, 2, 0};
  std::memcpy(bin.data(), v, 16);
  std::string head = {char(1), char(json.size() & 0xff), char(json.size() >> 8)};
  put(out / "serve" / "binary_input", head + json + bin);
}

void dictionaries(const fs::path& out) {
  std::set<std::string> program;
  for (const oar::OpDef* d : oar::OpRegistry::instance().all()) {
    program.insert(d->type);
    for (auto& s : d->inputs) program.insert(s.name);
    for (auto& s : d->outputs) program.insert(s.name);
    for (auto& a : d->attrs) program.insert(a.name);
  }
  for (const char* s : {"feed", "fetch", "@GRAD", "@EMPTY@"}) program.insert(s);
  std::string text = "# oar's op types, slots and attribute names (written by fuzz_seeds)\n";
  for (auto& s : program) text += dict_entry(s);
  put(out / "program.dict", text);
  std::string onnx = "# the ONNX op types oar's importer reads, and common attribute names (written by fuzz_seeds)\n";
  std::set<std::string> names;
  for (auto& s : oar::onnx::supported_import_ops()) names.insert(s);
  for (const char* s : {"axis", "axes", "perm", "pads", "strides", "kernel_shape", "dilations", "group", "epsilon", "keepdims",
                        "to", "value", "hidden_size", "direction", "activations", "ai.onnx", "batch"})
    names.insert(s);
  for (auto& s : names) onnx += dict_entry(s);
  put(out / "onnx.dict", onnx);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: fuzz_seeds OUT_DIR\n");
    return 2;
  }
  const fs::path out = argv[1], work = fs::temp_directory_path() / ("oar-fuzz-seeds-" + std::to_string(::getpid()));
  models(out, work);
  tensors(out, work);
  requests(out);
  dictionaries(out);
  fs::remove_all(work);
  std::printf("seeds written to %s\n", out.c_str());
}
