// oar/core/names.hpp: unique names `fc_0`, `fc_0.w_0`, ...: one counter per prefix, starting at 0.
#pragma once
#include <map>
#include <string>

namespace oar {

class NameGenerator {
 public:
  /// "fc" -> "fc_0", then "fc_1", ...
  std::string operator()(const std::string& prefix) { return prefix + "_" + std::to_string(ids_[prefix]++); }
  void reset() { ids_.clear(); }

 private:
  std::map<std::string, int> ids_;
};

}  // namespace oar
