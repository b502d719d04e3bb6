// oar/api/gradient_machine-inl.hpp: the implementation of gradient_machine.hpp (included by it when header-only; compiled once into liboar otherwise).
#pragma once
#include "oar/api/gradient_machine.hpp"

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "oar/core/error.hpp"
#include "oar/ops/op.hpp"

namespace oar {

OAR_FUNC Tensor Gradient::to_dense() const {
  if (!sparse) return dense.to(cpu());
  Tensor v = values.to(cpu());
  Shape s = v.shape();
  if (s.rank() == 0) s = Shape{int64_t(rows.size())};
  s[0] = height;
  Tensor out(s, v.dtype(), cpu());
  std::memset(out.raw(), 0, out.bytes());
  const int64_t width = rows.empty() ? 0 : v.numel() / int64_t(rows.size());
  OAR_CHECK(v.dtype() == f32 || v.dtype() == f64, "Gradient::to_dense: sparse values must be f32 or f64, got {}", oar::name(v.dtype()));
  visit_dtype(v.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_floating_point_v<T>) {
      T* o = out.data<T>();
      const T* x = v.data<T>();
      for (size_t i = 0; i < rows.size(); ++i) {
        OAR_CHECK(rows[i] >= 0 && rows[i] < height, "Gradient::to_dense: row {} is outside [0, {})", rows[i], height);
        for (int64_t j = 0; j < width; ++j) o[rows[i] * width + j] += x[int64_t(i) * width + j];
      }
    }
  });
  return out;
}

OAR_FUNC GradientMachine::GradientMachine(Model& model, std::string loss, std::vector<std::string> fetch, uint64_t seed)
    : model_(&model), loss_(std::move(loss)), exe_(model.place(), seed ? seed : model.seed() + 1000) {
  fetch_ = {loss_};
  for (auto& f : fetch)
    if (f != loss_) fetch_.push_back(f);
  build();
}

OAR_FUNC GradientMachine::GradientMachine(Model& model, const Var& loss, std::span<const Var> fetch, uint64_t seed)
    : GradientMachine(model, model.name_of(loss), model.names_of(fetch), seed) {}

OAR_FUNC GradientMachine::~GradientMachine() {
  if (prepared_ && prepared_->local_scope()) model_->scope().drop(prepared_->local_scope());
}

OAR_FUNC void GradientMachine::build() {
  Program p = model_->program();
  // Data layers made with .stop_gradient(false) ask for their gradient: tracked (kept) from the start.
  for (auto& f : model_->feeds())
    if (const Variable* v = p.global_block().find_var(f); v && !v->stop_gradient() && is_float(v->dtype())) tracked_.insert(f);
  // Mixed precision: 16-bit products and convolutions where kernels for them exist (CUDA), and the backward
  // pass of the scaled loss, unscaled at its end (so gradients() are the loss's own).
  if (amp_ && model_->place().is_cuda()) optim::cast_to_half(p, amp_->dtype);
  auto pg = append_backward(p, loss_, {}, tracked_);
  if (amp_) {
    optim::scale_loss_gradient(p, loss_);
    optim::append_unscale(p, pg);
  }
  if (collective_) optim::append_collective(p, loss_, pg, *collective_);
  auto program = std::make_shared<const Program>(std::move(p));
  auto prepared = exe_.prepare(program, model_->scope());
  if (prepared_ && prepared_->local_scope()) model_->scope().drop(prepared_->local_scope());
  params_grads_ = std::move(pg);
  program_ = std::move(program);
  prepared_ = std::move(prepared);
  ++plan_;
  apply_keep();
}

OAR_FUNC void GradientMachine::apply_keep() {
  std::set<std::string> k = keep_;
  for (auto& pg : params_grads_) k.insert(pg.grad);
  for (auto& t : tracked_) k.insert(grad_var_name(t));
  if (amp_) k.insert(optim::kFoundInfinite);  // the update program reads it
  k.insert(fetch_.begin(), fetch_.end());
  prepared_->recycle_buffers(std::move(k));
}

OAR_FUNC void GradientMachine::keep(const std::vector<std::string>& names) {
  keep_.insert(names.begin(), names.end());
  apply_keep();
}

OAR_FUNC void GradientMachine::keep(std::span<const Var> vars) { keep(model_->names_of(vars)); }

OAR_FUNC std::vector<LoDTensor> GradientMachine::forward_backward(const FeedMap& feeds) {
  std::vector<LoDTensor> out;
  forward_backward(feeds, out);
  return out;
}

OAR_FUNC void GradientMachine::forward_backward(const FeedMap& feeds, std::vector<LoDTensor>& out) { run_pass(feeds, out, nullptr); }

OAR_FUNC void GradientMachine::forward_backward(const FeedMap& feeds, std::vector<LoDTensor>& out, Fence& arrived) { run_pass(feeds, out, &arrived); }

OAR_FUNC PendingFetch GradientMachine::forward_backward_async(const FeedMap& feeds) {
  std::vector<LoDTensor> out;
  Fence arrived;
  run_pass(feeds, out, &arrived);
  return PendingFetch(std::move(out), std::move(arrived));
}

OAR_FUNC void GradientMachine::run_pass(const FeedMap& feeds, std::vector<LoDTensor>& out, Fence* arrived) {
  ran_ = false;
  const uint64_t rng = exe_.device().counter();
  if (arrived) exe_.run(*prepared_, model_->scope(), feeds, fetch_, out, *arrived);
  else exe_.run(*prepared_, model_->scope(), feeds, fetch_, out);
  // Shares the tensors. When the feed names repeat, value by value: the map's own assignment rebuilds each
  // value in its reused node, copying a fed LoD into new vectors on every step; assigning reuses them.
  const bool same_names = std::equal(last_feeds_.begin(), last_feeds_.end(), feeds.begin(), feeds.end(),
                                     [](const auto& a, const auto& b) { return a.first == b.first; });
  if (same_names) {
    auto src = feeds.begin();
    for (auto& kv : last_feeds_) kv.second = (src++)->second;
  } else {
    last_feeds_ = feeds;
  }
  last_rng_ = rng;
  ran_ = true;
  ran_plan_ = plan_;
  updated_ = false;
}

OAR_FUNC bool GradientMachine::has_gradient(const std::string& x, const Origin& where) const {
  for (auto& pg : params_grads_)
    if (pg.param == x) return true;
  if (tracked_.count(x))
    for (auto* op : program_->global_block().ops())
      for (auto& n : op->output_names())
        if (n == grad_var_name(x)) return true;
  const Variable* v = model_->program().global_block().find_var(x);
  if (!v) throw Error(fmt::format("gradient of '{}': the model's program has no such variable", x), where);
  if (!is_float(v->dtype()))
    throw Error(fmt::format("gradient of '{}': only floating-point variables have a gradient, and '{}' is {}", x, x, oar::name(v->dtype())), where);
  Program p = model_->program();
  std::set<std::string> wanted = tracked_;
  wanted.insert(x);
  append_backward(p, loss_, {}, wanted);
  for (auto* op : p.global_block().ops())
    for (auto& n : op->output_names())
      if (n == grad_var_name(x)) return false;
  throw Error(fmt::format("gradient of '{}': the loss '{}' does not depend on it through differentiable variables (it does not reach the loss, "
                          "or only through integer variables or variables with stop_gradient), so it has no gradient",
                          x, loss_),
              where);
}

OAR_FUNC void GradientMachine::track_gradient(const std::string& x, std::source_location loc) {
  if (has_gradient(x, Origin(loc, "track_gradient"))) return;
  tracked_.insert(x);
  build();
}

OAR_FUNC void GradientMachine::track_gradient(const Var& x, std::source_location loc) { track_gradient(model_->name_of(x), loc); }

OAR_FUNC void GradientMachine::rerun() {
  // The other ranks would not take part in this pass's collectives.
  OAR_CHECK(!collective_ || collective_->nranks == 1, "gradient: in data-parallel training a gradient the step did not compute cannot be computed "
            "again on one rank alone; call track_gradient() before the step");
  // Persistables the program writes (batch norm's running statistics) would take the batch a second time.
  std::map<LoDTensor*, Tensor> saved;
  for (auto* op : program_->global_block().ops())
    for (auto& n : op->output_names()) {
      const Variable* v = program_->global_block().find_var(n);
      Value* val = v && v->persistable() ? model_->scope().find(n) : nullptr;
      if (val && val->is_tensor() && val->tensor().initialized() && !saved.count(&val->tensor())) saved[&val->tensor()] = val->tensor().clone();
    }
  DeviceContext& dev = exe_.device();
  const uint64_t now = dev.counter();
  auto restore = [&] {
    dev.set_counter(now);
    for (auto& [t, v] : saved) t->copy_from(v);
  };
  dev.set_counter(last_rng_);  // the same dropout masks as the run being repeated
  std::vector<LoDTensor> out;
  try {
    exe_.run(*prepared_, model_->scope(), last_feeds_, fetch_, out);
  } catch (...) {
    restore();
    throw;
  }
  restore();
  ran_plan_ = plan_;
}

OAR_FUNC LoDTensor GradientMachine::gradient(const std::string& x, std::source_location loc) {
  const Origin where(loc, "gradient");
  if (!ran_) throw Error(fmt::format("gradient of '{}': run forward_backward first", x), where);
  const bool computed = has_gradient(x, where) && ran_plan_ == plan_;
  if (!computed && updated_)
    throw Error(fmt::format("gradient of '{}': the last forward_backward did not compute it and the parameters have been updated since, so that "
                            "pass cannot be repeated; ask for it before the update, or call track_gradient(\"{}\") before forward_backward",
                            x, x),
                where);
  if (!computed) {
    track_gradient(x, loc);
    rerun();
  }
  Value* v = scope().find(grad_var_name(x));
  if (v && v->is_selected_rows()) {
    const SelectedRows& sr = v->selected_rows();
    return LoDTensor(Gradient{.sparse = true, .rows = sr.rows, .values = sr.value, .height = sr.height}.to_dense());
  }
  if (!v || !v->is_tensor() || !v->tensor().initialized())
    throw Error(fmt::format("gradient of '{}': '{}' holds no value after forward_backward", x, grad_var_name(x)), where);
  const LoDTensor& t = v->tensor();
  return t.place().is_cpu() ? t : LoDTensor(t.to(cpu()), t.lod());
}

OAR_FUNC LoDTensor GradientMachine::gradient(const Var& x, std::source_location loc) { return gradient(model_->name_of(x), loc); }

OAR_FUNC std::map<std::string, Gradient> GradientMachine::gradients() const {
  std::map<std::string, Gradient> out;
  if (!ran_) throw Error("gradients(): run forward_backward first");
  if (ran_plan_ != plan_)
    throw Error("gradients(): track_gradient() prepared the machine again since the last forward_backward, whose gradients went with its "
                "scope: run forward_backward again");
  for (auto& [p, g] : params_grads_) {
    Value* v = scope().find(g);
    if (v && v->is_selected_rows()) {
      const SelectedRows& sr = v->selected_rows();
      out[p] = Gradient{.sparse = true, .rows = sr.rows, .values = sr.value, .height = sr.height};
    } else if (v && v->is_tensor() && v->tensor().initialized()) {
      out[p] = Gradient{.dense = v->tensor()};
    } else {
      throw Error(fmt::format("gradients(): the gradient of parameter '{}' ('{}') holds neither a tensor nor selected rows after forward_backward", p, g));
    }
  }
  return out;
}

}  // namespace oar
