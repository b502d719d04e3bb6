// oar/core/place.hpp: where a tensor lives and a kernel runs: the CPU or CUDA device N.
#pragma once
#include <charconv>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "oar/core/error.hpp"

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

/// The place a command line names: "cpu", "cuda" (device 0) or "cuda:N"; an oar::Error for anything else.
inline Place parse_place(std::string_view s) {
  if (s == "cpu") return cpu();
  if (s == "cuda") return cuda(0);
  int n = -1;
  if (s.starts_with("cuda:")) {
    const char *b = s.data() + 5, *e = s.data() + s.size();
    if (auto [end, ec] = std::from_chars(b, e, n); ec != std::errc() || end != e || b == e) n = -1;
  }
  if (n < 0) throw Error(fmt::format("'{}' is not a place: cpu, cuda or cuda:N", s));
  return cuda(n);
}

/// The place `--device X` or `--device=X` names on a command line (parse_place), else `fallback`:
/// `oar::Model model(topology, oar::place_from_args(argc, argv));`
inline Place place_from_args(int argc, char** argv, Place fallback = cpu()) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "--device") {
      if (i + 1 == argc) throw Error("--device needs a place: cpu, cuda or cuda:N");
      return parse_place(argv[i + 1]);
    }
    if (a.starts_with("--device=")) return parse_place(a.substr(9));
  }
  return fallback;
}

}  // namespace oar

template <> struct fmt::formatter<oar::Place> : fmt::formatter<std::string> {
  auto format(const oar::Place& p, format_context& ctx) const { return fmt::formatter<std::string>::format(p.str(), ctx); }
};
