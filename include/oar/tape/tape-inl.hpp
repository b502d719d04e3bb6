// oar/tape/tape-inl.hpp: the implementation of tape.hpp (included by it when header-only; compiled once into liboar otherwise).
#pragma once
#include "oar/tape/tape.hpp"

namespace oar {

OAR_FUNC detail::TapeState& Var::state() const {
  if (!state_) throw Error("this oar::Var is empty (default-constructed): assign a layer's result to it first");
  if (!state_->alive)
    throw Error(fmt::format("this Var ({}) was recorded on an oar::Tape that no longer exists", state_->creations.empty() ? std::string("?") : state_->creations[index_].kind),
                state_->creations.empty() ? Origin{} : state_->creations[index_].origin);
  return *state_;
}

OAR_FUNC void Var::add_input(const Var& v, std::string_view option) {
  detail::TapeState& s = state();
  const Creation& c = s.creations[index_];
  if (v.state_ != state_) throw Error(fmt::format("{}: .{}(...) takes a Var of the same tape", c.kind, option), c.origin);
  if (v.index_ >= index_)
    throw Error(fmt::format("{}: .{}(...) takes a Var recorded before the layer (here {} is recorded after it)", c.kind, option, v.kind()), v.origin());
  ++s.version;
  s.creations[index_].inputs.push_back(v);
}

OAR_FUNC const std::string& Topology::name_of(const Var& v) const {
  if (v.index() >= creation_outputs.size() || creation_outputs[v.index()].size() <= size_t(v.output()))
    throw Error(fmt::format("{} is not part of this program (it was recorded after the outputs, skipped or in another branch)", v.kind()), v.origin());
  return creation_outputs[v.index()][size_t(v.output())];
}

OAR_FUNC Branch::Branch() : tape_(&Tape::current()) { tape_->open_branch(); }
OAR_FUNC Branch::~Branch() { tape_->close_branch(); }

OAR_FUNC Tape::Tape() : state_(std::make_shared<detail::TapeState>()) { detail::tape_stack.push_back(this); }

OAR_FUNC Tape::~Tape() {
  state_->alive = false;
  std::erase(detail::tape_stack, this);
  // A creation's inputs (and the Vars its replay captured) hold the state that holds the creation: let go of
  // them, or every tape would keep itself alive. Kind and origin stay, for the error a Var of this tape gives.
  for (Creation& c : state_->creations) {
    c.inputs.clear();
    c.replay = nullptr;
  }
}

OAR_FUNC Tape& Tape::current(const Origin& where) {
  if (detail::tape_stack.empty())
    throw Error("no oar::Tape is alive on this thread: create one (`oar::Tape tape;`) before calling layer functions", where);
  return *detail::tape_stack.back();
}

OAR_FUNC std::vector<Var> Tape::record(Creation c) {
  for (auto& in : c.inputs) check_input(in, c);
  c.branches = state_->open_branches;
  c.parent = state_->body_stack.empty() ? -1 : state_->body_stack.back();
  if (c.parent >= 0) ++state_->version;  // a body grows: its owner replays differently
  if (!state_->share_stack.empty()) {
    auto& [id, count] = state_->share_stack.back();
    c.share = {id, count++};
  }
  int n = c.num_outputs;
  state_->creations.push_back(std::move(c));
  std::vector<Var> out;
  for (int i = 0; i < n; ++i) out.push_back(Var(state_, state_->creations.size() - 1, i));
  return out;
}

OAR_FUNC void Tape::check_input(const Var& in, const Creation& c) const {
  if (!in.state_) throw Error(fmt::format("{}: an input is an empty oar::Var (default-constructed)", c.kind), c.origin);
  if (!in.state_->alive)
    throw Error(fmt::format("{}: input {} (recorded at {}) belongs to an oar::Tape that no longer exists", c.kind, in.state_->creations[in.index_].kind,
                            in.state_->creations[in.index_].origin.str()),
                c.origin);
  if (in.state_ != state_)
    throw Error(fmt::format("{}: input {} (recorded at {}) belongs to another oar::Tape", c.kind, in.state_->creations[in.index_].kind,
                            in.state_->creations[in.index_].origin.str()),
                c.origin);
}

}  // namespace oar
