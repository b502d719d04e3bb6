// oar/io/dataset.hpp: composable data readers (Paddle's reader creators): in-memory sources, shuffle, batch,
// map, take, prefetch, several epochs, and a cursor (epoch, position) that checkpoints save and restore.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <iterator>
#include <memory>
#include <optional>
#include <vector>

#include "oar/config.hpp"
#include "oar/device/tensor.hpp"

namespace oar::io {

/// One example: one tensor per field, e.g. {image f32 [784], label i64 [1]}. A field that is a sequence is a
/// LoDTensor of its rows with one LoD level ({words i64 [7, 1] lod [[0, 7]]}).
using Sample = std::vector<LoDTensor>;
/// A mini-batch: each plain field stacked along a new first dim, e.g. {image f32 [n, 784], label i64 [n, 1]};
/// each sequence field joined along its rows with the LoD that keeps the sequences apart (no padding):
/// {words i64 [7 + 3 + ..., 1] lod [[0, 7, 10, ...]]}.
using Batch = std::vector<LoDTensor>;

/// Where a reader stands: the epoch it is in and how many items of that epoch it has handed out.
struct ReaderState {
  int64_t epoch = 0;
  int64_t position = 0;
  friend bool operator==(const ReaderState&, const ReaderState&) = default;
};

namespace detail {

/// One pass over a reader's items.
struct ReaderIter {
  virtual ~ReaderIter() = default;
  /// The next item, or nullopt at the end of the pass.
  virtual std::optional<Sample> next() = 0;
  /// Skips up to `n` items without handing them out; returns how many were skipped.
  virtual int64_t skip(int64_t n);
};

/// A factory of passes. `open(e)` starts a fresh pass of epoch `e`; opening the same epoch twice yields the
/// same items in the same order (randomness is seeded from the seed and the epoch only).
struct ReaderSource {
  virtual ~ReaderSource() = default;
  virtual std::unique_ptr<ReaderIter> open(int64_t epoch) const = 0;
};

}  // namespace detail

/// A reader: an immutable pipeline of sources and transforms (shared by copies), plus a cursor.
///
/// Each range-for runs the rest of the current epoch; when an epoch is exhausted the cursor moves to the
/// next epoch, so `for (int pass = 0; pass < 5; ++pass) for (auto& batch : reader) ...` runs 5 epochs.
/// Breaking out of a loop keeps the cursor (and the open pass): the next loop continues where it stopped.
/// `state()` / `restore()` save and restore the cursor; a restored reader with the same pipeline yields
/// exactly the items an uninterrupted run would have yielded from that point.
///
///   auto train = oar::io::fashion_mnist_train().shuffle(8192, 42).batch(64).prefetch(4);
///   for (int pass = 0; pass < 10; ++pass)
///     for (auto& batch : train) exe.run(prog, {{"img", batch[0]}, {"label", batch[1]}});
///
/// Transforms (shuffle, batch, ...) return a new reader whose cursor starts at (0, 0).
/// A Reader is not thread-safe; `prefetch` runs its upstream on a thread of its own.
class Reader {
 public:
  using Generator = std::function<std::optional<Sample>()>;

  Reader() = default;
  explicit Reader(std::shared_ptr<const detail::ReaderSource> source);
  /// Copies share the pipeline and copy the cursor; the open pass is not copied (it reopens at the cursor).
  Reader(const Reader& o);
  Reader& operator=(const Reader& o);
  Reader(Reader&&) noexcept = default;
  Reader& operator=(Reader&& o) noexcept;
  ~Reader();

  // ---- sources

  /// A reader over `samples` in order (shared, never copied again).
  ///   auto r = Reader::from_samples({{Tensor::from({1.f, 2.f}), Tensor::from<int64_t>({0})}});
  static Reader from_samples(std::vector<Sample> samples);
  /// A reader whose item i is row i of every field: fields [N, ...] -> samples {field_0[i], ...} of shapes
  /// [...] (views, no copy). x [N, 13], y [N, 1] -> samples {x [13], y [1]}. A field with a LoD gives its
  /// top-level sequence i instead (LoDTensor::sequence: its rows, one LoD level more than it has below):
  ///   auto words = oar::LoDTensor::from_lengths(ids, {{7, 3, 12}});   // ids i64 [22, 1]: 3 sentences
  ///   auto r = Reader::from_tensors({words, labels}).batch(2);         // labels i64 [3, 1]
  /// yields {words [10, 1] lod [[0, 7, 10]], labels [2, 1]}, then {words [12, 1] lod [[0, 12]], labels [1, 1]}.
  static Reader from_tensors(std::vector<LoDTensor> fields);
  /// A reader over `size` items made on demand by `get(i)` (a random-access dataset).
  static Reader from_indexed(int64_t size, std::function<Sample(int64_t)> get);
  /// A reader from a creator, like Paddle's: `creator(epoch)` returns a generator that yields the items of
  /// that epoch and then nullopt. It must yield the same items when called again with the same epoch.
  static Reader from_creator(std::function<Generator(int64_t epoch)> creator);

  // ---- transforms (each returns a new reader at cursor (0, 0))

  /// Paddle's reader.shuffle: fill a buffer of `buffer` items, shuffle it, hand it out, repeat.
  /// Deterministic: the order depends on (seed, epoch) only, and differs from epoch to epoch (seed 0 is a
  /// fixed seed too: pass another to get another order).
  Reader shuffle(int64_t buffer, uint64_t seed = 0) const;
  /// Groups `n` consecutive items and stacks each field: field [d...] -> [n, d...] (a scalar field -> [n]).
  /// A field with a LoD (a sequence) is joined instead: rows concatenated, the items' LoD levels joined
  /// (sequences of lengths 7 and 3 -> rows [10, ...], LoD [[0, 7, 10]]), so ragged batches need no padding.
  /// The last batch holds the rest (fewer than n) unless `drop_last`. Fields must agree in dtype, in shape
  /// (a sequence field: in all dims but the first) and in LoD levels.
  Reader batch(int64_t n, bool drop_last = false) const;
  /// Applies `f` to every item. `f` must be a pure function of its item: skipping (on restore) does not call it.
  /// Items may share storage with the source (from_samples, from_tensors): an `f` that writes must clone first.
  Reader map(std::function<Sample(Sample)> f) const;
  /// The first `n` items of every epoch.
  Reader take(int64_t n) const;
  /// Rank `rank`'s part of every epoch, for data-parallel training over `world` ranks: items rank,
  /// rank + world, rank + 2 world, ... The ranks' parts are disjoint, and together they are the epoch, but for
  /// its last (size % world) items, which no rank gets, so that every rank takes the same number of steps.
  /// Put it after shuffle() (every rank shuffles alike) and before batch(): with batches of B / world,
  /// step k of the ranks together covers items [k B, (k + 1) B) of the epoch, as batch(B) in one process does.
  Reader shard(int64_t rank, int64_t world) const;
  /// Runs the upstream on a background thread that keeps up to `k` items ready. The items and their order
  /// are unchanged; an exception in the upstream is rethrown by the consumer when it reaches that point.
  /// Destroying the reader mid-epoch stops and joins the thread.
  Reader prefetch(int64_t k) const;
  /// Each item's tensors copied into page-locked memory (Tensor::pin_memory): a model on a GPU is then fed by
  /// DMA. Put it after batch() and before prefetch(), so the copy runs on the prefetching thread. Without a
  /// CUDA device the items pass unchanged.
  Reader pin_memory() const;

  // ---- iteration and cursor

  /// The next item of the current epoch, or nullopt when the epoch is exhausted (the cursor then moves to
  /// the start of the next epoch, and the following call starts it). When an item's production throws,
  /// the exception propagates, the position stays before that item, and the open pass is left as it is
  /// (a prefetching pass rethrows on every later call): call restore() to go on from a known state.
  std::optional<Sample> next();
  /// Skips up to `n` items of the current epoch; returns how many were skipped.
  int64_t skip(int64_t n);
  int64_t epoch() const { return epoch_; }
  /// Items of the current epoch handed out (or skipped) so far.
  int64_t position() const { return position_; }
  ReaderState state() const { return {epoch_, position_}; }
  /// Moves the cursor; the next item is item `s.position` of epoch `s.epoch`.
  void restore(ReaderState s);
  /// restore({0, 0}).
  void reset() { restore({}); }
  /// Whether the reader has a pipeline (a default-constructed reader has none).
  explicit operator bool() const { return source_ != nullptr; }

  class iterator {
   public:
    using value_type = Sample;
    using difference_type = std::ptrdiff_t;
    iterator() = default;
    Sample& operator*() const { return *cur_; }
    Sample* operator->() const { return &*cur_; }
    iterator& operator++() {
      cur_ = r_->next();
      return *this;
    }
    void operator++(int) { ++*this; }
    friend bool operator==(const iterator& it, std::default_sentinel_t) { return !it.cur_; }

   private:
    friend class Reader;
    explicit iterator(Reader* r) : r_(r), cur_(r->next()) {}
    Reader* r_ = nullptr;
    mutable std::optional<Sample> cur_;
  };
  /// Starts (or continues) the current epoch.
  iterator begin() { return iterator(this); }
  std::default_sentinel_t end() const { return {}; }

  const std::shared_ptr<const detail::ReaderSource>& source() const { return source_; }

 private:
  void open_live();
  std::shared_ptr<const detail::ReaderSource> source_;
  int64_t epoch_ = 0;
  int64_t position_ = 0;
  std::unique_ptr<detail::ReaderIter> live_;  ///< the open pass, at (epoch_, position_)
};

/// Stacks samples field by field: n samples with field j of shape [d...] -> tensor [n, d...]; a field with a
/// LoD is joined along its rows with the joined LoD (Reader::batch). oar::Error when a field's shape, dtype or
/// LoD levels differ between samples, or the samples have different field counts.
Batch stack_samples(const std::vector<Sample>& samples);

}  // namespace oar::io

#if OAR_HEADER_ONLY
#include "oar/io/dataset-inl.hpp"
#endif
