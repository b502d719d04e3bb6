// tests/fuzz/lod.cpp: a fed tensor's LoD. The input picks the rows and the offsets of one or two LoD levels;
// the tensor is fed to a model that pools each sequence (sum and max). A bad LoD must be an oar::Error; a good
// one must give one row per last-level sequence, the sums equal to a plain loop's.
#include <oar/oar.hpp>

#include <cmath>
#include <memory>

#include "tests/fuzz/fuzz.hpp"

namespace {

constexpr int64_t kWidth = 3;

struct Net {
  std::unique_ptr<oar::Model> model;
  std::unique_ptr<oar::Evaluator> eval;
  std::string x, sum, max;
};

Net& net() {
  static Net n = [] {
    Net r;
    oar::Tape tape;
    auto x = oar::data("x", oar::f32, {-1, kWidth}).lod_level(1);
    auto sum = oar::sequence_pool(x, oar::SequencePoolType::sum);
    auto max = oar::sequence_pool(x, oar::SequencePoolType::max);
    r.model = std::make_unique<oar::Model>(tape.program({sum, max}), 1);
    r.eval = std::make_unique<oar::Evaluator>(*r.model, std::initializer_list<oar::Var>{sum, max});
    const auto names = r.model->names_of({x, sum, max});
    r.x = names[0], r.sum = names[1], r.max = names[2];
    return r;
  }();
  return n;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const int64_t rows = data[0] % 64;
  const int levels = 1 + data[1] % 2;
  oar::LoD lod(static_cast<size_t>(levels));
  size_t k = 2;  // the rest: offsets, a 0xff byte ending a level
  for (int l = 0; l < levels; ++l)
    for (; k < size && data[k] != 0xff; ++k) lod[size_t(l)].push_back(data[k]);
  std::vector<float> v(size_t(rows * kWidth));
  for (size_t i = 0; i < v.size(); ++i) v[i] = float(int64_t(i * 37 % 11) - 5);
  return oar::fuzz::guarded([&] {
    oar::LoDTensor x(oar::Tensor::from<float>(v, oar::Shape{rows, kWidth}), lod);
    auto out = net().eval->forward(oar::FeedMap{{net().x, x}});
    const auto& off = x.lod().back();
    const int64_t seqs = int64_t(off.size()) - 1;
    if (out[0].dim(0) != seqs || out[1].dim(0) != seqs) std::abort();  // one row per last-level sequence
    for (int64_t s = 0; s < seqs; ++s)
      for (int64_t j = 0; j < kWidth; ++j) {
        double want = 0;
        for (size_t r = off[size_t(s)]; r < off[size_t(s) + 1]; ++r) want += v[r * kWidth + size_t(j)];
        if (std::abs(out[0].get(s * kWidth + j) - want) > 1e-4) std::abort();
      }
  });
}
