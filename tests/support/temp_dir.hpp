// tests/support/temp_dir.hpp: an empty directory of a test's own under the system's temporary one.
#pragma once
#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>
#include <string_view>

namespace oar::test {

/// <tmp>/oar_<what>_<pid>_<name>, emptied and created: one per process and name, so tests running side by side
/// never share files.
inline std::filesystem::path fresh_dir(std::string_view what, std::string_view name) {
  namespace fs = std::filesystem;
  fs::path d = fs::temp_directory_path() / fmt::format("oar_{}_{}_{}", what, ::getpid(), name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

}  // namespace oar::test
