// oar/io/idx.hpp: reading and writing IDX files (the MNIST / Fashion-MNIST format), gzipped or plain.
// Layout: 2 zero bytes, a type byte (0x08 = unsigned byte), a rank byte, rank big-endian uint32 dims, data.
#pragma once
#include <cstdint>
#include <filesystem>
#include <vector>

#include "oar/config.hpp"

namespace oar::io {

/// The contents of an unsigned-byte IDX file: dims (e.g. {60000, 28, 28}) and the row-major bytes.
struct IdxData {
  std::vector<int> dims;
  std::vector<uint8_t> data;
  /// Product of the dims (1 for rank 0).
  int64_t numel() const;
};

/// The IDX magic numbers of unsigned-byte files: 0x0801 (rank 1: labels), 0x0803 (rank 3: images).
inline constexpr uint32_t idx_magic_labels = 0x0801, idx_magic_images = 0x0803;

/// Reads an unsigned-byte IDX file, gzipped or plain (zlib reads both).
/// `expect_magic` (0: any unsigned-byte IDX of rank 1..4) is checked when given.
/// A missing, truncated, over-long or corrupted file is an oar::Error naming the path and what was wrong.
///   auto labels = oar::io::read_idx("train-labels-idx1-ubyte.gz", oar::io::idx_magic_labels);
IdxData read_idx(const std::filesystem::path& path, uint32_t expect_magic = 0);

/// Writes `d` as an unsigned-byte IDX file (gzipped when `gzip`); for tests and small tools.
void write_idx(const std::filesystem::path& path, const IdxData& d, bool gzip = false);

}  // namespace oar::io

#if OAR_HEADER_ONLY
#include "oar/io/idx-inl.hpp"
#endif
