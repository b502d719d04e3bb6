// oar/layers/rnn_builder-inl.hpp: the implementation of rnn_builder.hpp (included by it when header-only; compiled once into liboar otherwise).
#pragma once
#include "oar/layers/rnn_builder.hpp"

#include <algorithm>

namespace oar {

OAR_FUNC void RnnBuilder::check_in_step(const char* what, std::source_location loc) const {
  if (!rec_->in_step)
    throw Error(fmt::format("{}: call it inside this {}'s step function (rnn.step([&] {{ ... }})){}", what, name_,
                            rec_->closed ? ", which has already been recorded" : ""),
                Origin(loc, what));
}

OAR_FUNC Var RnnBuilder::begin_step(std::source_location loc) {
  if (rec_->owner.valid())
    throw Error(fmt::format("{}::step: a {} has one step, and this one's was given at {}", name_, name_, rec_->owner.origin().str()), Origin(loc, layer_));
  rec_->owner = record_owner(loc);
  rec_->in_step = true;
  return rec_->owner;
}

OAR_FUNC void RnnBuilder::end_step() {
  rec_->closed = true;
  if (rec_->outputs.empty()) throw Error(fmt::format("{}::step: the step gives no output: call rnn.output(v) in it", name_), rec_->owner.origin());
  for (auto& m : rec_->memories)
    if (!m.next.valid()) throw Error(std::string(detail::kNeverUpdated), m.var.origin());
  for (size_t i = 0; i < rec_->outputs.size(); ++i) rec_->outputs[i].result = record_output(i);
}

OAR_FUNC void RnnBuilder::update_memory(const Var& mem, const Var& value, std::source_location loc) {
  check_in_step("update_memory", loc);
  const Origin at(loc, "update_memory");
  auto& memories = rec_->memories;
  auto it = std::find_if(memories.begin(), memories.end(), [&](const auto& m) { return m.var == mem; });
  if (it == memories.end())
    throw Error(fmt::format("update_memory: the first argument ({}) is not a memory of this {}: make it with rnn.memory(...)",
                            mem.valid() ? fmt::format("{} recorded at {}", mem.kind(), mem.origin().str()) : std::string("an empty oar::Var"), name_),
                at);
  if (it->next.valid()) throw Error(fmt::format("update_memory: this memory is already updated at {}", it->updated.str()), at);
  if (!value.valid()) throw Error("update_memory: the new value is an empty oar::Var", at);
  it->next = value;
  it->updated = at;
}

OAR_FUNC Var RnnBuilder::operator()(std::source_location loc) const {
  auto outs = outputs(loc);
  if (outs.size() != 1)
    throw Error(fmt::format("{}: the step has {} outputs: take them with rnn.outputs()", name_, outs.size()), Origin(loc, layer_));
  return outs[0];
}

OAR_FUNC std::vector<Var> RnnBuilder::outputs(std::source_location loc) const {
  if (!rec_->closed || rec_->in_step)
    throw Error(fmt::format("{}: its outputs exist once the step is recorded: call rnn.step([&] {{ ... }}) first", name_), Origin(loc, layer_));
  std::vector<Var> out;
  for (auto& o : rec_->outputs) out.push_back(o.result);
  return out;
}

}  // namespace oar
