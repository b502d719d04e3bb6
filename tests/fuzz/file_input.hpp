// tests/fuzz/file_input.hpp: for readers that take a path: the input written to one file per process.
#pragma once
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

namespace oar::fuzz {

inline std::filesystem::path input_file(std::string_view data, const char* name) {
  static const std::filesystem::path dir = [] {
    auto d = std::filesystem::temp_directory_path() / ("oar-fuzz-" + std::to_string(::getpid()));
    std::filesystem::create_directories(d);
    std::atexit([] {  // libFuzzer ends with exit(): the scratch file goes with the process
      std::error_code ec;
      std::filesystem::remove_all(std::filesystem::temp_directory_path() / ("oar-fuzz-" + std::to_string(::getpid())), ec);
    });
    return d;
  }();
  const std::filesystem::path p = dir / name;
  std::ofstream(p, std::ios::binary | std::ios::trunc).write(data.data(), std::streamsize(data.size()));
  return p;
}

}  // namespace oar::fuzz
