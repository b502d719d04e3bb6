// tests/api/damaged_files.cpp: a saved model whose files are damaged gives an oar::Error when it is loaded, run
// or trained, never a crash: by hand (a slot renamed, a step variable that is not there, a window cut short, an
// output that names no variable, a __meta__ line misspelt) and by random byte changes of every file of models with a recurrent group, a
// DynamicRNN (a while loop) and a conv net, and of their inference models; a flipped byte in __params__ is caught
// by its checksum sidecar, and a string field that is not UTF-8 is one oar::Error with nothing from libprotobuf on stderr.
#include "pch.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <unistd.h>

#include <oar/ops/control_flow.hpp>
#include <oar/ops/pool2d.hpp>
#include <oar/ops/recurrent.hpp>

using namespace oar;
namespace fs = std::filesystem;

namespace {

LoDTensor uniform(Shape s, uint64_t seed, LoD lod = {}) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> d(-1, 1);
  std::vector<float> v(size_t(s.numel()));
  for (auto& x : v) x = d(rng);
  return LoDTensor(Tensor::from<float>(v, s), std::move(lod));
}

/// A model saved to `dir` (by Model::save, or as an inference model), with a feed it runs on.
struct Saved {
  fs::path dir;
  FeedMap feeds;
  bool inference = false;
};

fs::path fresh_dir(const std::string& name) {
  fs::path p = fs::temp_directory_path() / ("oar_test_damaged_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(p);
  return p;
}

Saved recurrent_group_model() {
  Tape t;
  Var x = data("x", f32, {-1, 3}).lod_level(1);
  Var out = recurrent_group({x}, [&](std::vector<Var> in) { return fc({in[0], memory("h", 4)}, 4).act(oar::tanh).name("h"); });
  Model m(t.program(mean(fc(out, 1))));
  Saved s{fresh_dir("group"), {{"x", uniform({6, 3}, 1, LoD{{0, 2, 3, 6}})}}};
  m.save(s.dir);
  return s;
}

Saved dynamic_rnn_model() {
  Tape t;
  Var x = data("x", f32, {-1, 3}).lod_level(1);
  DynamicRNN rnn;
  rnn.step([&] {
    Var prev = rnn.memory(Shape{-1, 4}, 0.0, f32);
    Var h = fc({rnn.step_input(x), prev}, 4).act(oar::tanh);
    rnn.update_memory(prev, h);
    rnn.output(h);
  });
  Model m(t.program(mean(fc(rnn(), 1))));
  Saved s{fresh_dir("dyn"), {{"x", uniform({6, 3}, 2, LoD{{0, 2, 3, 6}})}}};
  m.save(s.dir);
  return s;
}

Saved conv_model() {
  Tape t;
  Var img = data("img", f32, {-1, 1, 12, 12});
  Var pooled = pool2d(conv2d(img, 4, 3).act(relu), 2).type(PoolType::max).stride(2);
  Model m(t.program(mean(fc(batch_norm(pooled), 5).act(softmax))));
  Saved s{fresh_dir("conv"), {{"img", uniform({2, 1, 12, 12}, 3)}}};
  m.save(s.dir);
  return s;
}

/// The inference model of the model in `s`.
Saved inference_of(const Saved& s) {
  Saved i{s.dir.string() + "_inference", s.feeds, true};
  fs::remove_all(i.dir);
  Model::load(s.dir).save_inference(i.dir);
  return i;
}

/// Loads the model of `s`, runs it once and (not an inference model) takes an Adam step on its output; the text
/// of the oar::Error this gives ("" when none).
std::string load_and_run(const Saved& s) {
  try {
    Model m = s.inference ? Model::load_inference(s.dir) : Model::load(s.dir);
    Evaluator ev(m);
    ev.forward(s.feeds);
    if (!s.inference && !m.outputs().empty()) Optimizer(m, m.outputs()[0], optim::adam(1e-3)).step(s.feeds);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

/// Edits the first op of type `type` (in any block) of `dir`/__model__.
template <class F>
void edit_op(const fs::path& dir, std::string_view type, F&& f) {
  Program p = load_program(dir / "__model__");
  for (size_t b = 0; b < p.num_blocks(); ++b)
    for (Operator* op : p.block(int(b)).ops())
      if (op->type() == type) {
        f(*op);
        save_program(p, dir / "__model__");
        return;
      }
  FAIL("no op " << type);
}

std::string read(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), {}};
}
void write(const fs::path& p, const std::string& bytes) { std::ofstream(p, std::ios::binary | std::ios::trunc) << bytes; }

/// Runs `f` with stderr (fd 2) going to a temporary file; what was written there.
template <class F>
std::string stderr_of(F&& f) {
  std::fflush(stderr);
  const int saved = ::dup(2);
  std::FILE* tmp = std::tmpfile();
  ::dup2(::fileno(tmp), 2);
  auto restore = [&] {
    std::fflush(stderr);
    ::dup2(saved, 2);
    ::close(saved);
  };
  try {
    f();
  } catch (...) {
    restore();
    std::fclose(tmp);
    throw;
  }
  restore();
  std::string out;
  std::rewind(tmp);
  for (int c; (c = std::fgetc(tmp)) != EOF;) out.push_back(char(c));
  std::fclose(tmp);
  return out;
}

/// One random change of `bytes`: bits flipped, a byte set, the end cut off, a run deleted or repeated.
std::string damage(std::string bytes, std::mt19937_64& rng) {
  if (bytes.empty()) return bytes;
  auto at = [&] { return size_t(rng() % bytes.size()); };
  switch (rng() % 6) {
    case 0: bytes[at()] ^= char(1 << (rng() % 8)); break;
    case 1: bytes[at()] = char(rng()); break;
    case 2: bytes[at()] = char(rng() % 2 ? 0xff : 0); break;
    case 3: bytes.resize(at()); break;
    case 4: { const size_t a = at(); bytes.erase(a, std::min<size_t>(1 + rng() % 16, bytes.size() - a)); break; }
    default: { const size_t a = at(); bytes.insert(at(), bytes.substr(a, std::min<size_t>(1 + rng() % 16, bytes.size() - a))); break; }
  }
  return bytes;
}

}  // namespace

TEST_CASE("damaged files: a recurrent op without its step_scopes slot, or naming a step input its block lacks, is an oar::Error") {
  Saved s = recurrent_group_model();
  REQUIRE(load_and_run(s).empty());
  const std::string model = read(s.dir / "__model__");
  edit_op(s.dir, ops::Recurrent::type, [](Operator& op) {
    for (SlotArgs& a : op.mutable_outputs())
      if (a.slot == ops::Recurrent::step_scopes.name) a.slot = "step_scopez";
  });
  std::string e = load_and_run(s);
  CAPTURE(e);
  CHECK(e.find("recurrent: output step_scopes is required") != std::string::npos);
  CHECK(e.find("__model__") != std::string::npos);  // the file is named
  write(s.dir / "__model__", model);
  edit_op(s.dir, ops::Recurrent::type, [](Operator& op) { op.set_attr(std::string(ops::Recurrent::step_inputs), std::vector<std::string>{"no_such_input"}); });
  CHECK(load_and_run(s).find("the step block has no variable 'no_such_input'") != std::string::npos);
  fs::remove_all(s.dir);
}

TEST_CASE("damaged files: a while op whose StepScopes names no variable is an oar::Error, not a null dereference") {
  Saved s = dynamic_rnn_model();
  REQUIRE(load_and_run(s).empty());
  edit_op(s.dir, ops::While::type, [](Operator& op) { op.set_output(std::string(ops::While::step_scopes.name), {"nowhere"}); });
  CHECK(load_and_run(s).find("StepScopes 'nowhere' is no variable of the program") != std::string::npos);
  fs::remove_all(s.dir);
}

TEST_CASE("damaged files: a pool2d window of one value is an oar::Error at load") {
  Saved s = conv_model();
  REQUIRE(load_and_run(s).empty());
  edit_op(s.dir, ops::Pool2d::type, [](Operator& op) { op.set_attr(std::string(ops::Pool2d::ksize), std::vector<int32_t>{2}); });
  const std::string e = load_and_run(s);
  CHECK(e.find("ksize") != std::string::npos);
  CHECK(e.find("must be two values >= 1") != std::string::npos);
  fs::remove_all(s.dir);
}

TEST_CASE("damaged files: a __meta__ with a line misspelt, missing, or naming no variable is an oar::Error naming the file") {
  Saved s = conv_model();
  REQUIRE(load_and_run(s).empty());
  const std::string meta = read(s.dir / "__meta__");
  const size_t outputs = meta.find("outputs");
  REQUIRE(outputs != std::string::npos);
  std::string misspelt = meta;
  misspelt.replace(outputs, 7, "outptus");
  write(s.dir / "__meta__", misspelt);
  std::string e = load_and_run(s);
  CHECK(e.find("__meta__' is damaged: line 'outptus") != std::string::npos);
  write(s.dir / "__meta__", meta.substr(0, outputs));  // the outputs and params lines gone
  CHECK(load_and_run(s).find("it must have the lines feeds, outputs and params") != std::string::npos);
  std::string unknown = meta;
  unknown.insert(outputs + 7, " no_such_output");
  write(s.dir / "__meta__", unknown);
  CHECK(load_and_run(s).find("names 'no_such_output', which is no variable of __model__") != std::string::npos);
  fs::remove_all(s.dir);
}

TEST_CASE("damaged files: random changes to every file of a saved model give an oar::Error or a model that runs, never a crash") {
  // Each change is undone before the next. A crash ends the test binary; another exception type fails here.
  int errors = 0, ran = 0;
  std::mt19937_64 rng(2026);
  std::vector<Saved> models;
  for (const Saved& s : {recurrent_group_model(), dynamic_rnn_model(), conv_model()}) {
    models.push_back(s);
    models.push_back(inference_of(s));
  }
  for (const Saved& s : models) {
    REQUIRE(load_and_run(s).empty());
    for (const char* file : {"__model__", "__startup__", "__params__", "__meta__"}) {
      if (!fs::exists(s.dir / file)) continue;  // an inference model has __model__ and __params__
      const std::string good = read(s.dir / file);
      for (int k = 0; k < 40; ++k) {
        std::string bad = damage(good, rng);
        if (rng() % 3 == 0) bad = damage(bad, rng);
        write(s.dir / file, bad);
        try {
          (load_and_run(s).empty() ? ran : errors)++;
        } catch (const std::exception& e) {
          const std::string what = s.dir.filename().string() + "/" + file + ", change " + std::to_string(k) + ": '" + e.what() + "' is no oar::Error";
          FAIL_CHECK(what);
        }
      }
      write(s.dir / file, good);
    }
    fs::remove_all(s.dir);
  }
  MESSAGE(errors << " damaged models refused with an oar::Error, " << ran << " ran");
  CHECK(errors > 300);
}

TEST_CASE("damaged files: one byte flipped in the middle of an inference model's __params__ is an oar::Error naming the file and the tensor") {
  Saved s = conv_model();
  Saved inf = inference_of(s);
  fs::remove_all(s.dir);
  const fs::path params = inf.dir / "__params__";
  const std::string good = read(params), sum = read(inf.dir / "__params__.oarsum");
  // the tensor that holds the middle byte, from the sidecar's lines (name, byte length, crc32)
  std::istringstream lines(sum.substr(sum.find('\n') + 1));
  std::string name, crc;
  size_t len = 0, at = 0;
  while (lines >> name >> len >> crc && at + len <= good.size() / 2) at += len;
  REQUIRE(at + len > good.size() / 2);
  std::string bad = good;
  bad[good.size() / 2] ^= 0x04;
  write(params, bad);
  const std::string e = load_and_run(inf);
  CHECK(e == fmt::format("'{}': tensor '{}' (bytes {}..{}) does not match its checksum in '__params__.oarsum': the file is damaged", params.string(),
                         name, at, at + len));
  // Fluid's layout has no checksum: without the sidecar the damaged weights load and run without a word
  fs::remove(inf.dir / "__params__.oarsum");
  CHECK(load_and_run(inf).empty());
  write(params, good);
  CHECK(load_and_run(inf).empty());
  // the program is checked too
  std::string model = read(inf.dir / "__model__");
  model[model.size() / 2] ^= 0x01;
  write(inf.dir / "__model__", model);
  CHECK(load_and_run(inf).find("'" + (inf.dir / "__model__").string() + "': program '__model__' (bytes 0..") != std::string::npos);
  fs::remove_all(inf.dir);
}

TEST_CASE("damaged files: a string field that is not UTF-8 is one oar::Error naming the field, and libprotobuf prints nothing") {
  Tape t;
  Var x = data("utf8_input", f32, {-1, 3});
  Model m(t.program(mean(fc(x, 2))));
  const fs::path dir = fresh_dir("utf8");
  m.save(dir);
  std::string model = read(dir / "__model__");
  const size_t at = model.find("utf8_input");  // its VarDesc comes first: a block's vars precede its ops
  REQUIRE(at != std::string::npos);
  model[at + 2] = char(0xff);
  model[at + 3] = char(0xfe);
  write(dir / "__model__", model);
  std::string e;
  const std::string printed = stderr_of([&] { e = load_and_run(Saved{dir, {}}); });
  CAPTURE(e);
  CHECK(printed.find("libprotobuf") == std::string::npos);
  CHECK(printed.empty());
  CHECK(e.find("String field 'oar.proto.VarDesc.name' contains invalid UTF-8 data") != std::string::npos);
  CHECK(e.find("while loading program file '" + (dir / "__model__").string() + "'") != std::string::npos);
  CHECK(std::count(e.begin(), e.end(), '\n') == 1);  // the message and the file: one error
  // a ProgramDesc that lacks a required field: libprotobuf's list of them goes into the error too
  write(dir / "__model__", std::string("\x0a\x00\x0a\x02\x08\x00", 6));  // a block without parent_idx
  const std::string missing = stderr_of([&] { e = load_and_run(Saved{dir, {}}); });
  CHECK(missing.empty());
  CHECK(e.find("missing required fields") != std::string::npos);
  fs::remove_all(dir);
}
