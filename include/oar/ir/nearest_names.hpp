// oar/ir/nearest_names.hpp: the names of a program nearest to a misspelt one, for error messages.
#pragma once
#include <algorithm>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "oar/ir/program.hpp"

namespace oar {

namespace detail {
/// " (nearest: 'a', 'b')": up to three names of `b` and its ancestors closest to `name` in edit distance, for
/// the error of a name that is not there; empty when none is near. Only an error pays for it.
inline std::string nearest_names(const Block& b, std::string_view name) {
  auto distance = [](std::string_view x, std::string_view y) {
    std::vector<size_t> row(y.size() + 1);
    for (size_t j = 0; j <= y.size(); ++j) row[j] = j;
    for (size_t i = 1; i <= x.size(); ++i) {
      size_t diag = row[0];
      row[0] = i;
      for (size_t j = 1; j <= y.size(); ++j) {
        size_t up = row[j];
        row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (x[i - 1] != y[j - 1])});
        diag = up;
      }
    }
    return row[y.size()];
  };
  const size_t limit = std::max<size_t>(2, name.size() / 2);
  std::vector<std::pair<size_t, std::string>> near;
  for (const Block* k = &b; k; k = k->parent())
    for (const Variable* v : k->vars())
      if (size_t d = distance(name, v->name()); d <= limit) near.emplace_back(d, v->name());
  std::sort(near.begin(), near.end());
  near.erase(std::unique(near.begin(), near.end()), near.end());
  if (near.empty()) return {};
  std::string out = " (nearest:";
  for (size_t i = 0; i < near.size() && i < 3; ++i) out += fmt::format("{} '{}'", i ? "," : "", near[i].second);
  return out + ")";
}
}  // namespace detail

}  // namespace oar
