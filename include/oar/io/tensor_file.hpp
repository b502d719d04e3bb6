// oar/io/tensor_file.hpp: Fluid's LoDTensor stream format (the bytes of `save`, `save_combine`, send/recv),
// and tensor files written atomically with a checksum sidecar `<file>.oarsum` (which Fluid ignores; format and
// crash safety in io/durable-inl.hpp). Every read is validated: a bad file is an oar::Error, never a crash.
#pragma once
#include <filesystem>
#include <iosfwd>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "oar/config.hpp"
// oar::detail::read_file and write_file_atomic come with the savers: callers (and tests) use them too.
#include "oar/core/file.hpp"
#include "oar/device/tensor.hpp"

namespace oar::io {

/// Appends `t` to `out` in Fluid's LoDTensor stream format (little-endian):
///   uint32 version = 0
///   uint64 lod_level; per level: uint64 nbytes, then nbytes / 8 uint64 offsets
///   uint32 tensor version = 0; int32 desc_size; desc_size bytes of VarType.TensorDesc {data_type, dims}
///   numel * sizeof(dtype) bytes of data
/// A rank-0 tensor is written with no dims (one element, as Fluid reads it).
void write_lod_tensor(std::string& out, const LoDTensor& t);
void write_lod_tensor(std::ostream& out, const LoDTensor& t);

/// Reads one LoDTensor from the front of `in` and advances `in` past it. `what` names the source in
/// errors (a file, a variable). oar::Error on a bad version, unknown dtype, negative dim, bad LoD, or too
/// few bytes; nothing larger than the bytes left in `in` is ever allocated.
LoDTensor read_lod_tensor(std::string_view& in, std::string_view what = "tensor stream");

/// Writes one tensor to `path` (Fluid's `save` op) and its crc32 to `path`.oarsum, crash-safely: a kill at any
/// moment leaves the old file or the new one, each with a sidecar that accepts it. A read-only directory or a
/// full disk is an oar::Error naming `path` and errno's text, and the previous file is untouched.
void save_tensor(const std::filesystem::path& path, const LoDTensor& t);
/// Reads a file written by save_tensor (or Fluid's `save`). oar::Error naming the file when it is missing,
/// truncated, corrupted, has bytes after the tensor, or does not match its `.oarsum` (a file without one, as
/// Fluid writes them, is not checked).
LoDTensor load_tensor(const std::filesystem::path& path);

/// Writes several tensors to one file, sorted by name and concatenated (Fluid's `save_combine` after
/// `save_vars` sorted its inputs). The names are not stored in it; the sidecar `path`.oarsum lists each
/// tensor's name, byte length and crc32. Crash-safe and errors as save_tensor; oar::Error on duplicate names.
void save_combined(const std::filesystem::path& path, std::vector<std::pair<std::string, LoDTensor>> tensors);
/// Reads a file written by save_combined holding the tensors `names` (in any order): the file holds them
/// sorted by name. Returns them in the order of `names`. oar::Error naming the file and the tensor when the
/// file is short, corrupted, holds more tensors than `names`, or a tensor's bytes do not match its checksum.
std::vector<LoDTensor> load_combined(const std::filesystem::path& path, const std::vector<std::string>& names);

}  // namespace oar::io

#if OAR_HEADER_ONLY
#include "oar/io/tensor_file-inl.hpp"
#endif
