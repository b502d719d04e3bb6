// oar/core/place.hpp: where a tensor lives and a kernel runs: the CPU or CUDA device N.
#pragma once
#include <string>

#include <fmt/format.h>

namespace oar {

struct Place {
  enum class Kind { cpu, cuda } kind = Kind::cpu;
  int device = 0;
  bool is_cpu() const { return kind == Kind::cpu; }
  bool is_cuda() const { return kind == Kind::cuda; }
  friend bool operator==(const Place&, const Place&) = default;
  std::string str() const { return is_cpu() ? std::string("cpu") : fmt::format("cuda:{}", device); }
};

/// The CPU: `oar::Model model(topology, oar::cpu())`.
inline Place cpu() { return {}; }
/// CUDA device `device`: `oar::Model model(topology, oar::cuda(0))`.
inline Place cuda(int device = 0) { return {Place::Kind::cuda, device}; }

}  // namespace oar

template <> struct fmt::formatter<oar::Place> : fmt::formatter<std::string> {
  auto format(const oar::Place& p, format_context& ctx) const { return fmt::formatter<std::string>::format(p.str(), ctx); }
};
