// oar/io/inference_model.hpp: Fluid's inference-model directory: `__model__` (the program pruned to the
// fetch targets, cloned for test, with feed ops in front and fetch ops at the end) and the parameters, one
// file per variable (named after it) or one combined `__params__` file (sorted by name).
#pragma once
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "oar/config.hpp"
#include "oar/ir/program.hpp"
#include "oar/device/scope.hpp"
#include "oar/device/tensor.hpp"

namespace oar::io {

/// A loaded inference model: the program, its feed and fetch names (in column order) and the parameters.
struct InferenceModel {
  Program program;
  std::vector<std::string> feeds;
  std::vector<std::string> fetches;
  std::vector<std::pair<std::string, LoDTensor>> params;
};

/// Writes `dir/__model__` and the persistables the pruned program needs, taken from `scope`, each with a checksum
/// sidecar (`__model__.oarsum`, `__params__.oarsum`). The directory is replaced as a whole (staged beside it, then
/// swapped in): a kill at any moment leaves the old model or the new one, never a mix. Files in `dir` that oar
/// did not write are kept. A read-only target or a full disk is an oar::Error naming `dir`, and the previous
/// model is untouched.
void save_inference_model(const std::filesystem::path& dir, const std::vector<std::string>& feeds, const std::vector<std::string>& fetches,
                          const Program& main, const Scope& scope, bool combined = true);

/// Reads a directory written by save_inference_model (or by Fluid with the same layout). Files with a sidecar are
/// checked against it: a damaged tensor is an oar::Error naming the file and the tensor. A model a crash left
/// aside during a save is put back first.
InferenceModel load_inference_model(const std::filesystem::path& dir);

/// A program file of a saved model, every op checked against its schema (validate_program): the file may be
/// damaged or written by another tool, and the kernels trust the schema. Checked against `path`.oarsum when there
/// is one. Errors name the file.
Program load_checked_program(const std::filesystem::path& path);

}  // namespace oar::io

#if OAR_HEADER_ONLY
#include "oar/io/inference_model-inl.hpp"
#endif
