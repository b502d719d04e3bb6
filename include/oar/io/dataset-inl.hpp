// oar/io/dataset-inl.hpp: the implementation of dataset.hpp (included by it when header-only; compiled once into liboar otherwise).
#pragma once
#include "oar/io/dataset.hpp"

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <mutex>
#include <random>
#include <thread>

#include "oar/core/error.hpp"

namespace oar::io {

namespace detail {

OAR_FUNC int64_t ReaderIter::skip(int64_t n) {
  int64_t k = 0;
  while (k < n && next()) ++k;
  return k;
}

/// splitmix64: turns (seed, epoch) into well-mixed 64-bit seeds.
inline uint64_t mix_seed(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/// A uniform integer in [0, n) from mt19937_64 (whose output the standard fixes), by rejection, so the
/// shuffle order is the same on every standard library.
inline uint64_t uniform_below(std::mt19937_64& rng, uint64_t n) {
  uint64_t limit = UINT64_MAX - UINT64_MAX % n;
  uint64_t x;
  do x = rng(); while (x >= limit);
  return x % n;
}

/// Fisher-Yates over [0, n): the permutation a shuffle buffer of n items gets.
inline std::vector<uint32_t> shuffle_permutation(std::mt19937_64& rng, size_t n) {
  std::vector<uint32_t> p(n);
  for (size_t i = 0; i < n; ++i) p[i] = uint32_t(i);
  for (size_t i = n; i > 1; --i) std::swap(p[i - 1], p[uniform_below(rng, i)]);
  return p;
}

struct IndexedSource final : ReaderSource {
  int64_t size;
  std::function<Sample(int64_t)> get;
  IndexedSource(int64_t n, std::function<Sample(int64_t)> g) : size(n), get(std::move(g)) {}
  struct Iter final : ReaderIter {
    const IndexedSource* src;
    int64_t i = 0;
    std::optional<Sample> next() override {
      if (i >= src->size) return std::nullopt;
      return src->get(i++);
    }
    int64_t skip(int64_t n) override {
      int64_t k = std::min(n, src->size - i);
      i += k;
      return k;
    }
  };
  std::unique_ptr<ReaderIter> open(int64_t) const override {
    auto it = std::make_unique<Iter>();
    it->src = this;
    return it;
  }
};

struct CreatorSource final : ReaderSource {
  std::function<Reader::Generator(int64_t)> creator;
  struct Iter final : ReaderIter {
    Reader::Generator gen;
    bool done = false;
    std::optional<Sample> next() override {
      if (done) return std::nullopt;
      auto s = gen();
      if (!s) done = true;
      return s;
    }
  };
  std::unique_ptr<ReaderIter> open(int64_t epoch) const override {
    auto it = std::make_unique<Iter>();
    it->gen = creator(epoch);
    OAR_CHECK(bool(it->gen), "Reader::from_creator: the creator returned an empty generator for epoch {}", epoch);
    return it;
  }
};

/// A transform: holds its upstream source alive.
struct UpstreamSource : ReaderSource {
  std::shared_ptr<const ReaderSource> up;
};

struct ShuffleSource final : UpstreamSource {
  int64_t buffer = 1;
  uint64_t seed = 0;
  struct Iter final : ReaderIter {
    std::unique_ptr<ReaderIter> up;
    int64_t buffer = 1;
    std::mt19937_64 rng;
    std::vector<Sample> buf;  ///< the current block, in hand-out order
    size_t pos = 0;
    bool up_done = false;
    bool refill() {
      buf.clear();
      pos = 0;
      if (up_done) return false;
      std::vector<Sample> raw;
      raw.reserve(size_t(std::min<int64_t>(buffer, 1 << 16)));
      while (int64_t(raw.size()) < buffer) {
        auto s = up->next();
        if (!s) {
          up_done = true;
          break;
        }
        raw.push_back(std::move(*s));
      }
      auto perm = shuffle_permutation(rng, raw.size());
      buf.reserve(raw.size());
      for (uint32_t j : perm) buf.push_back(std::move(raw[j]));
      return !buf.empty();
    }
    std::optional<Sample> next() override {
      if (pos == buf.size() && !refill()) return std::nullopt;
      return std::move(buf[pos++]);
    }
    int64_t skip(int64_t n) override {
      int64_t k = std::min<int64_t>(n, int64_t(buf.size() - pos));
      pos += size_t(k);
      // Whole blocks: skip them upstream and draw (and drop) their permutation, so the generator stays
      // where an uninterrupted pass would have it.
      while (n - k >= buffer && !up_done) {
        int64_t got = up->skip(buffer);
        if (got < buffer) up_done = true;
        shuffle_permutation(rng, size_t(got));
        k += got;
      }
      while (k < n && next()) ++k;
      return k;
    }
  };
  std::unique_ptr<ReaderIter> open(int64_t epoch) const override {
    auto it = std::make_unique<Iter>();
    it->up = up->open(epoch);
    it->buffer = buffer;
    it->rng.seed(mix_seed(mix_seed(seed) ^ uint64_t(epoch)));
    return it;
  }
};

struct BatchSource final : UpstreamSource {
  int64_t n = 1;
  bool drop_last = false;
  struct Iter final : ReaderIter {
    std::unique_ptr<ReaderIter> up;
    int64_t n = 1;
    bool drop_last = false;
    bool done = false;
    std::optional<Sample> next() override {
      if (done) return std::nullopt;
      std::vector<Sample> items;
      items.reserve(size_t(n));
      while (int64_t(items.size()) < n) {
        auto s = up->next();
        if (!s) {
          done = true;
          break;
        }
        items.push_back(std::move(*s));
      }
      if (items.empty() || (drop_last && int64_t(items.size()) < n)) {
        done = true;
        return std::nullopt;
      }
      return stack_samples(items);
    }
    int64_t skip(int64_t k) override {
      if (done || k <= 0) return 0;
      int64_t got = up->skip(k * n);
      if (got < k * n) done = true;
      return got / n + (!drop_last && got % n != 0 ? 1 : 0);
    }
  };
  std::unique_ptr<ReaderIter> open(int64_t epoch) const override {
    auto it = std::make_unique<Iter>();
    it->up = up->open(epoch);
    it->n = n;
    it->drop_last = drop_last;
    return it;
  }
};

struct MapSource final : UpstreamSource {
  std::function<Sample(Sample)> f;
  struct Iter final : ReaderIter {
    std::unique_ptr<ReaderIter> up;
    const std::function<Sample(Sample)>* f;
    std::optional<Sample> next() override {
      auto s = up->next();
      if (!s) return s;
      return (*f)(std::move(*s));
    }
    int64_t skip(int64_t n) override { return up->skip(n); }
  };
  std::unique_ptr<ReaderIter> open(int64_t epoch) const override {
    auto it = std::make_unique<Iter>();
    it->up = up->open(epoch);
    it->f = &f;
    return it;
  }
};

struct TakeSource final : UpstreamSource {
  int64_t n = 0;
  struct Iter final : ReaderIter {
    std::unique_ptr<ReaderIter> up;
    int64_t left = 0;
    std::optional<Sample> next() override {
      if (left <= 0) return std::nullopt;
      auto s = up->next();
      left = s ? left - 1 : 0;
      return s;
    }
    int64_t skip(int64_t k) override {
      int64_t got = up->skip(std::min(k, left));
      left = got < std::min(k, left) ? 0 : left - got;
      return got;
    }
  };
  std::unique_ptr<ReaderIter> open(int64_t epoch) const override {
    auto it = std::make_unique<Iter>();
    it->up = up->open(epoch);
    it->left = n;
    return it;
  }
};

struct ShardSource final : UpstreamSource {
  int64_t rank = 0, world = 1;
  struct Iter final : ReaderIter {
    std::unique_ptr<ReaderIter> up;
    int64_t rank = 0, world = 1;
    bool ended = false;
    // Item rank of each group of `world`; a last group shorter than `world` is nobody's, so that every rank
    // gets as many items (and takes as many steps) as the others.
    std::optional<Sample> next() override {
      if (ended) return std::nullopt;
      std::optional<Sample> s;
      if (up->skip(rank) == rank) s = up->next();
      if (!s || up->skip(world - rank - 1) != world - rank - 1) {
        ended = true;
        return std::nullopt;
      }
      return s;
    }
    int64_t skip(int64_t k) override {
      if (ended) return 0;
      const int64_t got = up->skip(k * world);
      if (got < k * world) ended = true;
      return got / world;
    }
  };
  std::unique_ptr<ReaderIter> open(int64_t epoch) const override {
    auto it = std::make_unique<Iter>();
    it->up = up->open(epoch);
    it->rank = rank;
    it->world = world;
    return it;
  }
};

struct PrefetchSource final : UpstreamSource {
  int64_t k = 1;
  /// The producer thread starts on the first next(); skips before that go straight to the upstream.
  struct Iter final : ReaderIter {
    std::unique_ptr<ReaderIter> up;
    size_t cap = 1;
    std::mutex m;
    std::condition_variable not_empty, not_full;
    std::deque<Sample> q;
    bool done = false, stop = false;
    std::exception_ptr error;
    std::thread worker;

    ~Iter() override {
      {
        std::lock_guard lock(m);
        stop = true;
      }
      not_full.notify_all();
      if (worker.joinable()) worker.join();
    }
    void produce() {
      try {
        for (;;) {
          {
            std::unique_lock lock(m);
            not_full.wait(lock, [&] { return stop || q.size() < cap; });
            if (stop) return;
          }
          auto s = up->next();
          std::lock_guard lock(m);
          if (!s) break;
          q.push_back(std::move(*s));
          not_empty.notify_one();
        }
      } catch (...) {
        std::lock_guard lock(m);
        error = std::current_exception();
      }
      std::lock_guard lock(m);
      done = true;
      not_empty.notify_all();
    }
    std::optional<Sample> next() override {
      if (!worker.joinable()) worker = std::thread([this] { produce(); });
      std::unique_lock lock(m);
      not_empty.wait(lock, [&] { return !q.empty() || done; });
      if (!q.empty()) {
        Sample s = std::move(q.front());
        q.pop_front();
        not_full.notify_one();
        return s;
      }
      if (error) std::rethrow_exception(error);
      return std::nullopt;
    }
    int64_t skip(int64_t n) override {
      if (!worker.joinable()) return up->skip(n);
      return ReaderIter::skip(n);
    }
  };
  std::unique_ptr<ReaderIter> open(int64_t epoch) const override {
    auto it = std::make_unique<Iter>();
    it->up = up->open(epoch);
    it->cap = size_t(k);
    return it;
  }
};

template <class S>
std::shared_ptr<S> make_transform(const std::shared_ptr<const ReaderSource>& up, const char* what) {
  OAR_CHECK(up != nullptr, "Reader::{} on an empty reader", what);
  auto s = std::make_shared<S>();
  s->up = up;
  return s;
}

}  // namespace detail

namespace detail {

/// Field j of every sample joined along the rows, their LoD levels joined (offsets of each item shifted by
/// the entries before it).
inline LoDTensor join_sequences(const std::vector<Sample>& samples, size_t j) {
  const LoDTensor& first = samples[0][j];
  const size_t levels = first.lod().size();
  int64_t rows = 0;
  for (size_t i = 0; i < samples.size(); ++i) {
    const LoDTensor& x = samples[i][j];
    OAR_CHECK(x.initialized() && x.rank() >= 1 && x.dtype() == first.dtype() && x.lod().size() == levels &&
                  x.shape().slice(1, x.rank()) == first.shape().slice(1, first.rank()),
              "batch: field {} of sample {} is {} {} with {} LoD level(s), but sample 0 has {} {} with {} (a sequence field may differ only in its "
              "first dim)",
              j, i, x.initialized() ? name(x.dtype()) : "empty", x.shape().str(), x.lod().size(), name(first.dtype()), first.shape().str(), levels);
    OAR_CHECK(x.place().is_cpu(), "batch: field {} of sample {} is on {}, not the CPU", j, i, x.place().str());
    rows += x.dim(0);
  }
  Shape shape = first.shape();
  shape[0] = rows;
  Tensor t(shape, first.dtype());
  LoD lod(levels, std::vector<size_t>{0});
  auto* dst = static_cast<char*>(t.raw());
  for (const Sample& s : samples) {
    const LoDTensor& x = s[j];
    if (x.bytes()) std::memcpy(dst, x.raw(), x.bytes());
    dst += x.bytes();
    for (size_t l = 0; l < levels; ++l) {
      const size_t base = lod[l].back();
      for (size_t k = 1; k < x.lod()[l].size(); ++k) lod[l].push_back(base + x.lod()[l][k]);
    }
  }
  return LoDTensor(std::move(t), std::move(lod));
}

}  // namespace detail

OAR_FUNC Batch stack_samples(const std::vector<Sample>& samples) {
  OAR_CHECK(!samples.empty(), "batch: no samples to stack");
  const size_t fields = samples[0].size();
  const int64_t n = int64_t(samples.size());
  for (size_t i = 0; i < samples.size(); ++i)
    OAR_CHECK(samples[i].size() == fields, "batch: sample {} has {} fields, sample 0 has {}", i, samples[i].size(), fields);
  Batch out(fields);
  for (size_t j = 0; j < fields; ++j) {
    const LoDTensor& first = samples[0][j];
    OAR_CHECK(first.initialized(), "batch: field {} of sample 0 is an empty tensor", j);
    if (!first.lod().empty()) {
      out[j] = detail::join_sequences(samples, j);
      continue;
    }
    Shape shape = first.shape();
    shape.insert(0, n);
    Tensor t(shape, first.dtype());
    const size_t row = first.bytes();
    auto* dst = static_cast<char*>(t.raw());
    for (int64_t i = 0; i < n; ++i) {
      const LoDTensor& x = samples[size_t(i)][j];
      OAR_CHECK(x.initialized() && x.shape() == first.shape() && x.dtype() == first.dtype() && x.lod().empty(),
                "batch: field {} of sample {} is {} {}{}, but sample 0 has {} {}", j, i, x.initialized() ? name(x.dtype()) : "empty",
                x.shape().str(), x.lod().empty() ? "" : " with a LoD", name(first.dtype()), first.shape().str());
      OAR_CHECK(x.place().is_cpu(), "batch: field {} of sample {} is on {}, not the CPU", j, i, x.place().str());
      if (row) std::memcpy(dst + size_t(i) * row, x.raw(), row);
    }
    out[j] = std::move(t);
  }
  return out;
}

OAR_FUNC Reader::Reader(std::shared_ptr<const detail::ReaderSource> source) : source_(std::move(source)) {}

OAR_FUNC Reader::Reader(const Reader& o) : source_(o.source_), epoch_(o.epoch_), position_(o.position_) {}

OAR_FUNC Reader& Reader::operator=(const Reader& o) {
  if (this != &o) {
    live_.reset();
    source_ = o.source_;
    epoch_ = o.epoch_;
    position_ = o.position_;
  }
  return *this;
}

OAR_FUNC Reader& Reader::operator=(Reader&& o) noexcept {
  if (this != &o) {
    live_.reset();  // before the source it points into
    source_ = std::move(o.source_);
    epoch_ = o.epoch_;
    position_ = o.position_;
    live_ = std::move(o.live_);
  }
  return *this;
}

OAR_FUNC Reader::~Reader() { live_.reset(); }

OAR_FUNC Reader Reader::from_samples(std::vector<Sample> samples) {
  auto data = std::make_shared<const std::vector<Sample>>(std::move(samples));
  int64_t n = int64_t(data->size());
  return from_indexed(n, [data](int64_t i) { return (*data)[size_t(i)]; });
}

OAR_FUNC Reader Reader::from_tensors(std::vector<LoDTensor> fields) {
  OAR_CHECK(!fields.empty(), "Reader::from_tensors: no fields");
  int64_t n = -1;
  for (size_t j = 0; j < fields.size(); ++j) {
    const LoDTensor& f = fields[j];
    OAR_CHECK(f.initialized() && f.rank() >= 1, "Reader::from_tensors: field {} must be a tensor of rank >= 1, got {}", j, f.shape().str());
    const int64_t items = f.lod().empty() ? f.dim(0) : int64_t(f.num_sequences());
    OAR_CHECK(n < 0 || items == n, "Reader::from_tensors: field {} has {} {}, field 0 has {}", j, items, f.lod().empty() ? "rows" : "sequences", n);
    n = items;
  }
  auto data = std::make_shared<const std::vector<LoDTensor>>(std::move(fields));
  return from_indexed(n, [data](int64_t i) {
    Sample s;
    s.reserve(data->size());
    for (const LoDTensor& f : *data) {
      if (!f.lod().empty()) {
        s.push_back(f.sequence(size_t(i)));
        continue;
      }
      Shape row = f.shape().slice(1, f.rank());
      s.push_back(f.slice(i, i + 1).view(row));
    }
    return s;
  });
}

OAR_FUNC Reader Reader::from_indexed(int64_t size, std::function<Sample(int64_t)> get) {
  OAR_CHECK(size >= 0 && get, "Reader::from_indexed: needs a size >= 0 (got {}) and a function", size);
  return Reader(std::make_shared<detail::IndexedSource>(size, std::move(get)));
}

OAR_FUNC Reader Reader::from_creator(std::function<Generator(int64_t)> creator) {
  OAR_CHECK(bool(creator), "Reader::from_creator: empty creator");
  auto s = std::make_shared<detail::CreatorSource>();
  s->creator = std::move(creator);
  return Reader(std::move(s));
}

OAR_FUNC Reader Reader::shuffle(int64_t buffer, uint64_t seed) const {
  OAR_CHECK(buffer >= 1 && buffer <= int64_t(UINT32_MAX), "Reader::shuffle: buffer size {} must be in [1, 2^32)", buffer);
  auto s = detail::make_transform<detail::ShuffleSource>(source_, "shuffle");
  s->buffer = buffer;
  s->seed = seed;
  return Reader(std::move(s));
}

OAR_FUNC Reader Reader::batch(int64_t n, bool drop_last) const {
  OAR_CHECK(n >= 1, "Reader::batch: batch size {} must be >= 1", n);
  auto s = detail::make_transform<detail::BatchSource>(source_, "batch");
  s->n = n;
  s->drop_last = drop_last;
  return Reader(std::move(s));
}

OAR_FUNC Reader Reader::map(std::function<Sample(Sample)> f) const {
  OAR_CHECK(bool(f), "Reader::map: empty function");
  auto s = detail::make_transform<detail::MapSource>(source_, "map");
  s->f = std::move(f);
  return Reader(std::move(s));
}

OAR_FUNC Reader Reader::pin_memory() const {
  if (&pinned_allocator() == &allocator(cpu())) return *this;
  return map([](Sample s) {
    for (LoDTensor& t : s)
      if (t.initialized() && t.place().is_cpu() && t.bytes() > 0) t = LoDTensor(t.pin_memory(), t.lod());
    return s;
  });
}

OAR_FUNC Reader Reader::take(int64_t n) const {
  OAR_CHECK(n >= 0, "Reader::take: count {} must be >= 0", n);
  auto s = detail::make_transform<detail::TakeSource>(source_, "take");
  s->n = n;
  return Reader(std::move(s));
}

OAR_FUNC Reader Reader::shard(int64_t rank, int64_t world) const {
  OAR_CHECK(world >= 1 && rank >= 0 && rank < world, "Reader::shard: rank {} of world {}: need 0 <= rank < world", rank, world);
  if (world == 1) return *this;
  auto s = detail::make_transform<detail::ShardSource>(source_, "shard");
  s->rank = rank;
  s->world = world;
  return Reader(std::move(s));
}

OAR_FUNC Reader Reader::prefetch(int64_t k) const {
  OAR_CHECK(k >= 1, "Reader::prefetch: queue size {} must be >= 1", k);
  auto s = detail::make_transform<detail::PrefetchSource>(source_, "prefetch");
  s->k = k;
  return Reader(std::move(s));
}

OAR_FUNC void Reader::open_live() {
  OAR_CHECK(source_ != nullptr, "Reader: iterating an empty reader");
  auto it = source_->open(epoch_);
  // NOTE: the iterators point into their sources; the Reader keeps the source alive as long as `live_`.
  if (position_ > 0) it->skip(position_);
  live_ = std::move(it);
}

OAR_FUNC std::optional<Sample> Reader::next() {
  if (!live_) open_live();
  auto s = live_->next();
  if (s) {
    ++position_;
  } else {
    live_.reset();
    ++epoch_;
    position_ = 0;
  }
  return s;
}

OAR_FUNC int64_t Reader::skip(int64_t n) {
  OAR_CHECK(n >= 0, "Reader::skip: count {} must be >= 0", n);
  if (!live_) open_live();
  int64_t k = live_->skip(n);
  position_ += k;
  return k;
}

OAR_FUNC void Reader::restore(ReaderState s) {
  OAR_CHECK(s.epoch >= 0 && s.position >= 0, "Reader::restore: epoch {} and position {} must be >= 0", s.epoch, s.position);
  live_.reset();
  epoch_ = s.epoch;
  position_ = s.position;
}

}  // namespace oar::io
