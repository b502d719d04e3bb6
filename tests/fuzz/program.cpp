// tests/fuzz/program.cpp: a saved program (oar's or Fluid's `__model__`): parsed, then every op checked against
// its schema, as load_checked_program does before anything runs it.
#include "oar/ir/serialize.hpp"
#include "oar/ops/registry.hpp"
#include "tests/fuzz/fuzz.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return oar::fuzz::guarded([&] {
    oar::Program p = oar::parse_program(oar::fuzz::bytes(data, size));
    oar::validate_program(p);
    (void)oar::serialize(p);  // what validated writes back out
  });
}
