// oar/ir/serialize.hpp: Program <-> framework.proto bytes (binary and text form), and program files.
// The bytes are Fluid's ProgramDesc wire format; ir/serialize-inl.hpp writes them through libprotobuf.
#pragma once
#include <filesystem>
#include <string>
#include <string_view>

#include "oar/config.hpp"
#include "oar/ir/program.hpp"

namespace oar {

/// The program as framework.proto bytes (a ProgramDesc).
std::string serialize(const Program& p);

/// Parses framework.proto bytes, checking block indices and parent links; truncated or garbage input is an
/// oar::Error, never a crash.
Program parse_program(std::string_view bytes);

/// The protobuf text form of the program.
std::string to_text(const Program& p);

Program parse_program_text(const std::string& text);

/// Writes the program (binary) atomically: a crash leaves the old file or the new one.
void save_program(const Program& p, const std::filesystem::path& path);

Program load_program(const std::filesystem::path& path);

}  // namespace oar

#if OAR_HEADER_ONLY
#include "oar/ir/serialize-inl.hpp"
#endif
