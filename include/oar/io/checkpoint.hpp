// oar/io/checkpoint.hpp: the checkpoint file: named sections (meta text, programs, tensors) behind a magic
// and a version, closed by an FNV-1a checksum; written atomically (temp file, fsync, rename), so a crash
// during a save leaves the previous checkpoint intact. A truncated or corrupted file is an oar::Error.
#pragma once
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "oar/config.hpp"
#include "oar/device/tensor.hpp"

namespace oar::io {

struct Checkpoint {
  std::map<std::string, std::string> meta;                  ///< key -> value (text)
  std::map<std::string, std::string> blobs;                 ///< e.g. "main" -> program bytes
  std::vector<std::pair<std::string, LoDTensor>> tensors;   ///< persistable state, sorted by name
};

/// Writes `c` to `path` atomically.
void save_checkpoint(const std::filesystem::path& path, const Checkpoint& c);

/// Reads a checkpoint; any truncation, corruption (checksum) or malformed section is an oar::Error.
Checkpoint load_checkpoint(const std::filesystem::path& path);

}  // namespace oar::io

#if OAR_HEADER_ONLY
#include "oar/io/checkpoint-inl.hpp"
#endif
