// tests/fuzz/fuzz.hpp: what every fuzz target shares. An input must end in a result or an oar::Error (the
// serving parser's RequestError, an HTTP 4xx, counts too); any other exception is a bug, reported as a crash
// so that libFuzzer keeps the input.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string_view>

#include "oar/core/error.hpp"

namespace oar::fuzz {

inline std::string_view bytes(const uint8_t* data, size_t size) { return {reinterpret_cast<const char*>(data), size}; }

/// Runs `body`; an oar::Error is an accepted answer to bad input, anything else aborts.
template <class F>
int guarded(F&& body) {
  try {
    body();
  } catch (const oar::Error&) {
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz: an exception that is not an oar::Error: %s\n", e.what());
    std::abort();
  }
  return 0;
}

}  // namespace oar::fuzz
