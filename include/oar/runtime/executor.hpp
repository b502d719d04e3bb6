// oar/runtime/executor.hpp: runs a block of a Program against a Scope, as Fluid's Executor does: persistable
// variables live in the given scope, the others in a child scope; feeds go in by name, fetches come out.
// `prepare` does op lookup, kernel choice and slot resolution once; later runs reuse buffers.
#pragma once
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "oar/config.hpp"
#include "oar/device/cuda.hpp"
#include "oar/device/kernel_context.hpp"
#include "oar/ops/op.hpp"
#include "oar/runtime/kernel_registry.hpp"

namespace oar {

using FeedMap = std::map<std::string, LoDTensor>;

class Executor;

/// How a block is prepared.
struct PrepareOptions {
  /// The block may not write a persistable variable (a parameter, a running statistic): what an Evaluator
  /// runs, so that any number of them can share one model's scope from several threads. Checked at prepare.
  bool read_only_persistables = false;
};

/// A block ready to run: kernels chosen, slots resolved, temporaries kept between runs.
class PreparedBlock {
 public:
  const Program& program() const { return *program_; }
  int block() const { return block_; }
  const std::vector<std::string>& required_feeds() const { return required_feeds_; }
  Scope* local_scope() const { return local_; }

  /// Turns on buffer recycling by a liveness plan: the storage of a temporary goes back to a free list after
  /// the last op that reads it, and the next temporary an op writes takes the best-fitting free buffer, so
  /// the block's peak memory is that of the tensors alive at one time rather than of all of them, and a
  /// repeated run with the same shapes still allocates nothing. Only the fetched variables and those named in
  /// `keep` keep their values after a run (fed, persistable and outer-scope variables are never touched).
  void recycle_buffers(std::set<std::string> keep);
  /// Bytes held by the free list (buffers of dead temporaries waiting for the next run).
  size_t free_bytes() const;

 private:
  friend class Executor;
  /// What a recurrent, while or grad op of them keeps between runs (prepared on its first run): the step block
  /// (or its grad block) prepared in each step's scope, the names it moves values through, and the batch layout.
  struct Loop {
    int block = -1;
    std::vector<std::string> step_inputs, step_outputs, ex_states, states, output_seeds, state_seeds, parameter_grads;
    std::string condition;              // while: the body's next condition
    std::vector<const Value*> current;  // while: the loop variables' values (kept to allocate nothing per run)
    std::vector<int32_t> boot_states;
    std::vector<std::shared_ptr<PreparedBlock>> steps;  // step t's block, in its own scope
    std::vector<int64_t> start, order, active;          // each sequence's first row; sequences longest first; k_t
    std::vector<int64_t> step_rows;  // recurrent on a GPU: step t's rows in the sequences, t after t, then `order`
    Tensor step_rows_device;         // the same on the device, uploaded once per run
  };
  struct Step {
    const Operator* op;
    KernelFn fn = nullptr;
    std::shared_ptr<const void> attrs;  // the op's decoded Attrs, which ctx points to
    KernelContext ctx;
    std::vector<int> acquire, release;  // indices into slots_: temporaries first written / last used here
    RunBy run_by = RunBy::kernel;        // the op's OpDef::run_by
    std::shared_ptr<PreparedBlock> sub;  // a control-flow op's sub-block, prepared on first use
    std::shared_ptr<Loop> loop;          // recurrent / recurrent_grad
    GroupFn group_fn = nullptr;          // set on the first op of a group run as one (KernelEntry::cuda_group)
    std::vector<KernelContext*> group;   // the group's contexts, this op's first
    bool grouped = false;                // a later op of a group: its first op's group_fn runs it
    // Outputs the kernel made views of an input (reshape), found after its first run: without buffer recycling
    // they let go of their storage when a run starts, so that the tensor they view is rewritten in place
    // instead of reallocated because the last run's view still holds it.
    std::vector<Value*> views;
    bool views_known = false;
  };
  struct Temp {
    Value* value;
    const Variable* var;
    size_t bytes = 0;  // the storage it held when it died last run: what it will need next run
    const Storage* lent = nullptr;  // the free buffer acquire() gave it this run
    bool view = false;  // its op makes it a view of another tensor (reshape): lending it a buffer only loses it
  };

  /// Fills the steps' acquire / release lists from first writes and last uses (a no-op unless recycling),
  /// then groups the steps again where they were grouped.
  void plan();
  void plan_buffers();
  /// After step `s`'s kernel: a temporary whose lent buffer the kernel replaced by a view of another tensor is
  /// lent nothing from now on (the buffer went with the replacement).
  void settle(const Step& s);
  void find_views(size_t i);
  /// Joins runs of consecutive steps whose op has a group kernel on `place`, the same type and equal
  /// attributes, and no temporaries to acquire or release, into one call of that kernel.
  void group(const Place& place);
  bool grouping_ = false;  // group() ran for a GPU: plan() redoes it, since a temporary's acquire or release splits a run

  /// Bytes a temporary will need: what it held last run, or on the first run its declared shape with the
  /// unknown dims (-1) taken as `batch` (a guess: a kernel whose output is larger simply allocates).
  size_t expected_bytes(const Temp& sl, int64_t batch) const;
  /// Before a step: its new temporaries take the smallest free buffer that holds what they need.
  void acquire(const Step& s, int64_t batch);
  /// Before a run: the temporaries still holding storage (last run's fetches) give it back, unless the caller
  /// still holds those tensors.
  void reclaim();
  /// Every tensor of the block whose storage is one of `blocks` (allocated in a capture given up) lets go of
  /// it, and so does the free list.
  void drop_storage(const std::vector<void*>& blocks);
  /// After a step: the temporaries it used last give their storage back (unless fetched).
  void release(const Step& s, const std::vector<const Value*>& fetched);
  /// Takes a temporary's storage (remembering its size for the next run) into the free list; storage that
  /// another tensor still shares (a view, a caller's fetch) is only let go.
  void give_back(Temp& sl);
  std::shared_ptr<const Program> program_;
  int block_ = 0;
  Scope* scope_ = nullptr;  // the scope the steps are resolved in
  Scope* local_ = nullptr;  // child of scope_ holding temporaries
  std::vector<Step> steps_;
  std::vector<std::string> required_feeds_;
  std::set<std::string> fed_by_op_;  // targets of the program's own feed ops
  PrepareOptions options_;
  bool recycle_ = false;
  std::set<std::string> keep_;
  std::vector<Temp> slots_;
  std::vector<std::shared_ptr<Storage>> free_;
  std::vector<const Value*> fetched_;
  std::vector<Value*> arrays_;  // the temporaries that are tensor arrays: emptied at the start of every run
  std::set<const Value*> shared_feeds_;  // feeds holding the caller's storage (fed on this place): never copied into
  /// The block as a CUDA graph (set_cuda_graphs): captured after two runs in which every tensor its ops touch
  /// kept its shape and buffer, replayed while they do (a gradient another block reallocated, a fed batch of
  /// another size: run again, then captured again).
  struct Graph {
    std::shared_ptr<void> exec;  // the instantiated graph (CudaContext::destroy_graph)
    std::vector<const Value*> values;  // every tensor the block's ops read or write (its feeds among them)
    std::vector<std::pair<Shape, const void*>> key, last, now;  // their shapes and buffers: captured with / last run / this run
    int same = 0;      // runs in a row whose tensors matched the run before
    bool off = false;  // never for this block: control flow or a random op on the executor's seeds, or a failed capture
  } graph_;
};

/// Values fetched by a run that was queued on a GPU, on their way to the host (Executor::run_async,
/// Optimizer::step_async): wait() returns them once the run has finished on the device, ready() asks without
/// waiting. A CPU run's values are there when it returns. Until wait() the host must neither read them nor
/// write the run's feeds in page-locked memory (those in ordinary memory were copied before the run returned);
/// dropping a PendingFetch without waiting is allowed.
class PendingFetch {
 public:
  PendingFetch() = default;
  PendingFetch(std::vector<LoDTensor> values, Fence arrived) : values_(std::move(values)), arrived_(std::move(arrived)) {}
  bool ready() const { return arrived_.done(); }
  std::vector<LoDTensor>& wait() & {
    arrived_.wait();
    arrived_ = Fence();
    return values_;
  }
  /// Of a temporary (`opt.step_async(f).wait()`): the values themselves, not a reference into it.
  std::vector<LoDTensor> wait() && { return std::move(wait()); }

 private:
  std::vector<LoDTensor> values_;
  Fence arrived_;
};

namespace detail {
/// The fences of an executor's last runs that left copies to or from page-locked host memory queued on a GPU,
/// at most N: admitting another run then waits for the oldest. Each such run holds page-locked blocks (staged
/// feeds, fetched values) that are reused only once its copies have run, so a host that never waits (run_async
/// calls whose PendingFetches are dropped unread) would otherwise pin host memory without bound, as far ahead
/// as CUDA's launch queue lets it go. `F` is Fence; tests give it another type with wait().
template <class F, size_t N>
class RunWindow {
 public:
  /// Before a run: waits until fewer than N runs are held.
  void admit() {
    while (held_.size() >= N) {
      F oldest = std::move(held_.front());
      held_.erase(held_.begin());
      oldest.wait();
    }
  }
  /// After a run that queued host copies: its fence.
  void hold(F fence) { held_.push_back(std::move(fence)); }
  size_t held() const { return held_.size(); }

 private:
  std::vector<F> held_;  // oldest first
};

}  // namespace detail

class Executor {
 public:
  /// An executor for `place` (`oar::cpu()`, `oar::cuda(0)`); an oar::Error when that device does not exist.
  explicit Executor(Place place = cpu(), uint64_t seed = 0);
  Place place() const { return place_; }
  const DeviceContext& device() const { return *dev_; }
  DeviceContext& device() { return *dev_; }

  /// Prepares `block` of `program` (copied, so the caller's program may change afterwards) to run in `scope`.
  std::shared_ptr<PreparedBlock> prepare(const Program& program, Scope& scope, int block = 0, PrepareOptions options = {});
  std::shared_ptr<PreparedBlock> prepare(std::shared_ptr<const Program> program, Scope& scope, int block = 0, PrepareOptions options = {});

  /// Runs a prepared block with `feeds`, returning the `fetch` variables (sharing their storage).
  std::vector<LoDTensor> run(PreparedBlock& p, Scope& scope, const FeedMap& feeds = {}, const std::vector<std::string>& fetch = {});
  /// The same into `out`, whose storage is reused: a run whose shapes repeat allocates nothing on the heap.
  void run(PreparedBlock& p, Scope& scope, const FeedMap& feeds, const std::vector<std::string>& fetch, std::vector<LoDTensor>& out);
  /// The same without waiting for the run on a GPU: its fetched values are copied into page-locked host tensors
  /// on the run's stream, and `arrived` receives the fence after all the run queued, those copies included
  /// (neither the values may be read nor page-locked feeds written before it is done). Values over
  /// detail::kMaxQueuedHostCopy, or when no more memory can be pinned, are copied before it returns. On the CPU
  /// the run has finished and `arrived` is empty. On a GPU an executor has at most four runs with such copies in
  /// flight: the fifth waits for the first (page-locked blocks are reused only once their copies have run).
  void run(PreparedBlock& p, Scope& scope, const FeedMap& feeds, const std::vector<std::string>& fetch, std::vector<LoDTensor>& out, Fence& arrived);
  /// That run's values as a PendingFetch.
  PendingFetch run_async(PreparedBlock& p, Scope& scope, const FeedMap& feeds = {}, const std::vector<std::string>& fetch = {});

  /// A control-flow op (its OpDef::run_by), errors naming it as op `index` of the block.
  void run_control(PreparedBlock& p, PreparedBlock::Step& s, int index);
  /// conditional_block runs its sub-block, in a child scope of the block's temporaries (the sub-block's own
  /// variables live there; it reads and writes the outer ones through scope lookup), when its condition holds:
  /// a scalar bool that is true (is_scalar_condition), or else every Cond tensor non-empty. Fluid's rule; the
  /// outputs keep their previous values when it does not run. With `grad`, conditional_block_grad.
  void run_conditional(PreparedBlock& p, PreparedBlock::Step& s, bool grad);
  /// conditional_block_grad: when the forward ran (`ran`, its condition), its grad block in a child of the
  /// forward's scope, then the inputs' gradients out of it; zeros for those it does not reach, and for all of
  /// them when the forward did not run.
  void run_conditional_grad(PreparedBlock& p, PreparedBlock::Step& s, bool ran);

  /// `recurrent` runs its step block once per time step, each step in its own child scope of the block's
  /// temporaries (kept, with the block prepared in it, from run to run, and listed in the op's step_scopes);
  /// `recurrent_grad` runs its grad block in a child of each of those scopes, last step first.
  void run_recurrent(PreparedBlock& p, PreparedBlock::Step& s);
  void run_recurrent_grad(PreparedBlock& p, PreparedBlock::Step& s);
  /// `while` runs its body, each step in its own kept child scope (as recurrent's), while the condition holds,
  /// passing the loop variables from step to step; `while_grad` runs the body's grad block in a child of each of
  /// those scopes, last step first, passing the loop variables' gradients back.
  void run_while(PreparedBlock& p, PreparedBlock::Step& s);
  void run_while_grad(PreparedBlock& p, PreparedBlock::Step& s);
  /// What both read from their op on the first run (recurrent_grad shares recurrent's attributes).
  std::shared_ptr<PreparedBlock::Loop> make_loop(const KernelContext& c) const;

  /// Runs `block` of `program` once (a startup program, say): no feeds or fetches.
  void run(const Program& program, Scope& scope, int block = 0);
  /// Runs `program` with feeds and fetches; the preparation is cached per program object and its size.
  std::vector<LoDTensor> run(const Program& program, Scope& scope, const FeedMap& feeds, const std::vector<std::string>& fetch);

  /// Checks a fed tensor against the variable: dtype, rank, every known dim, its LoD levels against the
  /// variable's lod_level, and the LoD itself (starts at 0, never decreases, ends at the rows).
  static void check_feed(const Variable& v, const LoDTensor& t);

 private:
  static size_t fingerprint(const Program& p);

  /// Creates the block's variables (persistable ones in `scope`, the rest in a child scope) and resolves
  /// every op's slots and kernel.
  /// With `proto` (the same block, prepared in another scope), its kernels and decoded attributes are reused.
  void bind(PreparedBlock& p, Scope& scope, const PreparedBlock* proto = nullptr);
  /// The block of `proto` prepared in `scope`, reusing proto's kernels and attributes (a step scope's block).
  std::shared_ptr<PreparedBlock> prepare_like(const PreparedBlock& proto, Scope& scope);
  /// Runs the steps (ops) of a bound block; with recycling, `fetched` survive and `batch` sizes first runs.
  void run_steps(PreparedBlock& p, const std::vector<const Value*>& fetched, int64_t batch);
  /// run_steps captured as a CUDA graph and launched; kept in `p` for replay when it may be launched again.
  void run_captured(PreparedBlock& p, const std::vector<const Value*>& fetched, int64_t batch);
  /// The `fetch` variables into `out`, copied to the host: with `arrived`, queued on a GPU's stream. On a GPU,
  /// with `arrived`, records the run's fence into it, and into in_flight_ when copies to or from page-locked
  /// memory were queued (`queued`: the feeds'; or the fetches').
  void fetch_outputs(PreparedBlock& p, const std::vector<std::string>& fetch, std::vector<LoDTensor>& out, Fence* arrived, bool queued);
  /// run()'s body (`arrived`: null for a run the host waits for); `fed` and `ran` (null unless profiling)
  /// receive when the feeds were in place and when the last kernel had been queued.
  void run_impl(PreparedBlock& p, Scope& scope, const FeedMap& feeds, const std::vector<std::string>& fetch, std::vector<LoDTensor>& out,
                Fence* arrived, std::chrono::steady_clock::time_point* fed, std::chrono::steady_clock::time_point* ran);
  /// run_impl, timed in three sections of the profiler when it is on.
  void run_profiled(PreparedBlock& p, Scope& scope, const FeedMap& feeds, const std::vector<std::string>& fetch, std::vector<LoDTensor>& out,
                    Fence* arrived);

  Place place_;
  std::unique_ptr<DeviceContext> dev_;
  std::map<std::tuple<const Program*, Scope*, size_t>, std::shared_ptr<PreparedBlock>> cache_;
  detail::RunWindow<Fence, 4> in_flight_;  // runs on a GPU whose host copies may still be pending
};

}  // namespace oar

#if OAR_HEADER_ONLY
#include "oar/runtime/executor-inl.hpp"
#endif
